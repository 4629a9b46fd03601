// What an agent reports of a task (its TaskStatus document), derived from what the runtime
// shows. Pure: no I/O, no clock.
//
// A task whose service has a health check is reported `running` only once the check passes;
// before that, and whenever it fails, it is `starting` with the check's verdict in `health`
// (the leader counts a task as running only then, and a rolling update's monitor waits on it).

import type { ReportedTaskState, TaskStatus } from '../resources/records.ts';
import type { ContainerInfo } from './runtime.ts';

/** Which task, on which node, under which epoch: the part of a report that does not come from the container. */
export interface ReportBase {
  taskId: string;
  nodeId: string;
  nodeEpoch: number;
}

/** The message of an exit: `exited with code 1`, `exited with code 137: OOM-killed`. */
export function exitMessage(c: ContainerInfo): string {
  const code = c.exitCode === null ? 'exited' : `exited with code ${c.exitCode}`;
  return c.error === null ? code : `${code}: ${c.error}`;
}

export function isRunningState(c: ContainerInfo): boolean {
  return c.state === 'running' || c.state === 'paused' || c.state === 'restarting';
}

export function isExitedState(c: ContainerInfo): boolean {
  return c.state === 'exited' || c.state === 'dead';
}

/**
 * The report for a container as it is now: running (health-gated) or failed once it exited;
 * null for a container created but never started (nothing to tell yet).
 */
export function observedStatus(base: ReportBase, c: ContainerInfo, hasHealthCheck: boolean): TaskStatus | null {
  if (isRunningState(c)) {
    const health = hasHealthCheck ? (c.health ?? 'starting') : null;
    const state: ReportedTaskState = health === null || health === 'healthy' ? 'running' : 'starting';
    const message = health === 'unhealthy' ? 'health check failing' : null;
    return { ...base, state, containerId: c.id, exitCode: null, health, message, startedAt: c.startedAt, finishedAt: null };
  }
  if (isExitedState(c)) return exitedStatus(base, c, 'failed', exitMessage(c));
  return null;
}

/** A container that ended: `failed` (it exited while wanted running) or `shutdown` (stopped on purpose). */
export function exitedStatus(base: ReportBase, c: ContainerInfo, state: 'failed' | 'shutdown', message: string | null): TaskStatus {
  return {
    ...base, state, containerId: c.id, exitCode: c.exitCode, health: c.health, message,
    startedAt: c.startedAt, finishedAt: c.finishedAt,
  };
}

/** The agent took the task: pulling, creating, starting. */
export function startingStatus(base: ReportBase): TaskStatus {
  return { ...base, state: 'starting', containerId: null, exitCode: null, health: null, message: null, startedAt: null, finishedAt: null };
}

/** The task could not start (`image_pull_failed: ...`, a create or start error); no exit code. */
export function failedStartStatus(base: ReportBase, containerId: string | null, message: string): TaskStatus {
  return { ...base, state: 'failed', containerId, exitCode: null, health: null, message, startedAt: null, finishedAt: null };
}

/** A task shut down whose container is already gone. */
export function goneStatus(base: ReportBase, state: 'failed' | 'shutdown', containerId: string | null, message: string | null): TaskStatus {
  return { ...base, state, containerId, exitCode: null, health: null, message, startedAt: null, finishedAt: null };
}

/** A report that says nothing new: the same in every field. */
export function sameStatus(a: TaskStatus, b: TaskStatus): boolean {
  return a.taskId === b.taskId && a.nodeId === b.nodeId && a.nodeEpoch === b.nodeEpoch && a.state === b.state
    && a.containerId === b.containerId && a.exitCode === b.exitCode && a.health === b.health && a.message === b.message
    && a.startedAt === b.startedAt && a.finishedAt === b.finishedAt;
}

/** Failed and shutdown are final for a task: the agent never starts it again (the leader replaces it). */
export function isTerminal(s: TaskStatus | null): boolean {
  return s !== null && (s.state === 'failed' || s.state === 'shutdown');
}
