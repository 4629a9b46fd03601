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
// The holder keeps the address only while its node's lease (lease.ts, the exclusive services'
// lease) holds, with a kernel lifetime no longer than what is left of it; the leader gives the
// VIP to another node only after the old holder released it at the record's revision, or once
// its lease has surely run out (lease + margin after the last renewal it applied). So two nodes
// never hold one VIP, a partition included.

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

/** Whether `address` is inside `cidr` (both IPv4). */
export function cidrContains(cidr: string, address: string): boolean {
  const c = parseCidr(cidr);
  const a = ipv4ToNumber(address);
  if (c === null || a === null) return false;
  const mask = c.prefix === 0 ? 0 : (0xffffffff << (32 - c.prefix)) >>> 0;
  return ((a & mask) >>> 0) === c.net;
}

const ipv4Schema = z.string().refine((s) => ipv4Re.test(s), 'an IPv4 address (a.b.c.d); IPv6 VIPs are not supported in this release');
const ifNameSchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,15}$/, 'an interface name (1-15 letters, digits, or . _ : -)');
const cidrSchema = z.string().refine((s) => parseCidr(s) !== null, 'an IPv4 subnet (a.b.c.d/n)');
const labelKey = z.string().regex(/^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62}[A-Za-z0-9])?$/, 'a label key');

/** One VIP of the config (`vips[]`). */
export const vipSpecSchema = z.object({
  /** The address (IPv4), added as /32. */
  address: ipv4Schema,
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
  if (v.subnet !== undefined && !cidrContains(v.subnet, v.address)) {
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
  address: ipv4Schema,
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
 * How late the kernel may drop an address after its lifetime: it counts whole seconds of age
 * (age >= valid_lft) and runs its lifetime check on a timer rounded up to the next second
 * (net/ipv4/devinet.c, check_lifetime), so up to two seconds after.
 */
export const kernelLateSeconds = 2;

/**
 * Seconds of kernel lifetime for a lease with `leftMs` left: rounded down, less what the kernel
 * may be late, so the kernel has dropped the address by the time the lease ends; 0: do not hold it.
 */
export function kernelLifetimeSeconds(leftMs: number): number {
  const s = Math.floor(leftMs / 1_000) - kernelLateSeconds;
  return s < 1 ? 0 : s;
}

/**
 * Every VIP the store records (retired ones too, until they go): node certificates carry them as
 * SANs, so the API answers on a VIP under the node's own certificate (docs/network.md).
 */
export function vipAddresses(store: Pick<DocumentStore, 'list'>): string[] {
  const out: string[] = [];
  for (const d of store.list(vipsCollection, { limit: vipsMax * 4 }).items) if (ipv4Re.test(d.id)) out.push(d.id);
  return out;
}
