// The node's side of the virtual IPs (src/resources/vips.ts; docs/network.md, "Virtual IP").
//
// Every node runs it. Level-triggered (pass-loop.ts): a store change, and a pass every second
// while any VIP record exists, re-read the VIP records and the node's addresses (`ip -j addr show`) and converge:
// - a VIP this node holds (the record names it, at its current epoch, not released at this
//   revision, not retired, the node not draining and shoal not stopping) is on its interface as
//   VIP/32 (an IPv6 VIP: VIP/128) with a kernel lifetime that ends when the node's VIP lease does, rounded down to whole
//   seconds (`ip addr replace ... valid_lft N preferred_lft N`, N from kernelLifetimeSeconds;
//   the kernel's lateness and the command's time are in the leader's margin), set again when the
//   lease moved on; so a shoal that freezes or dies loses the address without doing anything. An
//   add slow enough that the lifetime could outlast lease + the command's allowance is set again
//   shorter (setLifetime), and taken off only with under a second left. While it
//   holds one, its VIP lease is renewed (vip-lease.ts). With under a second of lease left the
//   address is left as it is (its lifetime ends on its own); without a lease it is taken off.
// - when it takes one it was not holding, it announces it: gratuitous ARP (`arping -U`), a burst
//   and a second one later, as keepalived does (garp_master_delay). An IPv6 VIP is added with
//   duplicate address detection (DAD), and the kernel itself sends one unsolicited neighbour
//   advertisement (override flag) once DAD succeeds, about a second later: the interface's
//   ndisc_notify is set for that (ipv6Sysctls). Node has no raw sockets to send more, and Debian's
//   base has no tool that does; DAD also refuses the address while another host still answers for it.
// - any other VIP's address found on this node is taken off.
// - a VIP it must let go of (drain, retired, a planned stop) is taken off, and then a release
//   naming the record's revision is committed (compared on the node's epoch and that revision):
//   the leader gives it to another node at once, not a lease later.

import type { DocumentStore } from '../fsm/index.ts';
import type { CommandResult, JsonObject, TxnCommand } from '../fsm/index.ts';
import { allDocs } from '../src/resources/state.ts';
import { nodesCollection } from '../src/resources/collections.ts';
import { cidrContains, isIpv6, kernelLifetimeSeconds, vipPrefixLength, vipCommandMs, releases, vipRecordSchema, vipReleaseSchema, vipReleasesCollection, vipsCollection, type VipRecord, type VipRelease } from '../src/resources/vips.ts';
import type { CommandRunner } from './firewall-command.ts';
import { runChecked } from './firewall-command.ts';
import { PassLoop } from './pass-loop.ts';

/** The node's VIP lease (vip-lease.ts). */
export interface VipLease {
  /** Keep the VIP lease of this epoch renewed, or (null) not. */
  want(epoch: number | null): void;
  /** Boot-clock ms until the lease of `epoch` holds, or null when it does not. */
  heldUntil(epoch: number): number | null;
}

export interface VipAgentOptions {
  store: DocumentStore;
  nodeId: string;
  /** null: this node holds no VIP (it lets go of any it is given). */
  lease: VipLease | null;
  bootNow(): number;
  run: CommandRunner;
  /** Proposes a release; resolves with the state machine's answer once applied here. */
  propose(cmd: TxnCommand): Promise<CommandResult>;
  log: { info(msg: string): void; warn(msg: string): void };
  /** A pass this often besides the store's changes (default 1 s): the lifetime follows the lease. */
  passEveryMs?: number;
  /** Gratuitous ARP bursts: `count` each, the second `repeatAfterMs` after the first (default 3, 5 s). */
  garp?: { count: number; repeatAfterMs: number };
  /** Told when this node takes or drops a VIP (metrics). */
  onChange?: (address: string, held: boolean) => void;
}

/** One address of the node (IPv4 or IPv6), from `ip -j addr show`. */
export interface HostAddress {
  ifname: string;
  local: string;
  prefixlen: number;
}

/** Parses `ip -j addr show` (both families). */
export function parseHostAddresses(json: string): HostAddress[] {
  const links = JSON.parse(json === '' ? '[]' : json) as { ifname?: unknown; addr_info?: { family?: unknown; local?: unknown; prefixlen?: unknown }[] }[];
  const out: HostAddress[] = [];
  for (const l of links) {
    if (typeof l.ifname !== 'string') continue;
    for (const a of l.addr_info ?? []) {
      if ((a.family === 'inet' || a.family === 'inet6') && typeof a.local === 'string' && typeof a.prefixlen === 'number') out.push({ ifname: l.ifname, local: a.local, prefixlen: a.prefixlen });
    }
  }
  return out;
}

/** The interface a VIP goes on here: its named one, or the one with an address in its subnet (not a VIP's /32 or /128). */
export function vipInterface(spec: VipRecord['spec'], addrs: readonly HostAddress[]): string | null {
  if (spec.interface !== undefined) return spec.interface;
  const subnet = spec.subnet;
  if (subnet === undefined) return null;
  return addrs.find((a) => a.prefixlen < vipPrefixLength(a.local) && cidrContains(subnet, a.local))?.ifname ?? null;
}

/**
 * What an IPv6 VIP needs of its interface, and why (docs/network.md, "IPv6 VIPs"). `atLeast`: set
 * only when the interface has less (0: an operator turned it off), else left as it is.
 */
export const ipv6Sysctls: readonly { name: string; value: string; atLeast?: boolean; why: string }[] = [
  { name: 'ndisc_notify', value: '1', why: 'the kernel sends an unsolicited neighbour advertisement once DAD succeeds only with it' },
  { name: 'router_solicitation_delay', value: '0', why: 'DAD starts at once rather than after a random delay of up to a second' },
  { name: 'accept_dad', value: '1', atLeast: true, why: 'the advertisement follows DAD, and DAD refuses the address while another host has it' },
  { name: 'dad_transmits', value: '1', atLeast: true, why: 'with 0 probes there is no DAD, so no advertisement' },
];

export class VipAgent {
  private readonly loop: PassLoop;
  private readonly held = new Set<string>();
  private readonly garpTimers = new Set<NodeJS.Timeout>();
  private unsubscribe: (() => void) | null = null;
  private tick: NodeJS.Timeout | undefined;
  private stopping = false;
  private readonly problems = new Map<string, string>();
  /** Interfaces whose IPv6 sysctls this agent has set (once each). */
  private readonly ipv6Ready = new Set<string>();
  /** Boot-clock ms until which each IPv6 VIP's last lifetime runs: one gone sooner failed DAD (or was removed). */
  private readonly lifetimeUntil = new Map<string, number>();
  /** The lease end (boot clock) each held VIP's lifetime was last set for. */
  private readonly setFor = new Map<string, number>();

  constructor(private readonly o: VipAgentOptions) {
    this.loop = new PassLoop({ name: 'vip', pass: () => this.pass(), retryMs: 1_000, retryMsMax: 5_000, log: o.log });
  }

  start(): void {
    this.unsubscribe = this.o.store.subscribe((ev) => {
      if (ev.collection === vipsCollection || ev.collection === vipReleasesCollection || ev.collection === nodesCollection) this.loop.mark();
    });
    this.loop.mark(true);
  }

  /** A pass soon (a renewal of the VIP lease committed: the lifetime follows it). */
  kick(): void {
    if (!this.stopping) this.loop.mark();
  }

  /** The VIPs this node has on its interfaces now (as of its last pass). */
  heldAddresses(): string[] {
    return [...this.held].sort();
  }

  /** One pass now (tests). */
  async converge(): Promise<void> {
    await this.loop.idle();
    await this.pass();
  }

  /**
   * A planned stop: takes every VIP off and commits its release (a hand-over: the leader gives it
   * to another node at once), then stops. A release that cannot commit leaves the VIP to move
   * once the lease has run out. Idempotent.
   */
  async close(): Promise<void> {
    if (this.stopping) return this.loop.close();
    this.stopping = true;
    clearInterval(this.tick);
    this.unsubscribe?.();
    await this.loop.idle();
    try {
      await this.pass();
    } catch (err) {
      this.o.log.warn(`vip: letting go of the VIPs before stopping failed (${(err as Error).message}); they move once this node's lease has run out`);
    }
    for (const t of this.garpTimers) clearTimeout(t);
    this.o.lease?.want(null);
    await this.loop.close();
  }

  private async pass(): Promise<void> {
    const { store, nodeId } = this.o;
    const node = store.get(nodesCollection, nodeId)?.doc as { epoch?: unknown; availability?: unknown } | undefined;
    const epoch = typeof node?.epoch === 'number' ? node.epoch : null;
    const draining = node?.availability === 'drain';
    const records = this.readRecords();
    if (records.size === 0 && this.held.size === 0) {
      this.o.lease?.want(null);
      this.ticking(false);
      return;
    }
    this.ticking(true);
    const mine: { address: string; rec: VipRecord; rev: number }[] = [];
    const letGo: { address: string; rec: VipRecord; rev: number }[] = [];
    for (const [address, { rec, rev, release }] of records) {
      if (rec.holder?.nodeId !== nodeId || epoch === null || rec.holder.epoch !== epoch || releases(release, rec, rev)) continue;
      if (this.stopping || draining || rec.retired || this.o.lease === null) letGo.push({ address, rec, rev });
      else mine.push({ address, rec, rev });
    }
    this.o.lease?.want(mine.length > 0 ? epoch : null);
    const until = epoch === null ? null : this.o.lease?.heldUntil(epoch) ?? null;
    const addrs = parseHostAddresses(await runChecked(this.o.run, 'ip', ['-j', 'addr', 'show']));
    const keep = new Set<string>();
    const deleted = new Set<string>();
    for (const m of mine) await this.hold(m, addrs, until, keep, deleted);
    // Every VIP's address this node must not have now: off, wherever it is.
    for (const a of addrs) {
      if (a.prefixlen !== vipPrefixLength(a.local) || keep.has(a.local) || deleted.has(a.local) || !records.has(a.local)) continue;
      await runChecked(this.o.run, 'ip', ['addr', 'del', `${a.local}/${a.prefixlen}`, 'dev', a.ifname]);
    }
    for (const address of [...this.held]) {
      if (keep.has(address)) continue;
      this.held.delete(address);
      this.lifetimeUntil.delete(address);
      this.setFor.delete(address);
      this.o.log.info(`vip: ${address} is off this node`);
      this.o.onChange?.(address, false);
    }
    for (const g of letGo) await this.release(g.address, g.rec, g.rev);
  }

  /**
   * The pass every passEveryMs runs only while the store has a VIP record or this node holds one:
   * a node of a cluster without VIPs has no timer of this agent (a record written wakes it through
   * the store's changes).
   */
  private ticking(on: boolean): void {
    if (!on || this.stopping) {
      clearInterval(this.tick);
      this.tick = undefined;
    } else if (this.tick === undefined) {
      this.tick = setInterval(() => this.loop.mark(), this.o.passEveryMs ?? 1_000);
      this.tick.unref();
    }
  }

  /** Puts `m` on (or leaves it as it is, with under a second of lease left); adds it to `keep` when it is on, to `deleted` when it took it off. */
  private async hold(m: { address: string; rec: VipRecord }, addrs: readonly HostAddress[], until: number | null, keep: Set<string>, deleted: Set<string>): Promise<void> {
    const prefix = vipPrefixLength(m.address);
    const on = addrs.some((a) => a.local === m.address && a.prefixlen === prefix);
    if (!on) this.noteVanished(m.address);
    if (until === null) {
      // Normal for a moment when it is just given one: the lease is renewed from then on.
      this.noteProblem(m.address, `this node holds ${m.address} but its VIP lease does not hold now: the address stays off until a renewal commits`, 'info');
      return;
    }
    const dev = vipInterface(m.rec.spec, addrs);
    if (dev === null) {
      this.noteProblem(m.address, `no interface of this node has an address in ${m.rec.spec.subnet ?? '?'} to put ${m.address} on: the VIP stays here without answering until the leader moves it (check vips[].subnet)`);
      return;
    }
    if (prefix === 128 && !(await this.maybePrepareIpv6(dev))) return;
    // Measured now, just before the add (setLifetime checks it against the add's return).
    const lifetime = kernelLifetimeSeconds(until - this.o.bootNow());
    if (lifetime === 0) {
      // Under a second left: the lifetime set before ends on its own, within the lease.
      if (on && this.held.has(m.address)) keep.add(m.address);
      return;
    }
    if (on && this.held.has(m.address) && this.setFor.get(m.address) === until) {
      // Its lifetime was set for this very lease: setting it again could only end it sooner.
      keep.add(m.address);
      return;
    }
    const set = await this.setLifetime(m.address, prefix, dev, until, lifetime);
    if (set === null) {
      deleted.add(m.address);
      return;
    }
    this.setFor.set(m.address, until);
    if (prefix === 128) this.lifetimeUntil.set(m.address, set.endsFrom);
    keep.add(m.address);
    this.problems.delete(m.address);
    if (!this.held.has(m.address)) this.taken(m.address, dev);
  }

  /**
   * `ip addr replace` with `lifetime` seconds, so that the address ends by `until + vipCommandMs`
   * (the leader's margin) wherever the kernel stamped it: the stamp is at the latest when the
   * command returned. A command slow enough to break that is followed by the same replace with
   * the shorter lifetime left at its return (the address stays on), and so on; the address is
   * taken off only when under a second is left. Null: it is off; else the
   * earliest its lifetime can end (the stamp at the earliest when the command was sent).
   */
  private async setLifetime(address: string, prefix: number, dev: string, until: number, lifetime: number): Promise<{ endsFrom: number } | null> {
    let n = lifetime;
    const started = this.o.bootNow();
    for (;;) {
      const sent = this.o.bootNow();
      // IPv6: no `nodad`; the kernel's DAD is what sends the neighbour advertisement (and refuses a duplicate).
      await runChecked(this.o.run, 'ip', ['addr', 'replace', `${address}/${prefix}`, 'dev', dev, 'valid_lft', String(n), 'preferred_lft', String(n)]);
      const returned = this.o.bootNow();
      if (returned + n * 1_000 <= until + vipCommandMs) return { endsFrom: sent + n * 1_000 };
      const shorter = kernelLifetimeSeconds(until - returned);
      this.o.log.warn(`vip: setting ${address} took ${returned - started} ms: a lifetime of ${n} s could outlast the VIP lease by more than the leader allows for (${vipCommandMs} ms), so it is ${shorter === 0 ? 'taken off until the next pass' : `set again to ${shorter} s`}`);
      if (shorter === 0) {
        await runChecked(this.o.run, 'ip', ['addr', 'del', `${address}/${prefix}`, 'dev', dev]);
        return null;
      }
      n = shorter;
    }
  }

  private readRecords(): Map<string, { rec: VipRecord; rev: number; release: VipRelease | undefined }> {
    const out = new Map<string, { rec: VipRecord; rev: number; release: VipRelease | undefined }>();
    for (const doc of allDocs(this.o.store, vipsCollection)) {
      const r = vipRecordSchema.safeParse(doc.doc);
      if (!r.success) continue;
      const rel = vipReleaseSchema.safeParse(this.o.store.get(vipReleasesCollection, doc.id)?.doc);
      out.set(doc.id, { rec: r.data, rev: doc.rev, release: rel.success ? rel.data : undefined });
    }
    return out;
  }

  /** Commits that this node let go of `address` at the record's revision (the address is already off). */
  private async release(address: string, rec: VipRecord, rev: number): Promise<void> {
    const holder = rec.holder;
    if (holder === null) return;
    const doc: VipRelease = { address, nodeId: this.o.nodeId, epoch: holder.epoch, recordRev: rev };
    const r = await this.o.propose({
      op: 'txn',
      compare: [
        { collection: nodesCollection, id: this.o.nodeId, target: 'value', path: 'epoch', cmp: '=', value: holder.epoch },
        { collection: vipsCollection, id: address, target: 'rev', cmp: '=', value: rev },
      ],
      success: [{ op: 'put', collection: vipReleasesCollection, id: address, doc: doc as unknown as JsonObject }], failure: [],
    });
    if (!r.ok) throw new Error(`the release of ${address} was refused: ${r.error.code}: ${r.error.message}`);
    if (r.kind === 'txn' && r.succeeded) this.o.log.info(`vip: released ${address} (record revision ${rev})`);
  }

  private taken(address: string, dev: string): void {
    this.held.add(address);
    this.o.onChange?.(address, true);
    if (isIpv6(address)) {
      this.o.log.info(`vip: ${address} is on ${dev} here; the kernel announces it (one unsolicited neighbour advertisement) once its duplicate address detection succeeds, about a second from now`);
      return;
    }
    this.o.log.info(`vip: ${address} is on ${dev} here; announcing it`);
    const garp = this.o.garp ?? { count: 3, repeatAfterMs: 5_000 };
    const announce = (): void => {
      if (!this.held.has(address)) return;
      this.o.run('arping', ['-q', '-U', '-P', '-c', String(garp.count), '-i', dev, '-S', address, address]).then((r) => {
        // Unsolicited ARP gets no replies, which arping reports as 1; anything else is a problem.
        if (r.code > 1) this.o.log.warn(`vip: announcing ${address} on ${dev} failed (arping exited ${r.code}: ${r.stderr.trim()})`);
      }, (err: unknown) => this.o.log.warn(`vip: announcing ${address} on ${dev} failed (${(err as Error).message}); neighbours learn it when their ARP entry expires (install arping)`));
    };
    announce();
    const t = setTimeout(() => {
      this.garpTimers.delete(t);
      announce();
    }, garp.repeatAfterMs);
    t.unref();
    this.garpTimers.add(t);
  }

  /**
   * Sets what an IPv6 VIP needs of `dev` (ipv6Sysctls), once per interface; false (the VIP stays
   * off, retried at the next pass) when it cannot: without them the address would not be announced.
   */
  private async maybePrepareIpv6(dev: string): Promise<boolean> {
    if (this.ipv6Ready.has(dev)) return true;
    // The slash form keeps a dot in an interface name (eth0.100) from reading as a separator.
    const key = (name: string): string => `net/ipv6/conf/${dev}/${name}`;
    // An add on an interface without IPv6 would fail the whole pass (the IPv4 VIPs with it).
    const off = await this.o.run('sysctl', ['-n', key('disable_ipv6')]);
    if (off.code !== 0 || off.stdout.trim() !== '0') {
      this.noteProblem(`sysctl:${dev}`, `IPv6 is off on ${dev} (${key('disable_ipv6')}: ${off.code === 0 ? off.stdout.trim() : off.stderr.trim()}): its IPv6 VIPs stay off until it is on`);
      return false;
    }
    for (const s of ipv6Sysctls) {
      if (s.atLeast === true) {
        const cur = await this.o.run('sysctl', ['-n', key(s.name)]);
        if (cur.code === 0 && Number(cur.stdout.trim()) >= Number(s.value)) continue;
      }
      const r = await this.o.run('sysctl', ['-q', '-w', `${key(s.name)}=${s.value}`]);
      if (r.code !== 0) {
        this.noteProblem(`sysctl:${dev}`, `cannot set ${key(s.name)}=${s.value} (${s.why}): sysctl exited ${r.code}: ${r.stderr.trim()}; IPv6 VIPs stay off ${dev} until it can`);
        return false;
      }
    }
    this.problems.delete(`sysctl:${dev}`);
    this.ipv6Ready.add(dev);
    this.o.log.info(`vip: set ${ipv6Sysctls.map((s) => s.name).join(', ')} on ${dev} for its IPv6 VIPs`);
    return true;
  }

  /** An IPv6 VIP this node held is gone before the lifetime it set ran out: say why it may be. */
  private noteVanished(address: string): void {
    const until = this.lifetimeUntil.get(address);
    if (until === undefined || !this.held.has(address) || this.o.bootNow() >= until - 100) return;
    this.lifetimeUntil.delete(address);
    this.o.log.warn(`vip: ${address} went off this node ${Math.round(until - this.o.bootNow())} ms before its lifetime ran out: another host answered its duplicate address detection (the kernel logs "IPv6 duplicate address ... detected"), or someone removed it; it is added again at each pass`);
  }

  private noteProblem(address: string, msg: string, level: 'info' | 'warn' = 'warn'): void {
    if (this.problems.get(address) === msg) return;
    this.problems.set(address, msg);
    this.o.log[level](`vip: ${msg}`);
  }
}
