// Virtual IPs (docs/network.md, "Virtual IP"): one address of the LAN that one healthy node holds
// at a time and that moves when that node goes away.
//
// Three parts share this vocabulary:
// - the node config's `vips` (VipSpec): what addresses exist, where a node finds the interface to
//   put one on (by name or by a subnet one of its addresses is in), and which nodes may hold it;
//   the leader's value counts, as for `mesh.cidr`;
// - `shoal.vips/<address>` (VipRecord): written only by the leader's loops (src/control/vip-holders.ts),
//   the spec and its holder (node id and epoch) and since when;
// - `shoal.vip-releases/<address>` (VipRelease): written only by the holder's own agent
//   (net/vip-agent.ts) once it has taken the address off its interface, naming the record's
//   revision it let go of: the leader may give the VIP to another node at once (a planned stop,
//   a drain), rather than wait until the holder's lease has surely run out.
//
// The holder keeps the address only while its VIP lease (`shoal.vip-leases/<node id>`, below)
// holds, with a kernel lifetime no longer than what is left of it; the leader gives the VIP to
// another node only after the old holder released it at the record's revision, or once its VIP
// lease has surely run out (lease + margin after the last renewal it applied). So two nodes never
// hold one VIP, a partition included.

import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';

export const vipsCollection = 'shoal.vips';
export const vipReleasesCollection = 'shoal.vip-releases';

/** At most this many VIPs in a cluster's config. */
export const vipsMax = 32;

const ipv4Re = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** The address as a 32-bit number, or null when it is not a dotted IPv4 address. */
export function ipv4ToNumber(s: string): number | null {
  if (!ipv4Re.test(s)) return null;
  return s.split('.').reduce((acc, p) => acc * 256 + Number(p), 0);
}

/** `a.b.c.d/n` as its network number and prefix length, or null. */
export function parseCidr(s: string): { net: number; prefix: number } | null {
  const m = /^([^/]+)\/(\d{1,2})$/.exec(s);
  if (m === null) return null;
  const addr = ipv4ToNumber(m[1] ?? '');
  const prefix = Number(m[2]);
  if (addr === null || prefix > 32) return null;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { net: (addr & mask) >>> 0, prefix };
}

/** The address as a 128-bit number, or null when it is not an IPv6 address of hex groups (no dotted IPv4 tail). */
export function ipv6ToBigInt(s: string): bigint | null {
  if (s.length > 39) return null;
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const groups = (h: string | undefined): string[] => (h === undefined || h === '' ? [] : h.split(':'));
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  if (![...head, ...tail].every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/**
 * RFC 5952's text for an IPv6 address (lower case, no leading zeros, the longest run of two or
 * more zero groups as `::`, the first of equal runs): what iproute2 prints, so what the VIP agent
 * compares with `ip -j addr show`.
 */
export function formatIpv6(n: bigint): string {
  const g = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  return best < 0 ? hex.join(':') : `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** Whether `s` is an IPv6 address (any spelling). */
export function isIpv6(s: string): boolean {
  return ipv6ToBigInt(s) !== null;
}

/**
 * Why `s` cannot be a VIP's address, or null when it can: an IPv4 address, or a unicast IPv6
 * address of a LAN (global or ULA) written as iproute2 prints it, since the record's id is the
 * address and the agent finds it on the interface by that text.
 */
export function vipAddressProblem(s: string): string | null {
  if (ipv4Re.test(s)) return null;
  const n = ipv6ToBigInt(s);
  if (n === null) return 'an IPv4 address (a.b.c.d) or an IPv6 address (hex groups, as fd00:38::100)';
  if (n >> 120n === 0xffn) return `${s} is a multicast address: a VIP is a unicast address of the LAN`;
  if (n >> 118n === 0x3fan) return `${s} is link-local (fe80::/10): a VIP is a global or unique-local (fc00::/7) address of the LAN`;
  if (n <= 1n || n >> 32n === 0xffffn) return `${s} is not a LAN address (unspecified, loopback or IPv4-mapped): write the IPv4 address itself, or a global or unique-local IPv6 one`;
  const canonical = formatIpv6(n);
  if (canonical !== s) return `write ${s} as ${canonical} (RFC 5952, as \`ip addr\` prints it): the VIP's record is named by the address`;
  return null;
}

/** `x::/n` as its network number and prefix length (host bits dropped), or null. */
export function parseCidr6(s: string): { net: bigint; prefix: number } | null {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(s);
  if (m === null) return null;
  const addr = ipv6ToBigInt(m[1] ?? '');
  const prefix = Number(m[2]);
  if (addr === null || prefix > 128) return null;
  return { net: addr & mask6(prefix), prefix };
}

function mask6(prefix: number): bigint {
  return prefix === 0 ? 0n : ((1n << 128n) - 1n) ^ ((1n << BigInt(128 - prefix)) - 1n);
}

/** Whether `address` is inside `cidr`: both IPv4 or both IPv6 (false across families). */
export function cidrContains(cidr: string, address: string): boolean {
  if (cidr.includes(':')) {
    const c = parseCidr6(cidr);
    const a = ipv6ToBigInt(address);
    return c !== null && a !== null && (a & mask6(c.prefix)) === c.net;
  }
  const c = parseCidr(cidr);
  const a = ipv4ToNumber(address);
  if (c === null || a === null) return false;
  const mask = c.prefix === 0 ? 0 : (0xffffffff << (32 - c.prefix)) >>> 0;
  return ((a & mask) >>> 0) === c.net;
}

/** The prefix length of one VIP's own address on the interface: /32, or /128 for IPv6. */
export function vipPrefixLength(address: string): 32 | 128 {
  return address.includes(':') ? 128 : 32;
}

const vipAddressSchema = z.string().superRefine((s, ctx) => {
  const problem = vipAddressProblem(s);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});
const ifNameSchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,15}$/, 'an interface name (1-15 letters, digits, or . _ : -)');
const cidrSchema = z.string().refine((s) => parseCidr(s) !== null || parseCidr6(s) !== null, 'an IPv4 subnet (a.b.c.d/n) or an IPv6 one (x::/n)');
const labelKey = z.string().regex(/^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62}[A-Za-z0-9])?$/, 'a label key');

/** One VIP of the config (`vips[]`). */
export const vipSpecSchema = z.object({
  /** The address: IPv4, added as /32, or IPv6 (RFC 5952 text), added as /128. */
  address: vipAddressSchema,
  /** The interface to add it on (same name on every node that may hold it). */
  interface: ifNameSchema.optional(),
  /** Or: the interface that has an address in this subnet (the LAN), on each node. */
  subnet: cidrSchema.optional(),
  /** Node names or ids that may hold it; absent: any node. */
  nodes: z.array(z.string().min(1).max(253)).max(64).optional(),
  /** Labels a node must have (all of them, equal values) to hold it. */
  labels: z.record(labelKey, z.string().max(63)).optional(),
}).strict().superRefine((v, ctx) => {
  if ((v.interface === undefined) === (v.subnet === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['interface'], message: 'give exactly one of interface (its name) or subnet (the LAN it is on) to say where nodes put the address' });
  }
  // A subnet that does not parse has its own message (cidrSchema).
  if (v.subnet !== undefined && (parseCidr(v.subnet) !== null || parseCidr6(v.subnet) !== null) && !cidrContains(v.subnet, v.address)) {
    ctx.addIssue({ code: 'custom', path: ['subnet'], message: `${v.address} is not inside ${v.subnet}: a VIP must be an address of the subnet its holder is on` });
  }
});

export type VipSpec = z.infer<typeof vipSpecSchema>;

/** The config's `vips`: addresses unique. */
export const vipsConfigSchema = z.array(vipSpecSchema).max(vipsMax).superRefine((vs, ctx) => {
  const seen = new Set<string>();
  vs.forEach((v, i) => {
    if (seen.has(v.address)) ctx.addIssue({ code: 'custom', path: [i, 'address'], message: `${v.address} is named twice` });
    seen.add(v.address);
  });
});

const holderSchema = z.object({ nodeId: z.string().min(1), epoch: z.number().int().min(0) }).strict();

/** `shoal.vips/<address>`: written only by the leader's loops. */
export const vipRecordSchema = z.object({
  spec: vipSpecSchema,
  /** Who holds it (its node's epoch when it was given it), or null: nobody may. */
  holder: holderSchema.nullable(),
  /** Log time (ms) the holder was recorded. */
  since: z.number().int().min(0),
  /** The node that held it before, if any (for `vip ls` and the vip_moved event). */
  previous: z.string().min(1).nullable(),
  /** The VIP is no longer in the leader's config: its holder lets it go, then the record is deleted. */
  retired: z.boolean(),
}).strict();

export type VipRecord = z.infer<typeof vipRecordSchema>;

/** `shoal.vip-releases/<address>`: written only by the holder's agent, once the address is off its interface. */
export const vipReleaseSchema = z.object({
  address: vipAddressSchema,
  nodeId: z.string().min(1),
  epoch: z.number().int().min(0),
  /** The revision of the VIP record it let go of. */
  recordRev: z.number().int().min(1),
}).strict();

export type VipRelease = z.infer<typeof vipReleaseSchema>;

/** Whether `node` may hold a VIP of `spec` by its name/id list and labels (health and availability apart). */
export function vipAllows(spec: VipSpec, node: { id: string; name: string; labels: Record<string, string> }): boolean {
  if (spec.nodes !== undefined && !spec.nodes.includes(node.id) && !spec.nodes.includes(node.name)) return false;
  for (const [k, v] of Object.entries(spec.labels ?? {})) if (node.labels[k] !== v) return false;
  return true;
}

/** Whether a release lets go of this record: the same holder, epoch and revision. */
export function releases(rel: VipRelease | undefined, rec: { holder: VipRecord['holder'] }, recordRev: number): boolean {
  return rel !== undefined && rec.holder !== null && rel.nodeId === rec.holder.nodeId && rel.epoch === rec.holder.epoch && rel.recordRev === recordRev;
}

/**
 * The VIP lease (docs/network.md, "The VIP lease"): each node that holds a VIP renews its own
 * `shoal.vip-leases/<node id>` by a committed write (compared on its epoch) every third of
 * `leaseMs`, and holds it until send time + leaseMs on its boot clock, as the exclusive lease
 * (lease.ts) does; it is shorter than that one, since it only bounds how long a VIP may stay on a
 * node the leader has lost, and a VIP's failover waits it out.
 */
export const vipLeasesCollection = 'shoal.vip-leases';

export interface VipLeaseConfig {
  /** How long one renewal holds, from the agent's send time (config `vipLeaseMs`, default 3 s). */
  leaseMs: number;
  /** Bound on any clock's rate error (config `exclusive.driftRho`, default 1 %). */
  driftRho: number;
}

/** Default 3 s, renewed every second (bench/RESULTS.md, "Virtual IP", has what it costs and gives). */
export const vipLeaseDefaults: Omit<VipLeaseConfig, 'driftRho'> = { leaseMs: 3_000 };
/** Under 2 s the kernel lifetime (whole seconds, rounded down) is 0 at a renewal; over 60 s a VIP takes a minute to move. */
export const vipLeaseMsMin = 2_000;
export const vipLeaseMsMax = 60_000;

/**
 * How late the kernel may drop an address after its lifetime. It deletes an address once its age
 * (counted from the last `ip addr replace`, minus 20 ms of fuzz) reaches valid_lft; its check runs
 * at the due time, or rounded up to a whole second when that is within 250 ms
 * (net/ipv4/devinet.c, check_lifetime; ADDRCONF_TIMER_FUZZ). Measured on this lab's kernel:
 * bench/RESULTS.md, "Virtual IP". 500 ms covers that with room for a busy worker queue.
 */
export const kernelLateMs = 500;

/**
 * How long an `ip addr replace` may take, from the agent's reading of its boot clock to the
 * kernel's stamp of the address. The agent times each call; one that took longer gets the address
 * taken off at once (the bound no longer holds for that lifetime).
 */
export const vipCommandMs = 300;

/**
 * How late the kernel may drop an IPv6 address after its lifetime: more than IPv4's, since its
 * check (net/ipv6/addrconf.c, addrconf_verify_rtnl) is never scheduled sooner than a second
 * (ADDRCONF_TIMER_FUZZ_MAX) after it last ran, and any change of an IPv6 address on the host
 * (another VIP's renewal, a SLAAC address, a router advertisement) runs it: an address due within
 * that second goes up to a second late. Measured on the lab's kernel: 48 to 335 ms late alone,
 * 630 to 725 ms with another address added half a second before the due time. 1 s + 250 ms of room.
 */
export const kernelLateMs6 = 1_250;

/** The kernel's lateness the leader allows for: IPv6's when any VIP of the cluster is IPv6 (a holder's lease bounds all its VIPs). */
export function vipKernelLateMs(ipv6: boolean): number {
  return ipv6 ? kernelLateMs6 : kernelLateMs;
}

/** margin = 2ρ·lease + the kernel's lateness + the command's time, in whole ms (rounded up). */
export function vipLeaseMarginMs(c: VipLeaseConfig, ipv6 = false): number {
  return Math.ceil(2 * c.driftRho * c.leaseMs) + vipKernelLateMs(ipv6) + vipCommandMs;
}

/** How long the leader waits, after the last renewal (or grant) of a holder it applied, before the VIP may go elsewhere. */
export function vipMoveAfterMs(c: VipLeaseConfig, ipv6 = false): number {
  return c.leaseMs + vipLeaseMarginMs(c, ipv6);
}

/** The agent renews this often: a third of the lease, so the address outlasts one late renewal. */
export function vipRenewIntervalMs(c: Pick<VipLeaseConfig, 'leaseMs'>): number {
  return Math.max(1, Math.floor(c.leaseMs / 3));
}

/**
 * Ms until the holder `nodeId` of `epoch` has surely lost its VIPs (0 once passed): lease + margin
 * after the latest of the last renewal this node's store applied, the last grant of a VIP to it
 * (the time it is given to renew a first time) and when this node began watching. The lease is
 * the longer of this leader's and what the holder claimed.
 */
export function vipClearInMs(c: VipLeaseConfig, o: { nowMs: number; watchingSinceMs: number; renewedAtMs?: number; agentLeaseMs: number; ipv6?: boolean }): number {
  const leaseMs = Math.max(c.leaseMs, o.agentLeaseMs);
  const from = Math.max(o.watchingSinceMs, o.renewedAtMs ?? o.watchingSinceMs);
  return Math.max(0, from + vipMoveAfterMs({ ...c, leaseMs }, o.ipv6 ?? false) - o.nowMs);
}

/** `shoal.vip-leases/<node id>`: written only by that node's VIP agent. */
export const vipLeaseRecordSchema = z.object({
  nodeId: z.string().min(1),
  epoch: z.number().int().min(0),
  /** One more at each renewal, so each renewal is a change the leader sees. */
  seq: z.number().int().min(0),
  leaseMs: z.number().int().min(1),
}).strict();

export type VipLeaseRecord = z.infer<typeof vipLeaseRecordSchema>;

/**
 * Seconds of kernel lifetime for a lease with `leftMs` left: rounded down (the kernel's lateness
 * and the command's time are in the leader's margin instead); 0: too little left to set one.
 */
export function kernelLifetimeSeconds(leftMs: number): number {
  const s = Math.floor(leftMs / 1_000);
  return s < 1 ? 0 : s;
}

/**
 * Every VIP the store records (retired ones too, until they go): node certificates carry them as
 * SANs, so the API answers on a VIP under the node's own certificate (docs/network.md).
 */
export function vipAddresses(store: Pick<DocumentStore, 'list'>): string[] {
  const out: string[] = [];
  for (const d of store.list(vipsCollection, { limit: vipsMax * 4 }).items) if (vipAddressProblem(d.id) === null) out.push(d.id);
  return out;
}
