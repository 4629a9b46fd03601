// Who holds each virtual IP (src/resources/vips.ts; docs/network.md, "Virtual IP"). Pure: the
// leader's run (leader-run.ts, key `vips`) reads the state, asks this, and proposes the plan
// fenced by its term.
//
// The rule that keeps two nodes from ever holding one VIP: a VIP goes from holder A to another
// node only when
//   (a) A let go of it: its agent took the address off and then committed a release naming the
//       record's revision (shoal.vip-releases/<address>); A adds the address only while its
//       applied store says A holds the record at a revision it has not released, so from then on
//       it never adds it again unless the leader gives it back (a new revision); or
//   (b) A's VIP lease has surely run out: lease + margin after the last renewal (or grant) of A's
//       epoch this leader's store applied (vips.ts vipClearInMs). A holds the address only while
//       that lease holds, with a kernel lifetime that ends before it (the kernel's lateness is in
//       the margin), so a frozen, dead or cut-off A has lost it by then. The plan compares A's
//       lease record's revision: a renewal that commits between this decision and the write
//       refuses the write (decided again).
// A holder keeps its VIP while it is a ready, active member and its VIP lease has not surely run
// out (moving it would cut every connection through it), including when it has become the leader
// since; a holder whose lease ran out loses it even before node health declares it down (that is
// what makes the failover as short as the VIP lease). A new holder is picked among the ready,
// active members the spec allows, not the one that lost it nor the leader while another can, then
// the fewest VIPs, then by id.

import type { Compare } from '../../fsm/index.ts';
import { deleteChange, putChange, type Change } from '../resources/changes.ts';
import { nodesCollection } from '../resources/collections.ts';
import type { NodeRecord } from '../resources/records.ts';
import type { Versioned } from '../resources/state.ts';
import { releases, vipAllows, vipLeasesCollection, vipReleasesCollection, vipsCollection, type VipRecord, type VipRelease, type VipSpec } from '../resources/vips.ts';

export interface VipInput {
  /** The leader's config `vips`; undefined: this leader manages no VIP (records are left as they are). */
  specs: readonly VipSpec[] | undefined;
  records: ReadonlyMap<string, Versioned<VipRecord>>;
  releases: ReadonlyMap<string, Versioned<VipRelease>>;
  nodes: ReadonlyMap<string, Versioned<NodeRecord>>;
  members: ReadonlySet<string>;
  self: string;
  /** Log time (ms) for `since`. */
  now: number;
  /** Ms until `nodeId`'s VIP lease of `epoch` has surely run out (0 when it has): vips.ts vipClearInMs. */
  clearInMs(nodeId: string, epoch: number): number;
  /** The revision of `shoal.vip-leases/<nodeId>` (0 when absent): the plan compares it. */
  leaseRev(nodeId: string): number;
}

export interface VipMove {
  address: string;
  from: string | null;
  to: string | null;
  /** Why it moved: 'assigned' (had no holder), 'released' (the holder let go), 'lease_expired'. */
  reason: 'assigned' | 'released' | 'lease_expired';
}

export interface VipDecision {
  changes: Change[];
  compares: Compare[];
  moves: VipMove[];
  /** Look again after this long (a lease still running out), or null. */
  wakeInMs: number | null;
  /** VIPs waiting, and why (logged by the run, once per change). */
  waiting: string[];
}

/** A wake-up for a lease running out is never sooner than this. */
export const vipRecheckMinMs = 200;

export function decideVipHolders(input: VipInput): VipDecision {
  const d: VipDecision = { changes: [], compares: [], moves: [], wakeInMs: null, waiting: [] };
  if (input.specs === undefined) return d;
  const load = holdersCount(input.records);
  const wanted = new Map(input.specs.map((s) => [s.address, s]));
  for (const spec of input.specs) decideOne(input, d, load, spec, input.records.get(spec.address));
  for (const [address, rec] of input.records) if (!wanted.has(address)) retire(input, d, address, rec);
  return d;
}

function decideOne(input: VipInput, d: VipDecision, load: Map<string, number>, spec: VipSpec, rec: Versioned<VipRecord> | undefined): void {
  const { address } = spec;
  if (rec === undefined) {
    const to = pickHolder(input, spec, load, null);
    d.changes.push(putChange(vipsCollection, address, { spec, holder: to, since: input.now, previous: null, retired: false } satisfies VipRecord, null));
    if (to === null) return;
    compareNode(d, to);
    d.moves.push({ address, from: null, to: to.nodeId, reason: 'assigned' });
    return;
  }
  const cur = rec.value.holder;
  const specChanged = JSON.stringify(rec.value.spec) !== JSON.stringify(spec) || rec.value.retired;
  if (cur !== null && holderKeeps(input, spec, cur, address, rec.rev)) {
    // Look again when its lease would have run out: a holder that stops renewing loses it then.
    wake(d, input.clearInMs(cur.nodeId, cur.epoch));
    if (specChanged) d.changes.push(putChange(vipsCollection, address, { ...rec.value, spec, retired: false }, rec.rev));
    return;
  }
  const free = cur === null ? 'assigned' : freeOf(input, d, address, rec, cur);
  if (free === null) {
    if (specChanged) d.changes.push(putChange(vipsCollection, address, { ...rec.value, spec, retired: false }, rec.rev));
    return;
  }
  const to = pickHolder(input, spec, load, cur?.nodeId ?? null);
  if (to === null && cur === null && !specChanged) return;
  // The only node that may hold it is the one whose lease ran out: it stays its (no rewrite at each pass).
  if (free === 'lease_expired' && cur !== null && to?.nodeId === cur.nodeId && to.epoch === cur.epoch && !specChanged) return;
  if (cur !== null) load.set(cur.nodeId, (load.get(cur.nodeId) ?? 1) - 1);
  d.changes.push(putChange(vipsCollection, address, { spec, holder: to, since: input.now, previous: cur?.nodeId ?? rec.value.previous, retired: false } satisfies VipRecord, rec.rev));
  if (to !== null) compareNode(d, to);
  if (cur?.nodeId !== to?.nodeId || cur?.epoch !== to?.epoch) d.moves.push({ address, from: cur?.nodeId ?? null, to: to?.nodeId ?? null, reason: free });
}

/** A VIP the leader's config no longer names: its holder lets it go (or its lease runs out), then the record goes. */
function retire(input: VipInput, d: VipDecision, address: string, rec: Versioned<VipRecord>): void {
  const cur = rec.value.holder;
  if (cur === null) {
    d.changes.push(deleteChange(vipsCollection, address, rec.rev));
    const rel = input.releases.get(address);
    if (rel !== undefined) d.changes.push(deleteChange(vipReleasesCollection, address, rel.rev));
    return;
  }
  if (!rec.value.retired) {
    d.changes.push(putChange(vipsCollection, address, { ...rec.value, retired: true }, rec.rev));
    return;
  }
  const free = freeOf(input, d, address, rec, cur);
  if (free === null) return;
  d.changes.push(putChange(vipsCollection, address, { ...rec.value, holder: null, since: input.now, previous: cur.nodeId }, rec.rev));
  d.moves.push({ address, from: cur.nodeId, to: null, reason: free });
}

/** Whether the current holder keeps the VIP: its node is a ready, active member of that epoch the spec allows, its VIP lease may still hold, and it has not let go. */
function holderKeeps(input: VipInput, spec: VipSpec, cur: { nodeId: string; epoch: number }, address: string, recRev: number): boolean {
  const node = input.nodes.get(cur.nodeId)?.value;
  if (node === undefined || node.epoch !== cur.epoch || !eligible(input, spec, node)) return false;
  if (input.clearInMs(cur.nodeId, cur.epoch) === 0) return false;
  return !releases(input.releases.get(address)?.value, { holder: cur }, recRev);
}

/**
 * Whether the VIP may go from `cur` to another node now: it released this revision, or its
 * lease has surely run out (then the plan compares its lease record). null: not yet (wake set).
 */
function freeOf(input: VipInput, d: VipDecision, address: string, rec: Versioned<VipRecord>, cur: { nodeId: string; epoch: number }): VipMove['reason'] | null {
  if (releases(input.releases.get(address)?.value, rec.value, rec.rev)) return 'released';
  const clearIn = input.clearInMs(cur.nodeId, cur.epoch);
  if (clearIn > 0) {
    wake(d, clearIn);
    d.waiting.push(`${address}: its holder ${cur.nodeId} (epoch ${cur.epoch}) cannot keep it; it moves once that node's VIP lease has surely run out, in ${clearIn} ms, or once the node releases it`);
    return null;
  }
  d.compares.push({ collection: vipLeasesCollection, id: cur.nodeId, target: 'rev', cmp: '=', value: input.leaseRev(cur.nodeId) });
  return 'lease_expired';
}

function wake(d: VipDecision, inMs: number): void {
  const ms = Math.max(vipRecheckMinMs, inMs);
  d.wakeInMs = d.wakeInMs === null ? ms : Math.min(d.wakeInMs, ms);
}

function eligible(input: VipInput, spec: VipSpec, n: NodeRecord): boolean {
  return input.members.has(n.id) && n.state === 'ready' && n.availability === 'active' && vipAllows(spec, n);
}

/** The new holder: eligible, not `avoid` (it just let go or lost it) nor the leader while another can, then the fewest VIPs, then by id. */
function pickHolder(input: VipInput, spec: VipSpec, load: Map<string, number>, avoid: string | null): { nodeId: string; epoch: number } | null {
  const all = [...input.nodes.values()].map((v) => v.value).filter((n) => eligible(input, spec, n));
  const rank = (n: NodeRecord): number => (n.id === avoid ? 2 : 0) + (n.id === input.self ? 1 : 0);
  all.sort((a, b) => rank(a) - rank(b) || (load.get(a.id) ?? 0) - (load.get(b.id) ?? 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const n = all[0];
  if (n === undefined) return null;
  load.set(n.id, (load.get(n.id) ?? 0) + 1);
  return { nodeId: n.id, epoch: n.epoch };
}

/** The new holder's epoch, state and availability as read: the write changes nothing if they moved. */
function compareNode(d: VipDecision, to: { nodeId: string; epoch: number }): void {
  d.compares.push(
    { collection: nodesCollection, id: to.nodeId, target: 'value', path: 'epoch', cmp: '=', value: to.epoch },
    { collection: nodesCollection, id: to.nodeId, target: 'value', path: 'state', cmp: '=', value: 'ready' },
  );
}

function holdersCount(records: ReadonlyMap<string, Versioned<VipRecord>>): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of records.values()) if (r.value.holder !== null) m.set(r.value.holder.nodeId, (m.get(r.value.holder.nodeId) ?? 0) + 1);
  return m;
}
