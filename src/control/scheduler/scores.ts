// Ranking: among the nodes that passed every filter, which one takes the task. Each strategy
// gives a node a rank, a tuple compared element by element (smaller is better); equal ranks
// go to the node with the smallest id, so the choice never depends on input order.
//
// spread:  [tasks of the service in the node's spreadOver group (0 without spreadOver),
//           tasks of the service on the node,
//           the node's load after placing (reserved CPU share + reserved memory share),
//           tasks of every service on the node]
// binpack: [minus the load after placing, minus the tasks on the node]  (fullest first)
//
// The load and task-count terms under spread keep one-replica services from all landing on
// the node with the smallest id; under binpack they fill a node before starting the next.

import type { NodeRecord } from '../../resources/records.ts';
import type { NodeUsage } from './usage.ts';
import type { NodeSlot, TaskDemand } from './types.ts';

export type Rank = readonly number[];

/** The node's share of reserved CPU plus reserved memory once the task is on it (0..2, more if overcommitted). */
export function loadAfter(node: NodeRecord, usage: NodeUsage, demand: TaskDemand): number {
  return share(usage.cpuMillis + demand.cpuMillis, node.capacity.cpuMillis) + share(usage.memoryBytes + demand.memoryBytes, node.capacity.memoryBytes);
}

function share(used: number, capacity: number): number {
  if (capacity > 0) return used / capacity;
  return used > 0 ? 1 : 0;
}

const noGroups: ReadonlyMap<string, number> = new Map();

/** Tasks of the service per value of the spread label, over all nodes (a node without the label counts under ''). */
export function spreadGroups(all: readonly NodeSlot[], demand: TaskDemand): ReadonlyMap<string, number> {
  if (demand.spreadOver === null) return noGroups;
  const groups = new Map<string, number>();
  for (const { node, usage } of all) {
    const value = groupOf(node, demand.spreadOver);
    groups.set(value, (groups.get(value) ?? 0) + (usage.perService.get(demand.service) ?? 0));
  }
  return groups;
}

/** The node's group under a spread label: its value, or '' without one (nodes without the label form one group). */
export function groupOf(node: NodeRecord, label: string): string {
  const v = node.labels[label];
  return v === undefined ? '' : `=${v}`;
}

export function spreadRank(node: NodeRecord, usage: NodeUsage, demand: TaskDemand, groups: ReadonlyMap<string, number>): Rank {
  const group = demand.spreadOver === null ? 0 : (groups.get(groupOf(node, demand.spreadOver)) ?? 0);
  return [group, usage.perService.get(demand.service) ?? 0, loadAfter(node, usage, demand), usage.tasks];
}

export function binpackRank(node: NodeRecord, usage: NodeUsage, demand: TaskDemand): Rank {
  return [-loadAfter(node, usage, demand), -usage.tasks];
}

export function rankOf(node: NodeRecord, usage: NodeUsage, demand: TaskDemand, groups: ReadonlyMap<string, number>): Rank {
  return demand.strategy === 'spread' ? spreadRank(node, usage, demand, groups) : binpackRank(node, usage, demand);
}

/** Negative when `a` ranks better (comes first). */
export function compareRanks(a: Rank, b: Rank): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
