// The leader's job loop: one job's schedule, runs and their attempts. A pure function of the
// control state and the leader's log time, like the orchestrator (orchestrator.ts); the leader's
// run (leader-run.ts) proposes its plan fenced by its term, a compare-and-set on every record read.
//
// What it guarantees, and how (checked by test/control/job-loop.test.ts and the control-plane
// simulator's job checkers):
// - A scheduled time gets at most one run: the run's id is derived from (job, time), created with
//   "must not exist" in the transaction that moves the job's `lastScheduledAt` past the time
//   (compared on the job's revision). A leader decides only times after `lastScheduledAt`.
// - A forbid (or replace) job never has two attempts at once: an attempt's task is created only
//   when no other attempt of the job may still run: every other task is finished, and a task
//   whose node was lost (orphaned) counts as running until its node's lease has surely expired
//   (the task runs exclusive, under the lease: lease.ts), as for an exclusive service.
// - A possible run is not skipped: when the latest due time is within startingDeadline (or there
//   is none) and concurrency allows, a run is created; otherwise the time is recorded as a
//   `missed` run, with why. Earlier due times (a leader-less stretch covering several) are
//   recorded in one missed run for the time before the latest, naming how many.

import type { Compare } from '../../fsm/index.ts';
import { deleteChange, putChange, type Change } from '../resources/changes.ts';
import { taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import { isFinishedRun, jobRunsCollection, jobsCollection, newRun, runId, type JobRecord, type JobRunRecord } from '../resources/jobs.ts';
import { runsOf } from '../resources/task-owner.ts';
import type { TaskRecord } from '../resources/records.ts';
import { countBetween, latestAtOrBefore, nextAfter, parseSchedule, type Schedule } from '../resources/spec/schedule.ts';
import { renderDuration } from '../resources/spec/quantity.ts';
import { tasksOf, type ControlState, type Versioned } from '../resources/state.ts';
import { isTerminal, viewOf, type TaskView } from '../resources/task-view.ts';
import { backoffDelayMs } from '../base/backoff.ts';
import { mirror, shutdown, Wake, type Decision, type LoopContext, type Work } from './orchestrator.ts';
import { compareText } from '../base/order.ts';

/** The first retry of a failed run waits this long, doubled per retry up to retryDelayMsMax (as Kubernetes Jobs). */
export const retryDelayMs = 10_000;
export const retryDelayMsMax = 6 * 60_000;
/**
 * A job is looked at again at least this often: the work queue's timers run on the monotonic
 * clock while times are log time (a wall clock stepped by its time daemon is seen within this),
 * and a timer of months would overflow (setTimeout's limit is 24.8 days).
 */
export const jobWakeMsMax = 60_000;
/** Scheduled times counted at most when a leader-less stretch is recorded missed. */
export const missedCountMax = 10_000;

/** While the clock rule holds a due run, how often the job's loop looks again. */
export const clockHoldRecheckMs = 5_000;

export interface JobLoopContext extends LoopContext {
  /** Why this leader must not fire scheduled runs now (its clock is not to be trusted); null: it may. */
  clockHold?: string | null;
}

interface RunWork {
  rec: JobRunRecord;
  /** The revision read; null for a run created in this pass. */
  rev: number | null;
  read: JobRunRecord | null;
  deleted: boolean;
}

interface Pass {
  state: ControlState;
  job: Versioned<JobRecord> | undefined;
  runs: RunWork[];
  tasks: Work[];
  ctx: JobLoopContext;
  wake: Wake;
  jobChange: JobRecord | null;
}

export function reconcileJob(state: ControlState, name: string, ctx: JobLoopContext): Decision {
  const job = state.jobs?.get(name);
  const runs = runsOf(state.runs ?? new Map(), name).map((r): RunWork => ({ rec: { ...r.value }, rev: r.rev, read: r.value, deleted: false }));
  const tasks = tasksOf(state, name).map((t): Work => ({ rec: { ...t.value }, view: viewOf(state, t), rev: t.rev, deleted: false }));
  for (const w of tasks) mirror(w, ctx.now);
  const p: Pass = { state, job, runs, tasks, ctx, wake: new Wake(ctx.now), jobChange: null };
  if (job === undefined) {
    for (const r of runs) if (!isFinishedRun(r.rec)) finish(p, r, 'cancelled', 'the job was removed');
  } else {
    for (const r of runs) if (!isFinishedRun(r.rec)) progress(p, r, job.value);
    maybeSchedule(p, job.value);
    for (const r of runs.filter((x) => x.rec.state === 'pending')) maybeStartAttempt(p, r, job.value);
  }
  const changes = [...createdRuns(p), ...prune(p), ...taskChanges(p), ...runChanges(p)];
  const compares: Compare[] = [];
  if (job !== undefined) {
    if (p.jobChange !== null) changes.unshift(putChange(jobsCollection, name, { ...p.jobChange, updatedAt: ctx.now }, job.rev));
    else if (changes.length > 0) compares.push({ collection: jobsCollection, id: name, target: 'rev', cmp: '=', value: job.rev });
  }
  const wake = p.wake.inMs();
  return { plan: { changes, compares }, wakeInMs: job === undefined ? wake : Math.min(wake ?? jobWakeMsMax, jobWakeMsMax) };
}

// ---- one run's progress ---------------------------------------------------------------------

function taskOf(p: Pass, id: string | null): Work | undefined {
  return id === null ? undefined : p.tasks.find((t) => t.rec.id === id);
}

/** Follows the run's current attempt: running, exited 0, failed (retry or give up), lost with its node, too long. */
function progress(p: Pass, r: RunWork, job: JobRecord): void {
  const t = taskOf(p, r.rec.taskId);
  const now = p.ctx.now;
  if (t !== undefined && t.rec.nodeId !== null) r.rec.nodeId = t.rec.nodeId;
  if (r.rec.startedAt === null && r.rec.attempts <= 1 && missedDeadline(p, r, job)) {
    if (t !== undefined) shutdown(t, now, 'its run missed its starting deadline');
    finish(p, r, 'missed', `not started within startingDeadline ${renderDuration(job.spec.startingDeadlineMs ?? 0)}: ${t === undefined ? 'an earlier run was still running' : (t.rec.pendingReason ?? 'no node took it')}`);
    return;
  }
  // A pending run's task is its last failed attempt, waiting for the retry's backoff.
  if (t === undefined || t.rec.desired === 'shutdown' || r.rec.state === 'pending') return;
  const observed = t.view.observed;
  if (observed === 'running') {
    r.rec.state = 'running';
    if (r.rec.startedAt === null) r.rec.startedAt = now;
  }
  // An attempt that exited is left desired running: its node keeps the container (and its log)
  // until the task is deleted with the run (prune); the agent never restarts an exclusive task.
  if (observed === 'failed' && t.rec.exitCode === 0) {
    r.rec.exitCode = 0;
    finish(p, r, 'succeeded', null);
    return;
  }
  if (observed === 'failed' || observed === 'orphaned') {
    if (observed === 'orphaned') shutdown(t, now, null);
    r.rec.exitCode = t.rec.exitCode;
    const why = observed === 'orphaned' ? `attempt ${r.rec.attempts} was lost with its node ${t.rec.nodeId ?? '?'}` : `attempt ${r.rec.attempts} failed: ${t.rec.message ?? `exit ${t.rec.exitCode ?? '?'}`}`;
    if (r.rec.attempts > job.spec.backoffLimit) {
      finish(p, r, 'failed', `${why}; backoffLimit ${job.spec.backoffLimit} reached`);
      return;
    }
    r.rec.state = 'pending';
    r.rec.message = `${why}; retrying`;
    r.rec.notBefore = now + backoffDelayMs(r.rec.attempts, retryDelayMs, retryDelayMsMax);
    return;
  }
  const deadline = job.spec.activeDeadlineMs;
  if (deadline !== null && r.rec.startedAt !== null) {
    if (now >= r.rec.startedAt + deadline) {
      shutdown(t, now, 'its run went past activeDeadline');
      finish(p, r, 'failed', `ran longer than activeDeadline ${renderDuration(deadline)}; stopped`);
    } else {
      p.wake.at(r.rec.startedAt + deadline);
    }
  }
}

/** A run never started whose scheduled time is past startingDeadline (manual runs have none). */
function missedDeadline(p: Pass, r: RunWork, job: JobRecord): boolean {
  const d = job.spec.startingDeadlineMs;
  if (d === null || r.rec.cause === 'manual') return false;
  const t = taskOf(p, r.rec.taskId);
  if (t !== undefined && (t.rec.nodeId !== null || t.view.observed !== 'pending')) return false;
  if (p.ctx.now <= r.rec.scheduledAt + d) {
    p.wake.at(r.rec.scheduledAt + d + 1);
    return false;
  }
  return true;
}

function finish(p: Pass, r: RunWork, state: JobRunRecord['state'], message: string | null): void {
  r.rec.state = state;
  r.rec.finishedAt = p.ctx.now;
  r.rec.notBefore = null;
  if (message !== null || state === 'succeeded') r.rec.message = message;
  const t = taskOf(p, r.rec.taskId);
  if (t !== undefined && !isTerminal(t.view)) shutdown(t, p.ctx.now, state === 'cancelled' ? message : null);
}

// ---- starting attempts ----------------------------------------------------------------------

/** Ms until a task may be taken as running nothing (0: it is); Infinity while it runs or stops. */
function clearInMs(p: Pass, t: Work): number {
  if (!isTerminal(t.view)) return t.rec.nodeId === null && t.rec.desired === 'shutdown' ? 0 : Number.POSITIVE_INFINITY;
  if (t.view.observed !== 'orphaned' || t.rec.nodeId === null || t.rec.nodeEpoch === null) return 0;
  return p.ctx.exclusiveClearInMs === undefined ? Number.POSITIVE_INFINITY : p.ctx.exclusiveClearInMs(t.rec.nodeId, t.rec.nodeEpoch);
}

/** A pending run gets its next attempt's task once its backoff has passed and nothing it must not overlap may run. */
function maybeStartAttempt(p: Pass, r: RunWork, job: JobRecord): void {
  if (r.rec.notBefore !== null && p.ctx.now < r.rec.notBefore) {
    p.wake.at(r.rec.notBefore);
    return;
  }
  // Its own earlier attempts always; every other run's too unless the job allows overlap.
  const others = p.tasks.filter((t) => !t.deleted && (t.rec.slot === r.rec.id || job.spec.concurrency !== 'allow'));
  let waitMs = 0;
  for (const t of others) waitMs = Math.max(waitMs, clearInMs(p, t));
  if (waitMs > 0) {
    if (Number.isFinite(waitMs)) p.wake.at(p.ctx.now + waitMs);
    return;
  }
  // Under forbid, the oldest pending run goes first (a manual run beside a scheduled one).
  if (job.spec.concurrency !== 'allow') {
    const first = p.runs.filter((x) => x.rec.state === 'pending' || x.rec.state === 'running')
      .sort((a, b) => a.rec.createdAt - b.rec.createdAt || compareText(a.rec.id, b.rec.id))[0];
    if (first !== r) return;
  }
  const rec: TaskRecord = {
    id: p.ctx.newTaskId(), service: job.name, slot: r.rec.id, specVersion: job.specVersion, nodeId: null, desired: 'running', observed: 'pending',
    assignedTerm: null, nodeEpoch: null, containerId: null, exitCode: null, message: null, pendingReason: null, attempt: r.rec.attempts,
    createdAt: p.ctx.now, assignedAt: null, startedAt: null, finishedAt: null, updatedAt: p.ctx.now,
  };
  const view: TaskView = { record: rec, rev: 0, status: undefined, observed: 'pending', healthy: false, node: undefined };
  p.tasks.push({ rec, view, rev: null, deleted: false });
  r.rec.attempts += 1;
  r.rec.taskId = rec.id;
  r.rec.state = 'running';
  r.rec.notBefore = null;
}

// ---- the schedule ---------------------------------------------------------------------------

function scheduleOf(job: JobRecord): Schedule | null {
  if (job.spec.schedule === null) return null;
  const s = parseSchedule(job.spec.schedule, job.spec.timezone);
  return s.ok ? s.value : null;
}

/** Creates the run of the latest due scheduled time (or records it missed), and says when to look next. */
function maybeSchedule(p: Pass, job: JobRecord): void {
  const s = scheduleOf(job);
  if (s === null || job.suspended) return;
  const now = p.ctx.now;
  const cursor = Math.max(job.scheduleFrom, job.lastScheduledAt ?? 0);
  const next = nextAfter(s, Math.max(cursor, now));
  if (next !== null) p.wake.at(next);
  const latest = latestAtOrBefore(s, now);
  if (latest === null || latest <= cursor) return;
  if (p.ctx.clockHold !== undefined && p.ctx.clockHold !== null) {
    // Held (clock-sanity.ts): look again soon, so the due run starts once the clock is trusted.
    p.wake.at(now + clockHoldRecheckMs);
    return;
  }
  const deadline = job.spec.startingDeadlineMs;
  const late = deadline !== null && now - latest > deadline;
  const active = p.runs.filter((r) => r.rec.state === 'pending' || r.rec.state === 'running');
  if (!late && active.length > 0 && job.spec.concurrency === 'forbid') {
    // The time waits for the run going on, within startingDeadline (then it is missed).
    if (deadline !== null) p.wake.at(latest + deadline + 1);
    return;
  }
  const skipped = countBetween(s, cursor, latest, missedCountMax) - 1;
  if (skipped > 0) {
    const before = latestAtOrBefore(s, latest - 1);
    if (before !== null && before > cursor) {
      const why = `no run was started for ${skipped === 1 ? 'this scheduled time' : `${skipped} scheduled times up to this one${skipped >= missedCountMax - 1 ? ' or more' : ''}`} (no leader ran the schedule${active.length > 0 && job.spec.concurrency === 'forbid' ? ', or a run was still going' : ''})`;
      addRun(p, job, before, 'missed', why);
    }
  }
  if (late) {
    addRun(p, job, latest, 'missed', `not started within startingDeadline ${renderDuration(deadline ?? 0)} of its time (${active.length > 0 && job.spec.concurrency === 'forbid' ? 'a run was still going' : 'no leader ran the schedule then'})`);
  } else {
    const created = addRun(p, job, latest, 'pending', null);
    if (job.spec.concurrency === 'replace' && created !== null) {
      for (const r of active) finish(p, r, 'cancelled', `replaced by ${created.rec.id} (concurrency replace)`);
    }
  }
  p.jobChange = { ...(p.jobChange ?? job), lastScheduledAt: latest };
}

function addRun(p: Pass, job: JobRecord, at: number, state: 'pending' | 'missed', message: string | null): RunWork | null {
  const id = runId(job.name, at, 'schedule');
  // Already there (a run of this time survived pruning of lastScheduledAt? never: the cursor is past it) - keep it.
  if (p.runs.some((r) => r.rec.id === id)) return null;
  const rec = newRun(job, at, 'schedule', p.ctx.now);
  rec.state = state;
  rec.message = message;
  if (state === 'missed') rec.finishedAt = p.ctx.now;
  const w: RunWork = { rec, rev: null, read: null, deleted: false };
  p.runs.push(w);
  return w;
}

// ---- history --------------------------------------------------------------------------------

/**
 * Finished runs beyond the job's history (per outcome, newest kept) or past ttlAfterFinished are
 * deleted with their tasks, once those run nothing. Every finished attempt but a run's last is
 * deleted too (the last keeps its logs reachable: `job logs --run`). A removed job's runs all go.
 */
function prune(p: Pass): Change[] {
  const out: Change[] = [];
  const job = p.job?.value;
  const keep = new Set<string>();
  if (job !== undefined) {
    const finished = p.runs.filter((r) => isFinishedRun(r.rec)).sort((a, b) => b.rec.scheduledAt - a.rec.scheduledAt || compareText(b.rec.id, a.rec.id));
    const ok = finished.filter((r) => r.rec.state === 'succeeded').slice(0, job.spec.history.succeeded);
    const bad = finished.filter((r) => r.rec.state !== 'succeeded').slice(0, job.spec.history.failed);
    const ttl = job.spec.ttlAfterFinishedMs;
    for (const r of [...ok, ...bad]) {
      const expires = ttl === null || r.rec.finishedAt === null ? null : r.rec.finishedAt + ttl;
      if (expires !== null && p.ctx.now >= expires) continue;
      if (expires !== null) p.wake.at(expires);
      keep.add(r.rec.id);
    }
    for (const r of p.runs) if (!isFinishedRun(r.rec)) keep.add(r.rec.id);
  }
  for (const r of p.runs) {
    const tasks = p.tasks.filter((t) => t.rec.slot === r.rec.id);
    const drop = !keep.has(r.rec.id);
    for (const t of tasks) {
      if (t.rev === null || (!drop && t.rec.id === r.rec.taskId)) continue;
      // An attempt lost with its node is kept until its lease has surely run out: the record is
      // what later attempts wait for (found by the job model, a replaced run's task reaped early).
      if (!isTerminal(t.view) || clearInMs(p, t) > 0) continue;
      out.push(...deleteTask(p, t));
    }
    const live = tasks.some((t) => !t.deleted);
    if (drop && r.rev !== null && !live) {
      r.deleted = true;
      out.push(deleteChange(jobRunsCollection, r.rec.id, r.rev));
    }
  }
  // Tasks of the job with no run (a run deleted before its last task finished stopping).
  const runIds = new Set(p.runs.filter((r) => !r.deleted || p.tasks.some((t) => t.rec.slot === r.rec.id && !t.deleted)).map((r) => r.rec.id));
  for (const t of p.tasks) {
    if (t.deleted || t.rev === null || runIds.has(String(t.rec.slot))) continue;
    if (!isTerminal(t.view)) shutdown(t, p.ctx.now, 'its run is gone');
    else if (clearInMs(p, t) === 0) out.push(...deleteTask(p, t));
  }
  return out;
}

function deleteTask(p: Pass, t: Work): Change[] {
  t.deleted = true;
  const out = [deleteChange(tasksCollection, t.rec.id, t.rev as number)];
  const status = p.state.statuses.get(t.rec.id);
  if (status !== undefined) out.push(deleteChange(taskStatusCollection, t.rec.id, status.rev));
  return out;
}

// ---- writes ---------------------------------------------------------------------------------

/** New runs first: they are the reason for the pass, and each is compared "must not exist". */
function createdRuns(p: Pass): Change[] {
  return p.runs.filter((r) => r.rev === null).map((r) => putChange(jobRunsCollection, r.rec.id, r.rec, null));
}

function runChanges(p: Pass): Change[] {
  const out: Change[] = [];
  for (const r of p.runs) {
    if (r.rev === null || r.deleted || r.read === null || sameRun(r.rec, r.read)) continue;
    out.push(putChange(jobRunsCollection, r.rec.id, { ...r.rec, updatedAt: p.ctx.now }, r.rev));
  }
  return out;
}

function sameRun(a: JobRunRecord, b: JobRunRecord): boolean {
  return (Object.keys(a) as (keyof JobRunRecord)[]).every((k) => k === 'updatedAt' || a[k] === b[k]);
}

function taskChanges(p: Pass): Change[] {
  const out: Change[] = [];
  for (const w of p.tasks) {
    if (w.deleted) continue;
    if (w.rev === null) out.push(putChange(tasksCollection, w.rec.id, w.rec, null));
    else if (!sameTask(w.rec, w.view.record)) out.push(putChange(tasksCollection, w.rec.id, { ...w.rec, updatedAt: p.ctx.now }, w.rev));
  }
  return out;
}

function sameTask(a: TaskRecord, b: TaskRecord): boolean {
  return (Object.keys(a) as (keyof TaskRecord)[]).every((k) => k === 'updatedAt' || a[k] === b[k]);
}
