// The restart policy: whether a failed task's slot gets a new task, and when. A pure function of
// the failed task and its service's policy; the orchestrator applies it.

import type { TaskRecord } from '../resources/records.ts';
import type { RestartPolicy } from '../resources/spec/service-spec.ts';
import { backoffDelayMs } from '../base/backoff.ts';

export type RestartVerdict =
  | { restart: true; attempt: number; notBefore: number }
  | { restart: false; why: string };

/**
 * A task that ran at least this long before failing counts as having worked: the next attempt
 * starts again from the first delay (a crash once a day is not a crash loop).
 */
export const attemptResetAfterMs = 60_000;

/**
 * What the orchestrator appends to a failed task's message when its slot gets no new task (the
 * policy gave up); `shoal apply`'s wait reads it as "this slot will not try again".
 */
export const notRestartedNote = '; not restarted: ';

/** What the slot of `failed` (observed failed, finishedAt set) gets, under `policy`. */
export function restartVerdict(failed: TaskRecord, policy: RestartPolicy): RestartVerdict {
  if (policy.condition === 'never') return { restart: false, why: 'restart policy never' };
  if (policy.condition === 'on-failure' && failed.exitCode === 0) return { restart: false, why: 'exited 0 (restart policy on-failure)' };
  const ranLong = failed.startedAt !== null && failed.finishedAt !== null && failed.finishedAt - failed.startedAt >= attemptResetAfterMs;
  const attempt = ranLong ? 0 : failed.attempt + 1;
  if (policy.maxAttempts !== null && attempt > policy.maxAttempts) {
    return { restart: false, why: `gave up after ${policy.maxAttempts} restart attempt${policy.maxAttempts === 1 ? '' : 's'}` };
  }
  return { restart: true, attempt, notBefore: (failed.finishedAt ?? 0) + backoffMs(attempt, policy) };
}

/** The wait before attempt `attempt` (1 = the first restart): the delay doubled per attempt, capped. */
export function backoffMs(attempt: number, policy: RestartPolicy): number {
  return backoffDelayMs(attempt, policy.delayMs, policy.maxDelayMs);
}
