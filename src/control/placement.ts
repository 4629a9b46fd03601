// The placement pass: every pending task of every service through the pure scheduler
// (scheduler/), its decisions written as task updates. A placed task records the node, the node's
// epoch and the leader's term; the plan compares the epoch, state and availability of every node
// it placed on, so a placement made on a node that was declared down (or drained) meanwhile
// changes nothing and is decided again.

import type { Compare } from '../../fsm/index.ts';
import { putChange, type Change } from '../resources/changes.ts';
import { nodesCollection, tasksCollection } from '../resources/collections.ts';
import type { NodeRecord, TaskRecord } from '../resources/records.ts';
import { specForTask } from '../resources/records.ts';
import { ownerOf } from '../resources/task-owner.ts';
import { schedule } from './scheduler/schedule.ts';
import type { TaskWithSpec } from './scheduler/types.ts';
import type { ControlState, Versioned } from '../resources/state.ts';
import { isTerminal, viewOf } from '../resources/task-view.ts';
import type { Decision } from './orchestrator.ts';
import { waitingFor, type Dependencies } from './dependencies.ts';
import { eraChanges, volumeNodesFor } from './volume-placement.ts';

/** How many pending tasks one pass places at most (one transaction's worth, a few times over). */
export const placementsPerPassMax = 512;

export function placePending(state: ControlState, term: number, now: number, deps: Dependencies = new Map()): Decision {
  const withSpec = (t: Versioned<TaskRecord>): TaskWithSpec | undefined => {
    const svc = ownerOf(state, t.value);
    const spec = svc === undefined ? null : specForTask(svc, t.value) ?? svc.spec;
    const platforms = spec === null ? undefined : svc?.imagePlatforms?.find((p) => p.image === spec.image)?.platforms;
    if (spec === null) return undefined;
    // Only an unplaced task is held to its replicated volume's holders (issue 41).
    const volume = t.value.nodeId === null ? volumeNodesFor(state, spec) : undefined;
    return { task: t.value, spec, ...(platforms !== undefined ? { platforms } : {}), ...(volume !== undefined ? { volume } : {}) };
  };
  const pending: TaskWithSpec[] = [];
  const placed: TaskWithSpec[] = [];
  // Tasks held back by their stack's depends_on (dependencies.ts): the reason, per task.
  const held: { id: string; reason: string }[] = [];
  const waits = new Map<string, string | null>();
  for (const t of state.tasks.values()) {
    if (t.value.desired !== 'running') continue;
    const ts = withSpec(t);
    if (ts === undefined) continue;
    if (t.value.nodeId === null && t.value.observed === 'pending' && deps.size > 0) {
      if (!waits.has(t.value.service)) waits.set(t.value.service, waitingFor(state, deps, t.value.service));
      const reason = waits.get(t.value.service) ?? null;
      if (reason !== null) {
        held.push({ id: t.value.id, reason });
        continue;
      }
    }
    if (t.value.nodeId === null && t.value.observed === 'pending') pending.push(ts);
    else if (t.value.nodeId !== null && !isTerminal(viewOf(state, t))) placed.push(ts);
  }
  const batch = pending.slice(0, placementsPerPassMax);
  const nodes = [...state.nodes.values()].map((n) => n.value);
  const result = batch.length === 0 ? { placements: [], unplaced: [] } : schedule({ nodes, tasks: placed, pending: batch, ...(state.voters !== undefined ? { voters: state.voters } : {}) });
  result.unplaced.push(...held.map((h) => ({ taskId: h.id, reason: h.reason })));
  if (result.placements.length === 0 && result.unplaced.length === 0) return { plan: { changes: [], compares: [] }, wakeInMs: null };
  const changes: Change[] = [];
  const usedNodes = new Map<string, NodeRecord>();
  const specs = new Map(batch.map((ts) => [ts.task.id, ts.spec]));
  for (const p of result.placements) {
    const t = state.tasks.get(p.taskId);
    const node = state.nodes.get(p.nodeId)?.value;
    if (t === undefined || node === undefined) continue;
    usedNodes.set(node.id, node);
    const spec = specs.get(p.taskId);
    if (spec !== undefined) changes.push(...eraChanges(state, spec, node));
    changes.push(putChange(tasksCollection, p.taskId, {
      ...t.value, nodeId: node.id, nodeEpoch: node.epoch, assignedTerm: term, observed: 'assigned', assignedAt: now, pendingReason: null, updatedAt: now,
    }, t.rev));
  }
  const placements = changes.filter((c) => c.collection === tasksCollection).length;
  for (const u of result.unplaced) {
    const t = state.tasks.get(u.taskId);
    if (t === undefined || t.value.pendingReason === u.reason) continue;
    changes.push(putChange(tasksCollection, u.taskId, { ...t.value, pendingReason: u.reason, updatedAt: now }, t.rev));
  }
  return {
    plan: { changes, compares: [...usedNodes.values()].flatMap(nodeCompares) }, wakeInMs: pending.length > batch.length ? 0 : null,
    placements,
  };
}

/** What a placement on `node` relied on: its epoch, and that it was ready and active. */
function nodeCompares(node: NodeRecord): Compare[] {
  const at = (path: string, value: number | string): Compare => ({ collection: nodesCollection, id: node.id, target: 'value', path, cmp: '=', value });
  return [at('epoch', node.epoch), at('state', node.state), at('availability', node.availability)];
}
