// The orchestrator: makes one service's tasks match its spec. A pure function of the control
// state and the leader's log time; the supervisor runs it for each service whose records moved,
// and proposes the plan it returns as fenced transactions.
//
// Per slot (1..replicas for a replicated service, one per eligible node for a global one) there
// is at most one current task (the newest desired running); during a start-first replacement
// there are two. Each pass, on a working copy of the service's task records:
//   1. mirror the agents' reports into the records (observed state, container, exit code, the
//      log time a task was first seen running or finished), and mark tasks of lost nodes orphaned;
//   2. per slot: retire a failed or orphaned task, create the slot's task when it has none (after
//      the restart policy's delay), and replace a task that must move (its node drains) or
//      whose spec is old (a rolling update, paced by the update policy; rolling-update.ts). The
//      update's batch and then the drain's moves ask the service's disruption budget before they
//      take a slot down (disruption-budget.ts); what it holds back waits for a later pass;
//   3. shut down the tasks of slots the spec no longer has (scale down, a node no longer eligible);
//   4. delete finished tasks beyond a short history per slot, with their reports.
// Every changed record becomes one put expecting the revision it was read at, so the plan applies
// only to the state it was decided on; a plan that spends the budget also compares what the budget
// was counted on (every serving task, its report and its node), so it never spends a budget that
// a node's loss or a task's exit used up meanwhile.

import type { Compare } from '../../fsm/index.ts';
import { deleteChange, putChange, type Change, type Plan } from '../resources/changes.ts';
import { servicesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import type { ForcedDisruption, ServiceRecord, TaskRecord } from '../resources/records.ts';
import { assessBudget, budgetCompares, DisruptionLedger, serves, wantedSlots } from './disruption-budget.ts';
import { notRestartedNote, restartVerdict } from './restart-policy.ts';
import { planUpdate, type UpdatePass } from './rolling-update.ts';
import { ImagePullGate, settledRequests } from './image-pull-gate.ts';
import { rollbackPortClaims, rollbackPortClash, type PortRecordReader } from './ingress-apply.ts';
import { tasksOf, type ControlState } from '../resources/state.ts';
import { isTerminal, viewOf, type TaskView } from '../resources/task-view.ts';
import { compareText } from '../base/order.ts';

/** Finished tasks kept per slot, newest first, for `service ps` to show what happened. */
export const taskHistoryPerSlot = 2;

/** How long a forced rebalance or drill stays on the service record (log time): one action, shown for a while. */
export const forcedOneOffKeepMs = 10 * 60_000;

export interface LoopContext {
  /** The leader's log time (ms): every time written is in it. */
  now: number;
  /** A new unique task id. */
  newTaskId: () => string;
  /**
   * Ms until the exclusive tasks a node ran in an epoch are surely dead (lease.ts: lease + margin
   * since the later of the node's last renewal and the loops' start); 0 once they are. Absent:
   * never (an exclusive task of a lost node is then never replaced).
   */
  exclusiveClearInMs?: (nodeId: string, epoch: number) => number;
  /**
   * A stop-first replacement bound for another node waits until that node has pulled the new
   * image (image-pull-gate.ts): the cluster is at the feature level that reads the requests.
   * Absent: false (the stop goes on at once; the task's own node pulls before it stops).
   */
  pullBeforeStopElsewhere?: boolean;
  /**
   * Reads an ingress port record's revision: an automatic rollback claims the ports it brings
   * back (ingress-apply.ts) in its own transaction. Absent: it claims none (the clash check holds).
   */
  readPortRecord?: PortRecordReader;
}

export interface Decision {
  plan: Plan;
  /** Run again after this long (a restart delay, an update's monitor), or null. */
  wakeInMs: number | null;
  /** Tasks the plan assigns to a node (the placement pass), for the metrics. */
  placements?: number;
  /** What the service's disruption budget holds back, and why (disruption-budget.ts); null when nothing. */
  budgetWait?: string | null;
}

/** A mutable copy of one task record and what it was read as. */
export interface Work {
  rec: TaskRecord;
  view: TaskView;
  /** The revision read; null for a task created in this pass. */
  rev: number | null;
  deleted: boolean;
}

export function reconcileService(state: ControlState, name: string, ctx: LoopContext): Decision {
  const svc = state.services.get(name);
  const works = tasksOf(state, name).map((t): Work => ({ rec: { ...t.value }, view: viewOf(state, t), rev: t.rev, deleted: false }));
  for (const w of works) mirror(w, ctx.now);
  const wake = new Wake(ctx.now);
  let serviceChange: Change | undefined;
  let ledger: DisruptionLedger | undefined;
  let gate: ImagePullGate | undefined;
  if (svc === undefined) {
    for (const w of works) if (w.rec.desired === 'running') shutdown(w, ctx.now, 'the service was removed');
  } else {
    const wanted = wantedSlots(state, svc.value);
    ledger = new DisruptionLedger(assessBudget(state, svc.value, wanted), svc.value.forcedDisruptions);
    // The update's batch asks the budget first, then the drain's moves (reconcileSlot).
    const pass = planUpdate(svc.value, works, ctx.now, wanted.length, ledger, (previous) => rollbackPortClash(state, previous));
    gate = ctx.pullBeforeStopElsewhere === true ? new ImagePullGate(state, svc.value, ctx.now) : undefined;
    reconcileSlots(svc.value, wanted, works, pass, ledger, ctx, wake, gate);
    if (gate?.wakeAt != null) wake.at(gate.wakeAt);
    const base = pass.statusChange ?? svc.value;
    const forced = forcedStill(base, state, works, ctx.now, wake);
    const updated = forced.length === base.forcedDisruptions.length ? pass.statusChange : { ...base, forcedDisruptions: forced };
    if (updated !== null) serviceChange = putChange(servicesCollection, name, { ...updated, updatedAt: ctx.now }, svc.rev);
    if (pass.wakeAt !== null) wake.at(pass.wakeAt);
  }
  const changes = [...reap(state, works, svc === undefined), ...taskChanges(works, ctx.now)];
  if (gate !== undefined) changes.push(...gate.changes);
  if (state.imagePulls !== undefined) changes.push(...settledRequests(state, name, works, gate?.held ?? new Set()));
  if (serviceChange !== undefined) changes.push(serviceChange);
  const back = rollbackStarted(svc?.value, serviceChange);
  const claims = back !== null && ctx.readPortRecord !== undefined ? rollbackPortClaims(state, back, ctx.readPortRecord, ctx.now) : null;
  if (claims !== null) changes.push(...claims.changes);
  const stopped = stoppedNow(works);
  let compares: Compare[] = [];
  if (svc !== undefined && ledger?.spent === true) {
    compares = budgetCompares(state, svc.value, ledger.assessment, new Set(changes.filter((c) => c.collection === tasksCollection).map((c) => c.id)), [...stopped, ...ledger.relied]);
  } else if (svc !== undefined && stopped.length > 0) {
    // Stopping a task of a slot the spec no longer has (scaled down): only while the spec is the one read.
    compares = [{ collection: servicesCollection, id: name, target: 'rev', cmp: '=', value: svc.rev }];
  }
  if (claims !== null) compares = [...compares, ...claims.compares];
  return { plan: { changes, compares }, wakeInMs: wake.inMs(), budgetWait: ledger?.waitReason() ?? null };
}

/** The spec this pass's write of the service rolls back to, when it starts a rollback (an update failed with failureAction rollback); else null. */
function rollbackStarted(before: ServiceRecord | undefined, change: Change | undefined): ServiceRecord['spec'] | null {
  if (before === undefined || change === undefined || change.kind !== 'put') return null;
  const after = change.doc as unknown as ServiceRecord;
  return before.updateStatus.state !== 'rolling-back' && after.updateStatus.state === 'rolling-back' ? after.spec : null;
}

/** The tasks this pass asks to stop that were wanted running when read. */
function stoppedNow(works: readonly Work[]): TaskView[] {
  return works.filter((w) => w.rev !== null && w.view.record.desired === 'running' && w.rec.desired === 'shutdown').map((w) => w.view);
}

/**
 * The forced disruptions whose work goes on: an update or rollback to the version forced while it
 * runs, a drain while the node drains and still carries a task of the service; a rebalance or a
 * drill for forcedOneOffKeepMs. The others leave the record.
 */
function forcedStill(svc: ServiceRecord, state: ControlState, works: readonly Work[], now: number, wake: Wake): ForcedDisruption[] {
  return svc.forcedDisruptions.filter((f) => {
    if (f.cause === 'update') return updating.has(svc.updateStatus.state) && f.specVersion === svc.specVersion;
    if (f.cause === 'drain') {
      return state.nodes.get(f.nodeId ?? '')?.value.availability === 'drain' && works.some((w) => w.rec.desired === 'running' && w.rec.nodeId === f.nodeId);
    }
    wake.at(f.at + forcedOneOffKeepMs);
    return now < f.at + forcedOneOffKeepMs;
  });
}

const updating: ReadonlySet<string> = new Set(['updating', 'rolling-back']);

/** The earliest moment a service (or a job, job-loop.ts) needs another look. */
export class Wake {
  private earliest: number | null = null;
  constructor(private readonly now: number) {}
  at(t: number): void {
    if (t > this.now && (this.earliest === null || t < this.earliest)) this.earliest = t;
  }
  inMs(): number | null {
    return this.earliest === null ? null : this.earliest - this.now;
  }
}

/** Copies what the agent reported, and what the leader concludes from the node, into the record. */
export function mirror(w: Work, now: number): void {
  const { rec, view } = w;
  const s = view.status;
  if (s !== undefined && !isTerminalRecord(rec)) {
    rec.containerId = s.containerId;
    rec.exitCode = s.exitCode;
    if (s.message !== null) rec.message = s.message;
    // Running as wanted says all there is: what was said before it ran (waiting for its networks,
    // an image pull) is cleared, not shown beside `running`. A reason to stop it stays.
    else if (s.state === 'running' && rec.desired === 'running') rec.message = null;
  }
  if (view.observed === 'orphaned' && rec.observed !== 'orphaned') rec.message = `its node ${rec.nodeId ?? '?'} was lost (declared down or removed)`;
  rec.observed = view.observed;
  if (view.observed === 'running' && rec.startedAt === null) rec.startedAt = now;
  if (isTerminal(view) && rec.finishedAt === null) rec.finishedAt = now;
}

export function shutdown(w: Work, now: number, why: string | null): void {
  if (w.rec.desired === 'shutdown') return;
  w.rec.desired = 'shutdown';
  if (why !== null) w.rec.message = why;
  if (w.rec.nodeId === null && !isTerminal(w.view)) {
    // Never placed: nothing runs, so it is finished at once.
    w.rec.observed = 'shutdown';
    w.rec.finishedAt = now;
  }
}

function reconcileSlots(svc: ServiceRecord, wanted: (number | string)[], works: Work[], pass: UpdatePass, ledger: DisruptionLedger, ctx: LoopContext, wake: Wake, gate?: ImagePullGate): void {
  const wantedKeys = new Set(wanted.map(String));
  const bySlot = new Map<string, Work[]>();
  for (const w of works) bySlot.set(String(w.rec.slot), [...(bySlot.get(String(w.rec.slot)) ?? []), w]);
  for (const slot of wanted) {
    const created = reconcileSlot(svc, slot, bySlot.get(String(slot)) ?? [], pass, ledger, ctx, wake, gate);
    if (created !== undefined) works.push(created);
  }
  for (const [slot, ws] of bySlot) {
    if (wantedKeys.has(slot)) continue;
    for (const w of ws) shutdown(w, ctx.now, svc.spec.mode === 'global' ? 'its node is no longer eligible' : 'scaled down');
  }
}

/** Converges one wanted slot; returns a task it creates. */
function reconcileSlot(svc: ServiceRecord, slot: number | string, ws: Work[], pass: UpdatePass, ledger: DisruptionLedger, ctx: LoopContext, wake: Wake, gate?: ImagePullGate): Work | undefined {
  const alive = ws.filter((w) => w.rec.desired === 'running').sort((a, b) => a.rec.createdAt - b.rec.createdAt || compareText(a.rec.id, b.rec.id));
  for (const w of alive) {
    if (w.view.observed === 'failed') shutdown(w, ctx.now, null);
    else if (w.view.observed === 'orphaned') shutdown(w, ctx.now, null);
  }
  const running = alive.filter((w) => w.rec.desired === 'running');
  const current = running[running.length - 1];
  if (current === undefined) return refill(svc, slot, ws, pass, ctx, wake);
  const older = running.slice(0, -1);
  if (older.length > 0) {
    // A start-first replacement: the old tasks stop once the new one serves (runs, healthy, on a
    // ready node), which keeps the slot available: the plan relies on it (compared).
    if (serves(current.view)) {
      for (const o of older) shutdown(o, ctx.now, `replaced by ${current.rec.id}`);
      ledger.rely(current.view);
    }
    return undefined;
  }
  const startFirst = svc.spec.update.order === 'start-first' && !svc.spec.exclusive;
  const why = mustMove(current, pass, startFirst, ledger);
  if (why === null) return undefined;
  if (startFirst) return newTask(svc, slot, pass.target, 0, ctx);
  // Its replacement goes to another node: the stop waits (bounded) until the image is there.
  if (gate?.mustWait(current.rec, pass.target) === true) return undefined;
  shutdown(current, ctx.now, why);
  return undefined;
}

/**
 * Why the slot's current task must be replaced by a new one now; null if it stays. An update's
 * replacement has asked the budget already (planUpdate); a drain's stop-first move asks it here,
 * and waits when it says no (a start-first one keeps the slot serving).
 */
function mustMove(w: Work, pass: UpdatePass, startFirst: boolean, ledger: DisruptionLedger): string | null {
  const node = w.view.node;
  const draining = node?.availability === 'drain';
  if (pass.replaceNow.has(w.rec.id)) return draining ? `its node ${node.name} is draining` : `updating to spec version ${pass.target}`;
  if (!draining) return null;
  if (!startFirst && !ledger.take(w.rec.slot, { cause: 'drain', nodeId: node.id, nodeName: node.name })) return null;
  return `its node ${node.name} is draining`;
}

/** A slot with no task desired running: a new one, once the policy allows. */
function refill(svc: ServiceRecord, slot: number | string, ws: Work[], pass: UpdatePass, ctx: LoopContext, wake: Wake): Work | undefined {
  // Stop-first: the new task waits until the old one has stopped.
  if (ws.some((w) => w.rec.desired === 'shutdown' && !isTerminal(w.view) && w.rec.nodeId !== null)) return undefined;
  if (svc.spec.exclusive) {
    const waitMs = exclusiveWaitMs(ws, ctx);
    if (waitMs > 0) {
      // Never (no lease rule given) is no wake-up: the loop looks again when the store changes.
      if (Number.isFinite(waitMs)) wake.at(ctx.now + waitMs);
      return undefined;
    }
  }
  const last = [...ws].sort((a, b) => b.rec.createdAt - a.rec.createdAt || compareText(b.rec.id, a.rec.id))[0];
  let attempt = 0;
  if (last !== undefined && last.rec.observed === 'failed') {
    const verdict = restartVerdict(last.rec, svc.spec.restart);
    if (!verdict.restart) {
      if (last.rec.message === null || !last.rec.message.includes(verdict.why)) last.rec.message = `${last.rec.message ?? 'failed'}${notRestartedNote}${verdict.why}`;
      return undefined;
    }
    if (ctx.now < verdict.notBefore) {
      wake.at(verdict.notBefore);
      return undefined;
    }
    attempt = verdict.attempt;
  }
  return newTask(svc, slot, pass.target, attempt, ctx);
}

/**
 * An exclusive slot is refilled only once every task of it whose fate is unknown (orphaned: its
 * node was lost while it may have run) is surely dead by the lease; how long until then.
 */
function exclusiveWaitMs(ws: Work[], ctx: LoopContext): number {
  let waitMs = 0;
  for (const w of ws) {
    if (w.view.observed !== 'orphaned' || w.rec.nodeId === null || w.rec.nodeEpoch === null) continue;
    const clearIn = ctx.exclusiveClearInMs === undefined ? Number.POSITIVE_INFINITY : ctx.exclusiveClearInMs(w.rec.nodeId, w.rec.nodeEpoch);
    if (clearIn > waitMs) waitMs = clearIn;
  }
  return waitMs;
}

function newTask(svc: ServiceRecord, slot: number | string, specVersion: number, attempt: number, ctx: LoopContext): Work {
  const rec: TaskRecord = {
    id: ctx.newTaskId(), service: svc.name, slot, specVersion, nodeId: null, desired: 'running', observed: 'pending',
    assignedTerm: null, nodeEpoch: null, containerId: null, exitCode: null, message: null, pendingReason: null, attempt,
    createdAt: ctx.now, assignedAt: null, startedAt: null, finishedAt: null, updatedAt: ctx.now,
  };
  const view: TaskView = { record: rec, rev: 0, status: undefined, observed: 'pending', healthy: false, node: undefined };
  return { rec, view, rev: null, deleted: false };
}

/**
 * Finished tasks (desired shutdown and known to run nothing) beyond the newest few of each slot,
 * or all of them once the service is gone, are deleted with their agents' reports.
 */
function reap(state: ControlState, works: Work[], serviceGone: boolean): Change[] {
  const out: Change[] = [];
  const bySlot = new Map<string, Work[]>();
  for (const w of works) {
    if (w.rev === null || w.rec.desired !== 'shutdown' || !isTerminalRecord(w.rec)) continue;
    bySlot.set(String(w.rec.slot), [...(bySlot.get(String(w.rec.slot)) ?? []), w]);
  }
  for (const ws of bySlot.values()) {
    ws.sort((a, b) => b.rec.createdAt - a.rec.createdAt || compareText(b.rec.id, a.rec.id));
    for (const w of ws.slice(serviceGone ? 0 : taskHistoryPerSlot)) {
      w.deleted = true;
      out.push(deleteChange(tasksCollection, w.rec.id, w.rev as number));
      const status = state.statuses.get(w.rec.id);
      if (status !== undefined) out.push(deleteChange(taskStatusCollection, w.rec.id, status.rev));
    }
  }
  return out;
}

function isTerminalRecord(r: TaskRecord): boolean {
  return r.observed === 'failed' || r.observed === 'shutdown' || r.observed === 'orphaned';
}

/** One put per created or changed task record (stamped with the time it changed). */
function taskChanges(works: Work[], now: number): Change[] {
  const out: Change[] = [];
  for (const w of works) {
    if (w.deleted) continue;
    if (w.rev === null) {
      out.push(putChange(tasksCollection, w.rec.id, w.rec, null));
    } else if (!sameRecord(w.rec, w.view.record)) {
      w.rec.updatedAt = now;
      out.push(putChange(tasksCollection, w.rec.id, w.rec, w.rev));
    }
  }
  return out;
}

function sameRecord(a: TaskRecord, b: TaskRecord): boolean {
  for (const k of Object.keys(a) as (keyof TaskRecord)[]) if (k !== 'updatedAt' && a[k] !== b[k]) return false;
  return true;
}

