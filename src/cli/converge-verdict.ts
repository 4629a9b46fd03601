// What a service's view and tasks say to a command waiting for it to converge (converge.ts):
// the progress line, why the tasks of its current spec are not running (a pull that failed with
// the registry's answer, an exit, a health check failing, what a starting task waits for), and
// whether to stop waiting now. Pure: fed the answer of GET /v1/services/NAME.
//
// The wait stops early, before its timeout, when every slot of the service has failed the same
// way (the same kind: `image_pull_failed`, `exited with code 1`, `create failed`, ...)
// `sameFailureAttempts` times in a row at the spec version waited for, or failed once and will
// not be retried (its restart policy gave up). The cluster goes on retrying by the restart
// policy; the wait only stops watching what will not change by itself. Tasks that fail in
// different ways, or some that run, keep it waiting: that may be one bad node.

import { notRestartedNote } from '../control/restart-policy.ts';
import type { ServiceView, TaskItem } from './control-api.ts';
import { serviceProgress } from './control-format.ts';
import { compareSlotKeys } from '../api/task-order.ts';
import { compareText } from '../base/order.ts';

/** Failed attempts in a row, in every slot, all the same way, after which the wait stops (docs/cli.md). */
export const sameFailureAttempts = 2;

export interface WaitTarget {
  name: string;
  /** The spec version the change left it at; another one means someone else changed it. */
  specVersion: number;
}

export interface Verdict {
  /** The progress line, then one line per reason tasks do not run (indented). */
  lines: string[];
  /** Why the wait ends now, with the code --json prints; null while it goes on. */
  stop: { message: string; code: 'not_converged' | 'tasks_failing' } | null;
  converged: boolean;
  /** What the service's disruption budget holds back, and why; null when nothing (or an older node). */
  budgetWait: string | null;
}

/** A failed task's message: the leader's record, else the agent's report, else its exit. */
export function failureText(t: TaskItem): string {
  const m = t.record.message ?? t.report?.message ?? null;
  if (m !== null && m !== '') return m;
  return t.record.exitCode !== null ? `exited with code ${t.record.exitCode}` : 'failed';
}

/** The kind of a failure, for "the same way": `image_pull_failed`, `exited with code 1`, `create failed`. */
export function failureKind(text: string): string {
  const code = /^([a-z][a-z0-9]*(?:_[a-z0-9]+)+):/.exec(text);
  if (code?.[1] !== undefined) return code[1];
  return (text.split(/[:;]/)[0] ?? text).trim();
}

/** The slot's failures in a row at the version, newest first; a retry under way is skipped. */
interface SlotFailure {
  text: string;
  kind: string;
  attempts: number;
  /** The newest task failed and its restart policy gave up: nothing more will be tried. */
  final: boolean;
}

const inFlight: ReadonlySet<string> = new Set(['pending', 'assigned', 'starting']);

/** `tasks`: one slot's tasks at the version waited for, newest first. */
function slotFailure(tasks: readonly TaskItem[]): SlotFailure | null {
  if (tasks.some((t) => t.desired === 'running' && t.observed === 'running')) return null;
  const newest = tasks[0];
  if (newest === undefined) return null;
  // A retry on its way (not a task stuck starting with a failing health check) says nothing yet.
  const retrying = newest.desired === 'running' && inFlight.has(newest.observed) && newest.health !== 'unhealthy';
  const failed = tasks.slice(retrying ? 1 : 0);
  const first = failed[0];
  if (first === undefined || first.observed !== 'failed') return null;
  const text = failureText(first);
  const kind = failureKind(text);
  let attempts = 0;
  while (attempts < failed.length && failed[attempts]?.observed === 'failed' && failureKind(failureText(failed[attempts] as TaskItem)) === kind) attempts++;
  return { text: text.split(notRestartedNote)[0] ?? text, kind, attempts, final: !retrying && text.includes(notRestartedNote) };
}

/** The slots the service wants now, each with its tasks newest first (the slots scaled away are left out). */
function wantedSlots(view: ServiceView, tasks: readonly TaskItem[]): TaskItem[][] {
  const bySlot = new Map<string, TaskItem[]>();
  for (const t of tasks) bySlot.set(String(t.slot), [...(bySlot.get(String(t.slot)) ?? []), t]);
  const out: TaskItem[][] = [];
  for (const [slot, ts] of [...bySlot].sort(([a], [b]) => compareSlotKeys(a, b))) {
    ts.sort((a, b) => b.record.createdAt - a.record.createdAt || compareText(b.id, a.id));
    if (view.record.spec.mode === 'replicated' && Number(slot) > view.status.desired) continue;
    const newest = ts[0];
    if (newest !== undefined && (newest.desired === 'running' || newest.observed === 'failed')) out.push(ts);
  }
  return out;
}

/** Why a slot's task is not running, for the progress: what `N tasks` did, and the message. */
interface Reason {
  what: string;
  detail: string | null;
}

/** Null when the slot's task runs, or is pending (the status line says why). */
function slotReason(ts: readonly TaskItem[], failure: SlotFailure | null): Reason | null {
  if (failure !== null) return { what: 'failed', detail: failure.text };
  const newest = ts[0];
  if (newest === undefined || newest.desired !== 'running' || newest.observed !== 'starting') return null;
  if (newest.health === 'unhealthy') return { what: 'running, health check failing', detail: null };
  const m = newest.report?.message ?? newest.record.message;
  return m !== null && m !== undefined && m !== '' ? { what: 'starting', detail: m } : null;
}

/** `3 tasks failed: image_pull_failed: ...`, one line per distinct reason, the commonest first. */
function reasonLines(reasons: readonly (Reason | null)[]): string[] {
  const counts = new Map<string, { r: Reason; n: number }>();
  for (const r of reasons) {
    if (r === null) continue;
    const key = `${r.what}\u0000${r.detail ?? ''}`;
    counts.set(key, { r, n: (counts.get(key)?.n ?? 0) + 1 });
  }
  return [...counts.values()].sort((a, b) => b.n - a.n)
    .map(({ r, n }) => `${n} ${n === 1 ? 'task' : 'tasks'} ${r.what}${r.detail !== null ? `: ${r.detail}` : ''}`);
}

/** Why `v` will not converge to what the change asked (removed, changed again, update paused), or null. */
function specFailure(v: ServiceView | undefined, t: WaitTarget): string | null {
  if (v === undefined) return `${t.name} was removed`;
  const u = v.record.updateStatus;
  if (v.record.specVersion !== t.specVersion) {
    return `${t.name} is now at spec version ${v.record.specVersion}, not ${t.specVersion}: ${u.state === 'rolling-back' || u.state === 'rolled-back' ? `its update failed and it is ${u.state}` : 'it was changed again'}${u.message !== null ? ` (${u.message})` : ''}`;
  }
  if (u.state === 'paused' || u.state === 'rollback-paused') return `${t.name}'s update is ${u.state}${u.message !== null ? `: ${u.message}` : ''}; fix the spec and apply it again, or: shoal service rollback ${t.name}`;
  return null;
}

/** What the wait makes of one service: `state` undefined when the service is gone. */
export function verdictOf(t: WaitTarget, state: { service: ServiceView; tasks: readonly TaskItem[] } | undefined): Verdict {
  const v = state?.service;
  const specWhy = specFailure(v, t);
  if (specWhy !== null || state === undefined || v === undefined) {
    return { lines: v === undefined ? [] : [serviceProgress(v)], stop: { message: specWhy ?? `${t.name} was removed`, code: 'not_converged' }, converged: false, budgetWait: null };
  }
  const slots = wantedSlots(v, state.tasks).map((ts) => ts.filter((x) => x.record.specVersion === t.specVersion));
  const failures = slots.map(slotFailure);
  const lines = [serviceProgress(v), ...reasonLines(slots.map((ts, i) => slotReason(ts, failures[i] ?? null))).map((l) => `  ${l}`)];
  const stuck = allFailedAlike(failures, Math.max(v.status.desired, 1));
  const stop = stuck === null ? null : {
    code: 'tasks_failing' as const,
    message: `${t.name}: ${stuck.final ? 'every task failed, and its restart policy tries no more' : `every task failed ${sameFailureAttempts} times in a row`}, the same way: ${stuck.text}\n`
      + `  the change stays applied${stuck.final ? '' : ' and the cluster keeps retrying by the restart policy'}; fix the cause (the image, the registry, the command) and apply again, or remove it: shoal service rm ${t.name}`,
  };
  return { lines, stop, converged: v.status.converged, budgetWait: v.status.disruption?.waiting ?? null };
}

/** The failure every wanted slot shares, when each has failed it often enough to stop; null otherwise. */
function allFailedAlike(failures: readonly (SlotFailure | null)[], wanted: number): SlotFailure | null {
  if (failures.length < wanted) return null;
  const first = failures[0];
  if (first === null || first === undefined) return null;
  for (const f of failures) {
    if (f === null || f.kind !== first.kind || !(f.final || f.attempts >= sameFailureAttempts)) return null;
  }
  return failures.find((f) => f !== null && !f.final) ?? first;
}
