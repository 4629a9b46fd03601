// Rolling updates: which tasks of an old spec version are replaced now, and how the service's
// update status moves. A pure function, read by the orchestrator on every pass of the service.
//
// `apply` of a changed spec (a change that needs new tasks) makes the old spec the previous one
// and sets the update status to `updating`. Then, each pass: a new task is "good" once it has
// run (and been healthy, with a health check) for the policy's `monitor`; at most `parallelism`
// slots are in progress at a time (a new task not yet good, or an old one stopping for the
// update, or a wanted slot with no task at all), and a new batch waits `delay` after the last task
// turned good. A new task that fails before it is good (it exits, or its health check says
// unhealthy) fails the update: `pause` stops it there (paused), `rollback` swaps the spec
// back (rolling-back, the same machinery in the other direction). When every task runs the
// current version and is good, the update is completed (or rolled-back).
//
// A stop-first replacement also takes its slot down, so it asks the service's disruption budget
// (disruption-budget.ts) first: a batch is cut short where the budget says no, and the rest waits
// (a start-first one keeps its slot serving, and costs nothing).

import type { ServiceRecord, ServiceUpdateStatus, TaskRecord } from '../resources/records.ts';
import { isTerminal, type TaskView } from '../resources/task-view.ts';
import type { DisruptionLedger } from './disruption-budget.ts';
import { compareNatural } from '../base/order.ts';

export interface UpdatePass {
  /** The spec version new tasks get. */
  target: number;
  /** Tasks of an old version to replace in this pass. */
  replaceNow: ReadonlySet<string>;
  /** The service record with a new update status (or spec, for a rollback); null if unchanged. */
  statusChange: ServiceRecord | null;
  /** When to look again (a task's monitor ends, a batch's delay ends); null if not needed. */
  wakeAt: number | null;
}

interface TaskLike {
  rec: TaskRecord;
  view: TaskView;
}

const active = new Set(['updating', 'rolling-back']);

/** Why the service may not go back to `previous` now (e.g. an ingress port another service took since); null when it may. */
export type RollbackRefusal = (previous: NonNullable<ServiceRecord['previousSpec']>) => string | null;

/**
 * `wantedSlots`: how many slots the spec has now (replicas, or eligible nodes). The update is done
 * only once that many tasks of the new version run and are good: with stop-first, a slot's new
 * task is created after its old one stopped, so "no old task left" alone comes too early.
 */
export function planUpdate(svc: ServiceRecord, tasks: readonly TaskLike[], now: number, wantedSlots: number, ledger?: DisruptionLedger, rollbackRefusal?: RollbackRefusal): UpdatePass {
  const target = svc.specVersion;
  const st = svc.updateStatus;
  const alive = tasks.filter((t) => t.rec.desired === 'running');
  const old = alive.filter((t) => t.rec.specVersion !== target);
  if (!active.has(st.state)) return { target, replaceNow: new Set(), statusChange: null, wakeAt: null };
  const since = st.startedAt ?? 0;
  const monitorMs = svc.spec.update.monitorMs;
  const fresh = tasks.filter((t) => t.rec.specVersion === target && t.rec.createdAt >= since);
  const failedEarly = fresh.find((t) => (t.view.observed === 'failed' && !wasGood(t.rec, monitorMs)) || unhealthyEarly(t, now, monitorMs));
  if (failedEarly !== undefined) return { target, replaceNow: new Set(), statusChange: onFailure(svc, failedEarly.rec, now, rollbackRefusal), wakeAt: null };
  const pending = fresh.filter((t) => t.rec.desired === 'running' && !isGood(t, now, monitorMs));
  const stopping = tasks.filter((t) => t.rec.desired === 'shutdown' && t.rec.specVersion !== target && !isTerminal(t.view) && t.rec.nodeId !== null);
  const good = alive.filter((t) => t.rec.specVersion === target && isGood(t, now, monitorMs)).length;
  if (old.length === 0 && pending.length === 0 && stopping.length === 0 && good >= wantedSlots) {
    return { target, replaceNow: new Set(), statusChange: finished(svc, now), wakeAt: null };
  }
  // Also a task of the target version from before the update (a rollback's) that started again
  // lately: it counts as good only after its monitor period, and nothing else would wake the pass
  // then (the control-plane simulator's seed 210: a rollback left rolling-back for good).
  const settling = alive.filter((t) => t.rec.specVersion === target && t.rec.startedAt !== null && !isGood(t, now, monitorMs) && !pending.includes(t));
  const wakeAt = earliest([...pending, ...settling].map((t) => (t.rec.startedAt ?? now) + monitorMs));
  // Slots in progress: a new task not yet good, an old one stopping, or two tasks side by side (a
  // start-first replacement, maybe of an earlier update or rollback: it counts against this one's
  // parallelism too, or the surge would add up; the control-plane simulator's seed 175).
  const busy = new Set([...pending, ...stopping].map((t) => String(t.rec.slot)));
  const aliveBySlot = new Map<string, number>();
  for (const t of alive) aliveBySlot.set(String(t.rec.slot), (aliveBySlot.get(String(t.rec.slot)) ?? 0) + 1);
  for (const [slot, n] of aliveBySlot) if (n > 1) busy.add(slot);
  // A wanted slot with no task at all is in progress too: with stop-first, between its old task
  // stopping and its new one being created (in this very pass), nothing else marks it, and the
  // next batch would start early, past parallelism (found on real Docker: test/system).
  const emptySlots = Math.max(0, wantedSlots - aliveBySlot.size);
  const inProgress = busy.size + emptySlots;
  const lastGood = Math.max(since, ...fresh.filter((t) => isGood(t, now, monitorMs)).map((t) => (t.rec.startedAt ?? 0) + monitorMs));
  const readyAt = inProgress === 0 && lastGood > since ? lastGood + svc.spec.update.delayMs : now;
  if (now < readyAt) return { target, replaceNow: new Set(), statusChange: null, wakeAt: earliest([readyAt, ...(wakeAt === null ? [] : [wakeAt])]) };
  const room = Math.max(0, svc.spec.update.parallelism - inProgress);
  const candidates = old.filter((t) => !busy.has(String(t.rec.slot)))
    .sort((a, b) => compareNatural(String(a.rec.slot), String(b.rec.slot)));
  // Start-first keeps the slot serving until the new task runs; stop-first takes it down first.
  const free = svc.spec.update.order === 'start-first' && !svc.spec.exclusive;
  const cause = { cause: 'update', specVersion: target, rollback: st.state === 'rolling-back' } as const;
  const next: TaskLike[] = [];
  for (const t of candidates) {
    if (next.length >= room) break;
    // Held: a later slot may still go (one already unavailable costs nothing).
    if (!free && ledger !== undefined && !ledger.take(t.rec.slot, cause)) continue;
    next.push(t);
  }
  return { target, replaceNow: new Set(next.map((t) => t.rec.id)), statusChange: null, wakeAt };
}

/** Has run for the monitor period and, with a health check, is healthy now. */
function isGood(t: TaskLike, now: number, monitorMs: number): boolean {
  return t.view.healthy && t.rec.startedAt !== null && now - t.rec.startedAt >= monitorMs;
}

/**
 * A task still wanted running whose health check fails, before it ran its monitor period healthy:
 * it failed the update as surely as one that exited (a check that never passes would otherwise
 * hold the update forever).
 */
function unhealthyEarly(t: TaskLike, now: number, monitorMs: number): boolean {
  if (t.rec.desired !== 'running' || t.view.status?.health !== 'unhealthy') return false;
  return t.rec.startedAt === null || now - t.rec.startedAt < monitorMs;
}

/** A task that ran its monitor period before it ended (it did not fail the update). */
function wasGood(r: TaskRecord, monitorMs: number): boolean {
  return r.startedAt !== null && r.finishedAt !== null && r.finishedAt - r.startedAt >= monitorMs;
}

function earliest(ts: number[]): number | null {
  return ts.length === 0 ? null : Math.min(...ts);
}

function withStatus(svc: ServiceRecord, status: ServiceUpdateStatus): ServiceRecord {
  return { ...svc, updateStatus: status };
}

function finished(svc: ServiceRecord, now: number): ServiceRecord {
  const state = svc.updateStatus.state === 'rolling-back' ? 'rolled-back' : 'completed';
  return withStatus(svc, { ...svc.updateStatus, state, completedAt: now });
}

function onFailure(svc: ServiceRecord, failed: TaskRecord, now: number, refusal?: RollbackRefusal): ServiceRecord {
  const why = `task ${failed.id} (slot ${String(failed.slot)}) failed within the update's monitor${failed.exitCode !== null ? ` (exit ${failed.exitCode})` : ''}${failed.message !== null ? `: ${failed.message}` : ''}`;
  if (svc.updateStatus.state === 'rolling-back') {
    return withStatus(svc, { ...svc.updateStatus, state: 'rollback-paused', completedAt: now, message: `the rollback failed: ${why}` });
  }
  if (svc.spec.update.failureAction === 'rollback' && svc.previousSpec !== null && svc.previousSpecVersion !== null) {
    const refused = refusal?.(svc.previousSpec) ?? null;
    if (refused === null) return rollback(svc, now, `rolled back: ${why}`);
    return withStatus(svc, { ...svc.updateStatus, state: 'paused', completedAt: now, message: `paused: ${why}; not rolled back: ${refused}` });
  }
  return withStatus(svc, { ...svc.updateStatus, state: 'paused', completedAt: now, message: `paused: ${why}` });
}

/**
 * The service going back to its previous spec: the current and previous specs (and versions)
 * swap, so tasks still running the previous version are current again and are not replaced.
 * Null when there is nothing to go back to.
 */
export function rollback(svc: ServiceRecord, now: number, message: string): ServiceRecord {
  if (svc.previousSpec === null || svc.previousSpecVersion === null) throw new Error('rollback without a previous spec');
  return {
    ...svc,
    spec: svc.previousSpec, specVersion: svc.previousSpecVersion,
    previousSpec: svc.spec, previousSpecVersion: svc.specVersion,
    updateStatus: { state: 'rolling-back', startedAt: now, completedAt: null, message },
  };
}

/**
 * The record after `apply` of a new spec: a change that needs new tasks starts an update. A new
 * version is always above both kept versions, so a version number never names two specs.
 */
export function withNewSpec(svc: ServiceRecord, spec: ServiceRecord['spec'], replace: boolean, now: number): ServiceRecord {
  const specVersion = Math.max(svc.specVersion, svc.previousSpecVersion ?? 0) + 1;
  if (!replace) return { ...svc, spec, updatedAt: now };
  return {
    ...svc, spec, specVersion, previousSpec: svc.spec, previousSpecVersion: svc.specVersion, updatedAt: now,
    updateStatus: { state: 'updating', startedAt: now, completedAt: null, message: null },
  };
}
