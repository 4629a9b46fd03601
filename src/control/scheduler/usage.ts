// What each node already carries: the reservations, host ports and per-service counts of the
// tasks desired running on it. Built from the records at the start of a call, and extended by
// every placement the call makes, so later placements in the same call see earlier ones.
//
// Only tasks desired running count, as the records say what should run, not what still does. A
// task desired shutdown is on its way out, so its capacity and ports are free for the next
// placement at once: during a stop-first update the node may briefly carry both containers, and
// a new task's host port may be busy until the old one has stopped (its grace period at most).

import { assert } from '../../base/assert.ts';
import type { NodeRecord } from '../../resources/records.ts';
import { demandOf } from './demand.ts';
import type { NodeUsage, TaskDemand, TaskWithSpec } from './types.ts';

export type { NodeUsage };

export function emptyUsage(): NodeUsage {
  return { cpuMillis: 0, memoryBytes: 0, tasks: 0, ports: new Set(), perService: new Map() };
}

export function addDemand(usage: NodeUsage, d: TaskDemand): void {
  usage.cpuMillis += d.cpuMillis;
  usage.memoryBytes += d.memoryBytes;
  usage.tasks += 1;
  for (const p of d.ports) usage.ports.add(p);
  usage.perService.set(d.service, (usage.perService.get(d.service) ?? 0) + 1);
}

/** Usage per node id, for every node in `nodes`; tasks on nodes not listed, and tasks in `skip`, are left out. */
export function usageByNode(nodes: readonly NodeRecord[], tasks: readonly TaskWithSpec[], skip: ReadonlySet<string>): Map<string, NodeUsage> {
  const usage = new Map<string, NodeUsage>();
  for (const n of nodes) {
    assert(!usage.has(n.id), `node ${n.id} is listed twice`);
    usage.set(n.id, emptyUsage());
  }
  const seen = new Set<string>();
  for (const { task, spec } of tasks) {
    assert(!seen.has(task.id), `task ${task.id} is listed twice`);
    seen.add(task.id);
    if (task.desired !== 'running' || task.nodeId === null || skip.has(task.id)) continue;
    const u = usage.get(task.nodeId);
    if (u !== undefined) addDemand(u, demandOf(spec));
  }
  return usage;
}
