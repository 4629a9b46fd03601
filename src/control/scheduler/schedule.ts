// The scheduler: a pure, deterministic function from (nodes, tasks, pending tasks) to
// placements. No I/O, no clock, no randomness; the same input in any order gives the same
// output. It runs on the leader, and its output is a plan the leader writes with a
// compare-and-set on what it read (design.md, Fencing).
//
// For each pending task, in a fixed order (largest reservations first, so big tasks are not
// left with only fragments; then by service, slot and id):
//   1. candidates: every node; for a global service's task, only the node of its slot;
//   2. filters (filters.ts), in order: ready, active, runtime up, constraints, free CPU and
//      memory, host ports, maxPerNode;
//   3. rank (scores.ts): spread or binpack, ties to the smallest node id;
//   4. place on the best node, and count the task on it for the placements that follow.
// A task that passes no node gets a reason that counts why each node refused it (reasons.ts).
//
// Cost: O(pending × nodes) filter checks and ranks, plus sorting the pending tasks.

import { assert } from '../../raft/assert.ts';
import type { NodeRecord } from '../resources.ts';
import { demandOf } from './demand.ts';
import { feasible, firstRejection } from './filters.ts';
import { explain, type NodeRejection } from './reasons.ts';
import { compareRanks, rankOf, spreadGroups, type Rank } from './scores.ts';
import { addDemand, usageByNode, type NodeUsage } from './usage.ts';
import type { Placement, ScheduleInput, ScheduleResult, TaskDemand, TaskWithSpec, Unplaced } from './types.ts';

interface Pending {
  id: string;
  slot: number | string;
  global: boolean;
  demand: TaskDemand;
}

export function schedule(input: ScheduleInput): ScheduleResult {
  const nodes = [...input.nodes].sort((a, b) => compareIds(a.id, b.id));
  const pending = canonicalPending(input.pending);
  const usage = usageByNode(nodes, input.tasks, new Set(pending.map((p) => p.id)));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const placements: Placement[] = [];
  const unplaced: Unplaced[] = [];
  for (const p of pending) {
    const candidates = p.global ? slotNode(byId, p.slot) : nodes;
    const best = bestNode(candidates, usage, p.demand, nodes);
    if (best !== null) {
      addDemand(usageOf(usage, best.id), p.demand);
      placements.push({ taskId: p.id, nodeId: best.id });
    } else {
      unplaced.push({ taskId: p.id, reason: reasonFor(p, candidates, usage) });
    }
  }
  unplaced.sort((a, b) => compareIds(a.taskId, b.taskId));
  return { placements, unplaced };
}

/** The feasible node of best rank, or null. `all` is every node (spread groups count tasks on all of them). */
export function bestNode(candidates: readonly NodeRecord[], usage: ReadonlyMap<string, NodeUsage>, demand: TaskDemand, all: readonly NodeRecord[]): NodeRecord | null {
  const groups = spreadGroups(all, usage, demand);
  let best: NodeRecord | null = null;
  let bestRank: Rank = [];
  for (const node of candidates) {
    const u = usageOf(usage, node.id);
    if (!feasible(node, u, demand)) continue;
    const rank = rankOf(node, u, demand, groups);
    // Candidates come in id order, so only a strictly better rank replaces: ties keep the smaller id.
    if (best === null || compareRanks(rank, bestRank) < 0) {
      best = node;
      bestRank = rank;
    }
  }
  return best;
}

function reasonFor(p: Pending, candidates: readonly NodeRecord[], usage: ReadonlyMap<string, NodeUsage>): string {
  if (p.global && candidates.length === 0) return `node ${String(p.slot)} of this global task's slot is not in the cluster`;
  const rejections: NodeRejection[] = [];
  for (const node of candidates) {
    const r = firstRejection(node, usageOf(usage, node.id), p.demand);
    assert(r !== null, `node ${node.id} rejected task ${p.id} without a reason`);
    rejections.push({ ...r, nodeName: node.name });
  }
  return explain(rejections);
}

function slotNode(byId: ReadonlyMap<string, NodeRecord>, slot: number | string): NodeRecord[] {
  const n = typeof slot === 'string' ? byId.get(slot) : undefined;
  return n === undefined ? [] : [n];
}

function usageOf(usage: ReadonlyMap<string, NodeUsage>, id: string): NodeUsage {
  const u = usage.get(id);
  assert(u !== undefined, `no usage for node ${id}`);
  return u;
}

/** The pending tasks in the order they are placed: independent of the order they were given in. */
function canonicalPending(list: readonly TaskWithSpec[]): Pending[] {
  const seen = new Set<string>();
  const out = list.map(({ task, spec }): Pending => {
    assert(!seen.has(task.id), `pending task ${task.id} is listed twice`);
    seen.add(task.id);
    assert(task.service === spec.name, `task ${task.id} of ${task.service} comes with the spec of ${spec.name}`);
    return { id: task.id, slot: task.slot, global: spec.mode === 'global', demand: demandOf(spec) };
  });
  return out.sort((a, b) =>
    b.demand.memoryBytes - a.demand.memoryBytes
    || b.demand.cpuMillis - a.demand.cpuMillis
    || compareIds(a.demand.service, b.demand.service)
    || compareSlots(a.slot, b.slot)
    || compareIds(a.id, b.id));
}

/** Numbers before strings, numbers by value, strings by code unit. */
function compareSlots(a: number | string, b: number | string): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  return compareIds(a, b);
}

/** Code-unit order, the same on every machine (localeCompare is not). */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
