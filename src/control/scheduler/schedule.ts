// The scheduler: a pure, deterministic function from (nodes, tasks, pending tasks) to
// placements. No I/O, no clock, no randomness; the same input in any order gives the same
// output. It runs on the leader, and its output is a plan the leader writes with a
// compare-and-set on what it read (design.md, Fencing).
//
// For each pending task, in a fixed order (largest reservations first, so big tasks are not
// left with only fragments; then by service, slot and id):
//   1. candidates: every node; for a global service's task, only the node of its slot;
//   2. filters (filters.ts), in order: ready, active, runtime up, image platform, constraints
//      (node.role from input.voters, roles.ts), a replicated volume's holders, free CPU and
//      memory, host ports, maxPerNode;
//   3. rank (scores.ts): spread or binpack, ties to the smallest node id;
//   4. place on the best node, and count the task on it for the placements that follow.
// A task that passes no node gets a reason that counts why each node refused it (reasons.ts).
//
// Cost: O(pending × nodes) filter checks and ranks, plus sorting the pending tasks; a task
// whose demand already failed since the last placement costs O(1).

import { assert } from '../../base/assert.ts';
import { compareText } from '../../base/order.ts';
import { demandOf, withVolume } from './demand.ts';
import { feasible, firstRejection } from './filters.ts';
import { explain, type NodeRejection } from './reasons.ts';
import { withRoles } from './roles.ts';
import { compareRanks, rankOf, spreadGroups, type Rank } from './scores.ts';
import { addDemand, emptyUsage, usageByNode } from './usage.ts';
import type { NodeSlot, Placement, ScheduleInput, ScheduleResult, TaskDemand, TaskWithSpec, Unplaced } from './types.ts';

interface Pending {
  id: string;
  slot: number | string;
  global: boolean;
  demand: TaskDemand;
}

export function schedule(input: ScheduleInput): ScheduleResult {
  const nodes = [...withRoles(input.nodes, input.voters)].sort((a, b) => compareText(a.id, b.id));
  const pending = canonicalPending(input.pending);
  const usage = usageByNode(nodes, input.tasks, new Set(pending.map((p) => p.id)));
  // Each node with what it carries, in id order; candidates are taken from this list.
  const all: NodeSlot[] = nodes.map((node) => ({ node, usage: usage.get(node.id) ?? emptyUsage() }));
  const byId = new Map(all.map((n) => [n.node.id, n]));
  const placements: Placement[] = [];
  const unplaced: Unplaced[] = [];
  // A replicated task that fitted nowhere leaves every node as it was, so another task of the
  // same demand fits nowhere either until a placement changes some node: remember the failure
  // (and its reason) with the number of placements made when it happened.
  const failed = new Map<TaskDemand, { placements: number; reason: string }>();
  for (const p of pending) {
    const known = p.global ? undefined : failed.get(p.demand);
    if (known !== undefined && known.placements === placements.length) {
      unplaced.push({ taskId: p.id, reason: known.reason });
      continue;
    }
    const candidates = p.global ? slotNode(byId, p.slot) : all;
    const best = bestNode(candidates, p.demand, all);
    if (best !== null) {
      addDemand(best.usage, p.demand);
      placements.push({ taskId: p.id, nodeId: best.node.id });
    } else {
      const reason = reasonFor(p, candidates);
      unplaced.push({ taskId: p.id, reason });
      if (!p.global) failed.set(p.demand, { placements: placements.length, reason });
    }
  }
  unplaced.sort((a, b) => compareText(a.taskId, b.taskId));
  return { placements, unplaced };
}

/** The feasible candidate of best rank, or null. `all` is every node (spread groups count tasks on all of them). */
export function bestNode(candidates: readonly NodeSlot[], demand: TaskDemand, all: readonly NodeSlot[]): NodeSlot | null {
  const groups = spreadGroups(all, demand);
  let best: NodeSlot | null = null;
  let bestRank: Rank = [];
  for (const c of candidates) {
    if (!feasible(c.node, c.usage, demand)) continue;
    const rank = rankOf(c.node, c.usage, demand, groups);
    // Candidates come in id order, so only a strictly better rank replaces: ties keep the smaller id.
    if (best === null || compareRanks(rank, bestRank) < 0) {
      best = c;
      bestRank = rank;
    }
  }
  return best;
}

function reasonFor(p: Pending, candidates: readonly NodeSlot[]): string {
  if (p.global && candidates.length === 0) return `node ${String(p.slot)} of this global task's slot is not in the cluster`;
  const rejections: NodeRejection[] = [];
  for (const { node, usage } of candidates) {
    const r = firstRejection(node, usage, p.demand);
    assert(r !== null, `node ${node.id} rejected task ${p.id} without a reason`);
    rejections.push({ ...r, nodeName: node.name });
  }
  return explain(rejections);
}

function slotNode(byId: ReadonlyMap<string, NodeSlot>, slot: number | string): NodeSlot[] {
  const n = typeof slot === 'string' ? byId.get(slot) : undefined;
  return n === undefined ? [] : [n];
}

/** The pending tasks in the order they are placed: independent of the order they were given in. */
function canonicalPending(list: readonly TaskWithSpec[]): Pending[] {
  const seen = new Set<string>();
  const out = list.map(({ task, spec, platforms, volume }): Pending => {
    assert(!seen.has(task.id), `pending task ${task.id} is listed twice`);
    seen.add(task.id);
    assert(task.service === spec.name, `task ${task.id} of ${task.service} comes with the spec of ${spec.name}`);
    const demand = demandOf(spec, platforms);
    return { id: task.id, slot: task.slot, global: spec.mode === 'global', demand: volume === undefined ? demand : withVolume(demand, volume) };
  });
  return out.sort((a, b) =>
    b.demand.memoryBytes - a.demand.memoryBytes
    || b.demand.cpuMillis - a.demand.cpuMillis
    || compareText(a.demand.service, b.demand.service)
    || compareSlots(a.slot, b.slot)
    || compareText(a.id, b.id));
}

/** Numbers before strings, numbers by value, strings by code unit. */
function compareSlots(a: number | string, b: number | string): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  return compareText(a, b);
}
