// `shoal service rebalance`: one step of spreading a service's tasks again after nodes came back
// or were added (the leader never moves running tasks back by itself: design.md, node health).
//
// A step shuts down at most one running task, on the node that carries the most tasks of the
// service, and only when the scheduler, asked now, would place its replacement on a node that
// carries fewer (after the move, the source still has at least as many as the target). The
// orchestrator then starts the slot's replacement once the task has stopped, and the scheduler
// places it; so the move obeys every filter (constraints, capacity, ports, availability), and
// a binpack service, which the scheduler packs on purpose, is left as it is. Each step makes
// the per-node counts strictly more even, so repeating steps ends.
//
// A step does nothing while the service is settling (an update in progress, a task being placed,
// started or stopped): the previous move must land first. A move takes its slot down (the
// replacement starts once the task stopped), so it asks the service's disruption budget first
// (src/control/disruption-budget.ts): when the budget allows no more, the step waits (`waiting`,
// naming the budget), unless it is forced. The caller repeats steps until the answer is
// `balanced` (the CLI does, waiting between them).
//
// Pure functions of the control state: the step, and the plan that writes it.

import type { Plan } from '../resources/changes.ts';
import { putChange } from '../resources/changes.ts';
import { servicesCollection, tasksCollection } from '../resources/collections.ts';
import type { NodeRecord, ServiceRecord, TaskRecord } from '../resources/records.ts';
import { specForTask } from '../resources/records.ts';
import { assessBudget, budgetCompares, budgetWaitText, forcedText, withForced, type BudgetAssessment } from '../control/disruption-budget.ts';
import { schedule } from '../control/scheduler/schedule.ts';
import type { TaskWithSpec } from '../control/scheduler/types.ts';
import { tasksOf, type ControlState, type Versioned } from '../resources/state.ts';
import { isTerminal, viewOf } from '../resources/task-view.ts';
import { compareNatural, compareText } from '../base/order.ts';

export interface NodeCount {
  nodeId: string;
  nodeName: string;
  /** Tasks of the service desired running on the node. */
  tasks: number;
}

export interface RebalanceStep {
  /** waiting: a task could move, but the disruption budget allows no slot down now. */
  state: 'moved' | 'balanced' | 'settling' | 'waiting';
  /** Why, for people. */
  reason: string;
  /** The task to shut down, and where the scheduler would place its replacement. */
  move: { task: Versioned<TaskRecord>; from: NodeRecord; to: NodeRecord } | null;
  /** Per node that can run the service (or runs it), before the step; sorted by name. */
  counts: NodeCount[];
  /** The budget as the step found it. */
  budget: BudgetAssessment;
  /** The move goes past the budget because it was forced. */
  forced: boolean;
}

const updateInProgress = new Set(['updating', 'rolling-back']);

/** Why the service is settling, or null when it is still. */
function settlingReason(state: ControlState, svc: ServiceRecord): string | null {
  if (updateInProgress.has(svc.updateStatus.state)) return `an update is in progress (${svc.updateStatus.state})`;
  for (const t of tasksOf(state, svc.name)) {
    const v = viewOf(state, t);
    const r = t.value;
    if (r.desired === 'running' && (v.observed === 'assigned' || v.observed === 'starting')) return `task ${r.id} (slot ${String(r.slot)}) is ${v.observed}`;
    if (r.desired === 'running' && v.observed === 'pending' && r.pendingReason === null) return `task ${r.id} (slot ${String(r.slot)}) is being placed`;
    if (r.desired === 'shutdown' && r.nodeId !== null && !isTerminal(v)) return `task ${r.id} (slot ${String(r.slot)}) is stopping`;
  }
  return null;
}

/** Every task desired running on a node, with the spec it runs (the scheduler's view of what is placed). */
function placedTasks(state: ControlState): TaskWithSpec[] {
  const out: TaskWithSpec[] = [];
  for (const t of state.tasks.values()) {
    if (t.value.desired !== 'running' || t.value.nodeId === null) continue;
    const svc = state.services.get(t.value.service)?.value;
    const spec = svc === undefined ? null : specForTask(svc, t.value) ?? svc.spec;
    if (spec !== null && !isTerminal(viewOf(state, t))) out.push({ task: t.value, spec });
  }
  return out;
}

function countsOf(state: ControlState, placed: readonly TaskWithSpec[], service: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const n of state.nodes.values()) counts.set(n.value.id, 0);
  for (const p of placed) if (p.task.service === service && p.task.nodeId !== null) counts.set(p.task.nodeId, (counts.get(p.task.nodeId) ?? 0) + 1);
  return counts;
}

export function planRebalance(state: ControlState, svc: ServiceRecord, opts: { force?: boolean } = {}): RebalanceStep {
  const placed = placedTasks(state);
  const counts = countsOf(state, placed, svc.name);
  const nodes = [...state.nodes.values()].map((n) => n.value);
  const shown = nodes.map((n) => ({ nodeId: n.id, nodeName: n.name, tasks: counts.get(n.id) ?? 0 })).sort((a, b) => compareText(a.nodeName, b.nodeName) || compareText(a.nodeId, b.nodeId));
  const budget = assessBudget(state, svc);
  const still = (stateName: 'balanced' | 'settling' | 'waiting', reason: string): RebalanceStep => ({ state: stateName, reason, move: null, counts: shown, budget, forced: false });
  if (svc.spec.mode === 'global') return still('balanced', 'a global service runs one task on each eligible node');
  const settling = settlingReason(state, svc);
  if (settling !== null) return still('settling', settling);
  const byNode = new Map(nodes.map((n) => [n.id, n]));
  // The running tasks of the current version, fullest node first; one candidate per node (its tasks are alike).
  const candidates = tasksOf(state, svc.name)
    .filter((t) => t.value.desired === 'running' && t.value.specVersion === svc.specVersion && t.value.nodeId !== null && viewOf(state, t).observed === 'running')
    .sort((a, b) => (counts.get(b.value.nodeId ?? '') ?? 0) - (counts.get(a.value.nodeId ?? '') ?? 0) || compareNames(byNode, a.value, b.value));
  const tried = new Set<string>();
  for (const c of candidates) {
    const from = byNode.get(c.value.nodeId ?? '');
    if (from === undefined || tried.has(from.id)) continue;
    tried.add(from.id);
    const to = whereInstead(nodes, placed, c.value, svc, state.voters);
    if (to === undefined || to.id === from.id) continue;
    const fromAfter = (counts.get(from.id) ?? 0) - 1;
    if ((counts.get(to.id) ?? 0) < fromAfter) {
      const reason = `moving task ${c.value.id} (slot ${String(c.value.slot)}) off ${from.name} (${fromAfter + 1} tasks of ${svc.name}) toward ${to.name} (${counts.get(to.id) ?? 0})`;
      // The task serves its slot (it runs): the move takes one slot down.
      const over = budget.serving.get(String(c.value.slot))?.record.id === c.value.id && budget.allowed <= 0;
      if (over && opts.force !== true) return still('waiting', budgetWaitText(budget, [{ cause: 'rebalance', nodeId: from.id, nodeName: from.name }]));
      return { state: 'moved', reason, move: { task: c, from, to }, counts: shown, budget, forced: over };
    }
  }
  return still('balanced', candidates.length === 0 ? 'no task of the current spec is running' : `no task of ${svc.name} can move to a node that carries fewer of them (the scheduler decides where a task may go)`);
}

function compareNames(byNode: ReadonlyMap<string, NodeRecord>, a: TaskRecord, b: TaskRecord): number {
  const an = byNode.get(a.nodeId ?? '')?.name ?? '';
  const bn = byNode.get(b.nodeId ?? '')?.name ?? '';
  return compareText(an, bn) || compareNatural(String(a.slot), String(b.slot));
}

/** Where the scheduler would place `task` if it were pending now (the other tasks where they are). */
function whereInstead(nodes: readonly NodeRecord[], placed: readonly TaskWithSpec[], task: TaskRecord, svc: ServiceRecord, voters: ReadonlySet<string> | undefined): NodeRecord | undefined {
  const others = placed.filter((p) => p.task.id !== task.id);
  const pending: TaskWithSpec = { task: { ...task, nodeId: null, observed: 'pending' }, spec: specForTask(svc, task) ?? svc.spec };
  const [placement] = schedule({ nodes, tasks: others, pending: [pending], ...(voters !== undefined ? { voters } : {}) }).placements;
  return placement === undefined ? undefined : nodes.find((n) => n.id === placement.nodeId);
}

/**
 * The write of a step that moves: the task shut down, compared on what the budget was counted on
 * (its serving tasks, their reports and nodes, the service), and when it was forced past the
 * budget, the forced disruption on the service record. Null when the step moves nothing.
 */
export function rebalancePlan(state: ControlState, s: Versioned<ServiceRecord>, step: RebalanceStep, now: number, by: string | null): Plan | null {
  if (step.move === null) return null;
  const { task, from } = step.move;
  const stopped = { ...task.value, desired: 'shutdown' as const, message: `rebalance: moved off ${from.name}`, updatedAt: now };
  const changes = [putChange(tasksCollection, task.value.id, stopped, task.rev)];
  if (step.forced) {
    const forced = withForced(s.value, { cause: 'rebalance', nodeId: from.id, specVersion: null, at: now, by, message: forcedText(step.budget, by) });
    changes.push(putChange(servicesCollection, s.value.name, { ...forced, updatedAt: now }, s.rev));
  }
  // The service's revision too (budgetCompares has it): a spec changed meanwhile makes the step decide again.
  return { changes, compares: budgetCompares(state, s.value, step.budget, new Set([task.value.id]), [viewOf(state, task)]) };
}
