// How the leader reads one task: its record (the leader's decisions) merged with its agent's
// latest report, when that report is of the task's own node and epoch. Reports of another epoch
// are ignored: the node was declared down meanwhile, and what the leader decided then stands.

import type { NodeRecord, ObservedTaskState, TaskRecord, TaskStatus } from './records.ts';
import type { ControlState, Versioned } from './state.ts';

export interface TaskView {
  record: TaskRecord;
  rev: number;
  /** The agent's report, if it counts (same node and epoch). */
  status: TaskStatus | undefined;
  /** The state that counts: the report's, or the record's when there is none. */
  observed: ObservedTaskState;
  /** Running and, if the service has a health check, healthy. */
  healthy: boolean;
  node: NodeRecord | undefined;
}

const terminal: ReadonlySet<ObservedTaskState> = new Set(['failed', 'shutdown', 'orphaned']);

/** Whether the task is known to run nothing any more (failed, shut down, or lost with its node). */
export function isTerminal(v: TaskView): boolean {
  return terminal.has(v.observed);
}

export function viewOf(state: ControlState, t: Versioned<TaskRecord>): TaskView {
  const record = t.value;
  const s = state.statuses.get(record.id)?.value;
  const status = s !== undefined && s.nodeId === record.nodeId && s.nodeEpoch === record.nodeEpoch ? s : undefined;
  const node = record.nodeId === null ? undefined : state.nodes.get(record.nodeId)?.value;
  const observed = mergedState(record, status, node);
  const healthy = observed === 'running' && (status?.health === null || status?.health === undefined || status.health === 'healthy');
  return { record, rev: t.rev, status, observed, healthy, node };
}

function mergedState(record: TaskRecord, status: TaskStatus | undefined, node: NodeRecord | undefined): ObservedTaskState {
  // What the leader already concluded stays (a task it marked failed or orphaned is not revived by a late report).
  if (terminal.has(record.observed)) return record.observed;
  // Its node left the cluster, or was declared down (which raises its epoch): whatever ran there
  // is lost to the cluster, and the task is replaced.
  if (record.nodeId !== null && (node === undefined || node.epoch !== record.nodeEpoch)) return 'orphaned';
  if (status !== undefined) return status.state;
  return record.observed;
}
