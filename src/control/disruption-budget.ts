// The disruption budget (docs/control-plane.md, "The disruption budget"): per service, how many of
// its slots are unavailable now, and how many more a voluntary action may take down.
//
// A slot (1..replicas, or an eligible node of a global service) is available when one of its
// tasks is wanted running, runs (and is healthy, with a health check) and sits on a ready node in
// the epoch it was placed in. Anything else makes it unavailable: no task, a task pending,
// assigned or starting, one the leader asked to stop, one that failed, one unhealthy, one on a
// suspect or down node (or lost with it). A global service has no slot on a draining or down
// node, so its tasks there never count.
//
// Voluntary actions (the updater's batches and rollbacks, a drain's moves, a rebalance step, a
// drill) ask before they take a slot down; an action that leaves its slot available (a start-first
// replacement, whose new task runs before the old one stops) or that touches a slot already
// unavailable costs nothing. Involuntary losses (a node down, a task crashing) are counted too,
// and are never held back: they only leave less for the voluntary work, which then waits.
//
// Pure functions of the control state: the orchestrator, the API and the service status ask the
// same ones, so what waits and why reads the same everywhere.

import type { Compare } from '../../fsm/index.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import { forcedDisruptionsMax, type ForcedDisruption, type ServiceRecord } from '../resources/records.ts';
import type { ServiceSpec } from '../resources/spec/service-spec.ts';
import { tasksOf, type ControlState } from '../resources/state.ts';
import { isTerminal, viewOf, type TaskView } from '../resources/task-view.ts';
import { eligibleNodes } from './scheduler/eligible-nodes.ts';
import { compareNatural, compareText } from '../base/order.ts';

/** One slot that is unavailable now, and why, for people: `node n2 down`, `starting on n3`. */
export interface UnavailableSlot {
  slot: string;
  why: string;
}

export interface BudgetAssessment {
  service: string;
  /** The budget as people read it: `maxUnavailable 1`, `maxUnavailable 25% (1 of 4 slots)`. */
  limit: string;
  /** The budget in slots. */
  maxUnavailable: number;
  /** The slots the spec wants now. */
  slots: number;
  /** The wanted slots that are unavailable now, in slot order. */
  unavailable: UnavailableSlot[];
  /** How many more slots a voluntary action may take down now (0 when none, never negative). */
  allowed: number;
  /** Per available slot, the task that serves it (the newest, when a start-first pair both serve). */
  serving: ReadonlyMap<string, TaskView>;
}

/** The slots the spec asks for: 1..replicas, or the id of every eligible node (global). */
export function wantedSlots(state: ControlState, svc: ServiceRecord): (number | string)[] {
  if (svc.spec.mode === 'global') return eligibleNodes(svc.spec, [...state.nodes.values()].map((n) => n.value), state.voters).map((n) => n.id);
  return Array.from({ length: svc.spec.replicas ?? 0 }, (_, i) => i + 1);
}

/**
 * The budget in slots. Unwritten: the update's parallelism (so an update alone runs as before).
 * A percentage is of the wanted slots, rounded down, and at least 1 when above 0% and the service
 * has a slot: 25% of 3 slots would otherwise allow nothing, and a drain or an update of a small
 * service could never go on without --force (Kubernetes keeps a rolling update moving the same way).
 */
export function maxUnavailableOf(spec: ServiceSpec, slots: number): number {
  const d = spec.disruption;
  if (d === null) return spec.update.parallelism;
  if (d.unit === 'slots') return d.maxUnavailable;
  const n = Math.floor((d.maxUnavailable * slots) / 100);
  return d.maxUnavailable > 0 && slots > 0 ? Math.max(1, n) : n;
}

/** `maxUnavailable 1`, `maxUnavailable 2 (the update's parallelism)`, `maxUnavailable 25% (1 of 4 slots)`. */
export function limitText(spec: ServiceSpec, slots: number): string {
  const d = spec.disruption;
  if (d === null) return `maxUnavailable ${spec.update.parallelism}${spec.update.parallelism === 1 ? '' : " (the update's parallelism)"}`;
  if (d.unit === 'slots') return `maxUnavailable ${d.maxUnavailable}`;
  return `maxUnavailable ${d.maxUnavailable}% (${maxUnavailableOf(spec, slots)} of ${slots} slot${slots === 1 ? '' : 's'})`;
}

/** A task that makes its slot available: wanted running, running (healthy), on a ready node of its epoch. */
export function serves(v: TaskView): boolean {
  return v.record.desired === 'running' && v.healthy && v.node?.state === 'ready';
}

const byAge = (a: TaskView, b: TaskView): number => a.record.createdAt - b.record.createdAt || compareText(a.record.id, b.record.id);

/** Why a slot with these tasks serves nothing. */
function whyUnavailable(views: readonly TaskView[]): string {
  const wanted = views.filter((v) => v.record.desired === 'running').sort(byAge);
  const t = wanted[wanted.length - 1];
  if (t === undefined) {
    const stopping = views.find((v) => v.record.nodeId !== null && !isTerminal(v));
    return stopping === undefined ? 'no task' : `stopping on ${nodeName(stopping)}`;
  }
  const on = nodeName(t);
  if (t.observed === 'orphaned') return `node ${on} lost`;
  if (t.node !== undefined && t.node.state !== 'ready') return `node ${on} ${t.node.state}`;
  switch (t.observed) {
    case 'pending': return t.record.pendingReason === null ? 'being placed' : 'pending: no node fits';
    case 'assigned': return `assigned to ${on}`;
    case 'starting': return `starting on ${on}`;
    case 'running': return t.status?.health === 'unhealthy' ? `unhealthy on ${on}` : `health check starting on ${on}`;
    case 'failed': return `failed on ${on}`;
    default: return `${t.observed} on ${on}`;
  }
}

function nodeName(v: TaskView): string {
  return v.node?.name ?? v.record.nodeId ?? '?';
}

/** How many slots of the service are unavailable now and how many more the budget allows. */
export function assessBudget(state: ControlState, svc: ServiceRecord, wanted: readonly (number | string)[] = wantedSlots(state, svc)): BudgetAssessment {
  const bySlot = new Map<string, TaskView[]>();
  for (const t of tasksOf(state, svc.name)) {
    const v = viewOf(state, t);
    const k = String(v.record.slot);
    bySlot.set(k, [...(bySlot.get(k) ?? []), v]);
  }
  const unavailable: UnavailableSlot[] = [];
  const serving = new Map<string, TaskView>();
  for (const slot of wanted.map(String).sort(compareNatural)) {
    const views = bySlot.get(slot) ?? [];
    const server = views.filter(serves).sort(byAge).pop();
    if (server !== undefined) serving.set(slot, server);
    else unavailable.push({ slot, why: whyUnavailable(views) });
  }
  const maxUnavailable = maxUnavailableOf(svc.spec, wanted.length);
  return {
    service: svc.name, limit: limitText(svc.spec, wanted.length), maxUnavailable, slots: wanted.length, unavailable, serving,
    allowed: Math.max(0, maxUnavailable - unavailable.length),
  };
}

/** `2 slots unavailable (slot 3: node n2 down; slot 4: starting on n1)`, at most three named. */
export function unavailableText(a: BudgetAssessment): string {
  const n = a.unavailable.length;
  const named = a.unavailable.slice(0, 3).map((u) => `slot ${u.slot}: ${u.why}`).join('; ');
  return `${n} slot${n === 1 ? '' : 's'} unavailable${n === 0 ? '' : ` (${named}${n > 3 ? '; ...' : ''})`}`;
}

/** What a voluntary action asks of the budget. */
export type DisruptionCause =
  | { cause: 'update'; specVersion: number; rollback?: boolean }
  | { cause: 'drain'; nodeId: string; nodeName: string }
  | { cause: 'rebalance'; nodeId: string; nodeName: string }
  | { cause: 'drill'; nodeId: string; nodeName: string };

/** Whether a forced disruption on the record lets this action past the budget. */
export function forcedFor(forced: readonly ForcedDisruption[], c: DisruptionCause): ForcedDisruption | undefined {
  return forced.find((f) => f.cause === c.cause && (c.cause === 'update' ? f.specVersion === c.specVersion : f.nodeId === c.nodeId));
}

function causeText(c: DisruptionCause): string {
  switch (c.cause) {
    case 'update': return c.rollback === true ? 'the rollback' : 'the rolling update';
    case 'drain': return `the drain of ${c.nodeName}`;
    case 'rebalance': return `a rebalance off ${c.nodeName}`;
    case 'drill': return `a drill on ${c.nodeName}`;
  }
}

/**
 * One pass's account of the budget: each voluntary action takes the slot it would make
 * unavailable, or is held. A slot already unavailable, or taken earlier in the pass, costs
 * nothing more; a forced action goes ahead and still uses up what is left.
 */
export class DisruptionLedger {
  private left: number;
  private readonly down = new Set<string>();
  /** Slots taken down in this pass that the budget paid for (not forced, not free). */
  readonly paid: string[] = [];
  /** Wanted slots acted on in this pass for free, because they were unavailable when read. */
  readonly free: string[] = [];
  /** Slots taken down past the budget because it was forced. */
  readonly forced: { slot: string; by: ForcedDisruption }[] = [];
  /** Actions held, with what they would have taken. */
  readonly held: { slot: string; cause: DisruptionCause }[] = [];
  /** Tasks whose serving lets an action keep its slot available (a start-first replacement's new task, before the old one stops). */
  readonly relied: TaskView[] = [];

  constructor(readonly assessment: BudgetAssessment, private readonly forcedList: readonly ForcedDisruption[]) {
    this.left = assessment.allowed;
    for (const u of assessment.unavailable) this.down.add(u.slot);
  }

  /** Whether `slot` may be made unavailable now for `cause`; records the answer. */
  take(slot: number | string, cause: DisruptionCause): boolean {
    const k = String(slot);
    if (this.down.has(k)) {
      if (this.assessment.unavailable.some((u) => u.slot === k)) this.free.push(k);
      return true;
    }
    if (!this.assessment.serving.has(k)) return true;
    const f = forcedFor(this.forcedList, cause);
    if (this.left <= 0 && f === undefined) {
      this.held.push({ slot: k, cause });
      return false;
    }
    this.down.add(k);
    this.left = Math.max(0, this.left - 1);
    if (f !== undefined) this.forced.push({ slot: k, by: f });
    else this.paid.push(k);
    return true;
  }

  /** An action that stops a serving task for free because `v` serves the same slot: the plan relies on it. */
  rely(v: TaskView): void {
    this.relied.push(v);
  }

  /** Whether the pass acted on a wanted slot through the budget (paid, forced, free, or relying on another task): its plan must compare what the budget was counted on. */
  get spent(): boolean {
    return this.paid.length + this.free.length + this.forced.length + this.relied.length > 0;
  }

  /** Why work waits, naming the budget and the service's unavailable slots; null when nothing waits. */
  waitReason(): string | null {
    if (this.held.length === 0) return null;
    return budgetWaitText(this.assessment, this.held.map((h) => h.cause));
  }
}

/** `waiting for the disruption budget (maxUnavailable 1): 1 slot unavailable (slot 3: node n2 down); waiting: the drain of n1 (2 tasks)`. */
export function budgetWaitText(a: BudgetAssessment, causes: readonly DisruptionCause[]): string {
  const counts = new Map<string, number>();
  for (const c of causes) counts.set(causeText(c), (counts.get(causeText(c)) ?? 0) + 1);
  const what = [...counts].map(([t, n]) => `${t} (${n} task${n === 1 ? '' : 's'})`).join(', ');
  return `waiting for the disruption budget of ${a.service} (${a.limit}): ${unavailableText(a)}${what === '' ? '' : `; waiting: ${what}`}`;
}

/** Compares a budgeted decision carries at most; beyond, it compares the nodes and the service only. */
export const budgetComparesMax = 96;

/**
 * What a decision that spends the budget relied on, as compares of the same transaction: that
 * every slot it counted available still is (its serving task's record and report unchanged, its
 * node still ready in the same epoch), that every task it stops is still as it was read (a slot
 * read as unavailable, and stopped for free, may have come to serve meanwhile: its report), and
 * that the spec is the one it read (the number of slots). For a global service, every node's
 * availability, state and epoch (which nodes have a slot). Task records the plan itself writes
 * are compared by their own put. Past budgetComparesMax compares (a service of some fifty tasks)
 * the tasks are left out and only the nodes and the service are compared.
 */
export function budgetCompares(state: ControlState, svc: ServiceRecord, a: BudgetAssessment, written: ReadonlySet<string>, stopped: readonly TaskView[] = []): Compare[] {
  const out: Compare[] = [];
  const serviceRev = state.services.get(svc.name)?.rev;
  if (serviceRev !== undefined) out.push({ collection: servicesCollection, id: svc.name, target: 'rev', cmp: '=', value: serviceRev });
  const nodes = new Set<string>();
  const tasks: Compare[] = [];
  const seen = new Set<string>();
  for (const v of [...a.serving.values(), ...stopped]) {
    const id = v.record.id;
    if (seen.has(id)) continue;
    seen.add(id);
    if (v.record.nodeId !== null) nodes.add(v.record.nodeId);
    if (!written.has(id)) tasks.push({ collection: tasksCollection, id, target: 'rev', cmp: '=', value: v.rev });
    const report = state.statuses.get(id);
    tasks.push(report === undefined
      ? { collection: taskStatusCollection, id, target: 'exists', cmp: '=', value: false }
      : { collection: taskStatusCollection, id, target: 'rev', cmp: '=', value: report.rev });
  }
  if (svc.spec.mode === 'global') for (const id of state.nodes.keys()) nodes.add(id);
  for (const id of [...nodes].sort()) {
    const n = state.nodes.get(id)?.value;
    if (n === undefined) continue;
    const at = (path: string, value: number | string): Compare => ({ collection: nodesCollection, id, target: 'value', path, cmp: '=', value });
    out.push(at('state', n.state), at('epoch', n.epoch));
    if (svc.spec.mode === 'global') out.push(at('availability', n.availability));
  }
  return out.length + tasks.length <= budgetComparesMax ? [...out, ...tasks] : out;
}

/** The slots of the service whose serving task runs on `nodeId`: what taking that node away costs. */
export function slotsServedOn(a: BudgetAssessment, nodeId: string): string[] {
  return [...a.serving].filter(([, v]) => v.record.nodeId === nodeId).map(([slot]) => slot).sort(compareNatural);
}

/** Per service that a voluntary action taking `nodeId` away would touch: what it costs, what is left, and whether it fits. */
export interface NodeLossVerdict {
  service: string;
  /** Available slots served on the node (taking it away makes them unavailable). */
  slots: string[];
  assessment: BudgetAssessment;
  /** Whether the budget allows all of them now. */
  fits: boolean;
  /** Already forced past the budget for this cause (a record on the service). */
  forced: boolean;
  /** Why it does not fit, naming the budget; null when it fits. */
  reason: string | null;
}

/**
 * What taking `nodeId` away (a drain's moves, a drill) costs each service with a task serving on
 * it. A global service's task on a node being drained costs nothing: the node leaves its slots.
 */
export function nodeLossVerdicts(state: ControlState, nodeId: string, cause: DisruptionCause): NodeLossVerdict[] {
  const out: NodeLossVerdict[] = [];
  for (const s of [...state.services.values()].sort((a, b) => compareText(a.value.name, b.value.name))) {
    const svc = s.value;
    if (cause.cause === 'drain' && svc.spec.mode === 'global') continue;
    const a = assessBudget(state, svc);
    const slots = slotsServedOn(a, nodeId);
    if (slots.length === 0) continue;
    // A start-first move starts the new task before the old one stops: the slot stays available.
    const free = cause.cause === 'drain' && svc.spec.update.order === 'start-first' && !svc.spec.exclusive;
    const fits = free || slots.length <= a.allowed;
    const forced = forcedFor(svc.forcedDisruptions, cause) !== undefined;
    const reason = fits ? null : budgetWaitText(a, slots.map(() => cause));
    out.push({ service: svc.name, slots, assessment: a, fits, forced, reason });
  }
  return out;
}

/** The record with one more forced disruption (the oldest dropped past forcedDisruptionsMax; one of the same cause and target replaced). */
export function withForced(svc: ServiceRecord, f: ForcedDisruption): ServiceRecord {
  const others = svc.forcedDisruptions.filter((x) => !(x.cause === f.cause && x.nodeId === f.nodeId && x.specVersion === f.specVersion));
  return { ...svc, forcedDisruptions: [...others, f].slice(-forcedDisruptionsMax) };
}

/** `forced past the disruption budget (maxUnavailable 1) by alice: 1 slot unavailable (slot 3: node n2 down)`. */
export function forcedText(a: BudgetAssessment, by: string | null): string {
  return `forced past the disruption budget (${a.limit})${by === null ? '' : ` by ${by}`}: ${unavailableText(a)}`;
}
