// The restart policy applied on the node itself, while there is no quorum: the leader cannot
// hear of a failure then, let alone replace the task, so the agent restarts the same container
// with the policy's backoff (design.md, "no leader, no problem"). With a quorum the agent only
// reports the failure and the leader's orchestrator decides. Pure: time is passed in.

import type { RestartPolicy } from '../resources/spec/service-spec.ts';
import { backoffDelayMs } from '../base/backoff.ts';

/** One task's local restarts since the quorum was last seen. */
export interface LocalRestarts {
  /** Restarts done. */
  count: number;
  /** When the next may happen (monotonic ms), set when the exit was first seen; null until then. */
  notBeforeMs: number | null;
}

export type RestartDecision =
  | { kind: 'no'; why: string }
  | { kind: 'wait'; untilMs: number; state: LocalRestarts }
  | { kind: 'restart'; state: LocalRestarts };

/** The wait before restart number `count + 1`: delayMs, doubled per restart, at most maxDelayMs. */
export function restartDelayMs(policy: RestartPolicy, count: number): number {
  return policy.delayMs === 0 ? 0 : backoffDelayMs(count + 1, policy.delayMs, Math.max(policy.delayMs, policy.maxDelayMs));
}

/**
 * Whether to restart an exited container of a task now. `attempt` is the task's (its slot's
 * replacements so far), so local restarts and the leader's replacements share maxAttempts.
 */
export function decideLocalRestart(policy: RestartPolicy, attempt: number, exitCode: number | null, state: LocalRestarts | undefined, nowMs: number): RestartDecision {
  if (policy.condition === 'never') return { kind: 'no', why: 'restart policy never' };
  if (policy.condition === 'on-failure' && exitCode === 0) return { kind: 'no', why: 'exited with code 0 under restart policy on-failure' };
  const count = state?.count ?? 0;
  const failures = attempt + count + 1;
  if (policy.maxAttempts !== null && failures >= policy.maxAttempts) return { kind: 'no', why: `${failures} failed attempts, the policy allows ${policy.maxAttempts}` };
  const notBeforeMs = state?.notBeforeMs ?? nowMs + restartDelayMs(policy, count);
  if (nowMs >= notBeforeMs) return { kind: 'restart', state: { count: count + 1, notBeforeMs: null } };
  return { kind: 'wait', untilMs: notBeforeMs, state: { count, notBeforeMs } };
}
