// Service views and task items as GET /v1/services/NAME answers them, built by hand for the
// tests of the CLI's pure parts (converge-verdict, control-format).

import type { ServiceView, TaskItem } from '../../src/cli/control-api.ts';

type Status = ServiceView['status'];

export function view(over: Partial<Status> = {}, record: { specVersion?: number; update?: string; replicas?: number } = {}): ServiceView {
  const replicas = record.replicas ?? 3;
  return {
    name: 'web', rev: 1,
    record: {
      name: 'web', spec: { name: 'web', image: 'ghost:1', mode: 'replicated', replicas }, specVersion: record.specVersion ?? 1, previousSpecVersion: null,
      updateStatus: { state: record.update ?? 'none', message: null },
    },
    status: { desired: replicas, running: 0, serving: 0, unreachable: 0, tasks: replicas, pending: 0, pendingReasons: [], stopping: 0, updating: false, converged: false, ...over },
  };
}

let clock = 0;
/** One task; the later made, the newer. */
export function task(slot: number, observed: string, message: string | null = null, over: Partial<TaskItem> = {}): TaskItem {
  clock += 1;
  const desired = observed === 'failed' || observed === 'shutdown' ? 'shutdown' : 'running';
  return {
    id: `t${clock}`, rev: clock, service: 'web', slot, nodeId: 'n1', nodeName: 'n1', desired, observed, health: null,
    record: { specVersion: 1, message, pendingReason: null, createdAt: clock, exitCode: null },
    report: null, ...over,
  };
}

export const pull = 'image_pull_failed: image ghost:1 is not on this node and could not be pulled: pull access denied for ghost, repository does not exist';
