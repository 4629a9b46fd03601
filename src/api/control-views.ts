// How the control plane's routes read the store and what they answer: the control state (every
// node, service, task and agent report, each with its revision) after a read barrier, and the
// views built from it: a service with its status (desired and running tasks, converged or not),
// a task with its merged observed state (task-view.ts) and its node's name, a node with what
// runs on it.

import type { DocumentStore } from '../../fsm/index.ts';
import type { ForcedDisruption, NodeRecord, ObservedTaskState, ServiceRecord, TaskRecord, TaskStatus } from '../resources/records.ts';
import { assessBudget, type UnavailableSlot } from '../control/disruption-budget.ts';
import { reconcileService } from '../control/orchestrator.ts';
import { specForTask } from '../resources/records.ts';
import { eligibleNodes } from '../control/scheduler/eligible-nodes.ts';
import { usageByNode } from '../control/scheduler/usage.ts';
import type { TaskWithSpec } from '../control/scheduler/types.ts';
import { ControlStateReader, tasksOf, type ControlState, type Versioned } from '../resources/state.ts';
import { isTerminal, viewOf, type TaskView } from '../resources/task-view.ts';
import { ShoalError } from '../errors.ts';
import { stackOfSource } from '../resources/stacks.ts';
import type { ApiContext } from './context.ts';
import { readBarrier } from './docs-routes.ts';
import { compareText } from '../base/order.ts';

const readers = new WeakMap<DocumentStore, ControlStateReader>();

/** One reader per store: it caches parsed records by revision across requests. */
function readerOf(ctx: ApiContext): ControlStateReader {
  let r = readers.get(ctx.store);
  if (r === undefined) {
    r = new ControlStateReader(ctx.store, (m) => ctx.node.log.warn(`${m.collection}/${m.id} (rev ${m.rev}) is not a valid record and is not shown: ${m.problem}`));
    readers.set(ctx.store, r);
  }
  return r;
}

/** The control state after a read barrier (linearizable), or at once (stale). */
export async function readControl(ctx: ApiContext, consistency: 'linearizable' | 'stale'): Promise<ControlState> {
  await readBarrier(ctx, consistency);
  return withVoters(ctx, readerOf(ctx).read());
}

/** The control state of this node's store as it is now (after a write applied here). */
export function readLocal(ctx: ApiContext): ControlState {
  return withVoters(ctx, readerOf(ctx).read());
}

/** The state with this node's view of the raft voters (for node.role constraints; scheduler/roles.ts). */
function withVoters(ctx: ApiContext, state: ControlState): ControlState {
  const cs = ctx.node.confState();
  return { ...state, voters: new Set([...cs.voters, ...cs.votersOutgoing]) };
}

const updateInProgress: ReadonlySet<string> = new Set(['updating', 'rolling-back']);

export interface ServiceStatus {
  /** Tasks the spec asks for: replicas, or the eligible nodes of a global service. */
  desired: number;
  /**
   * Tasks desired running, observed running (and healthy, with a health check), of the current
   * spec version, on a ready node. A task on a suspect or down node counts in `unreachable`.
   */
  running: number;
  /** Tasks desired running, observed running and healthy, on a ready node, whatever their spec version (old ones serve during an update). */
  serving: number;
  /** Tasks desired running, last reported running, whose node is suspect or down: nobody knows whether they still serve. */
  unreachable: number;
  /** Tasks desired running, whatever their state. */
  tasks: number;
  /** Tasks waiting for a node, and why (distinct reasons). */
  pending: number;
  pendingReasons: string[];
  /** Tasks shut down on purpose that have not stopped yet. */
  stopping: number;
  /** A rolling update or rollback is replacing tasks. */
  updating: boolean;
  /** running = tasks = desired, none stopping, and no update in progress. */
  converged: boolean;
  /** The disruption budget now (docs/control-plane.md, "The disruption budget"). */
  disruption: DisruptionStatus;
}

export interface DisruptionStatus {
  /** The budget as people read it: `maxUnavailable 1`, `maxUnavailable 25% (1 of 4 slots)`. */
  limit: string;
  /** The budget in slots. */
  maxUnavailable: number;
  /** The wanted slots that serve nothing now, and why. */
  unavailable: UnavailableSlot[];
  /** How many more slots a voluntary action may take down now. */
  allowed: number;
  /** What the budget holds back and why (the leader's own decision, computed the same way); null when nothing waits. */
  waiting: string | null;
  /** Voluntary disruptions forced past the budget that are not over yet. */
  forced: ForcedDisruption[];
}

export interface ServiceView {
  name: string;
  /** The service record's revision: an apply's `expectRevs` compares it. */
  rev: number;
  record: ServiceRecord;
  status: ServiceStatus;
  /** The stack that deployed it (its record's source, `stack:NAME`), or null. */
  stack: string | null;
}

export interface TaskItem {
  id: string;
  rev: number;
  service: string;
  slot: number | string;
  nodeId: string | null;
  /** The node's name, or null while pending or when the node is no longer known. */
  nodeName: string | null;
  desired: TaskRecord['desired'];
  /** The state that counts: the agent's report merged with the leader's record (task-view.ts). */
  observed: ObservedTaskState;
  health: TaskStatus['health'];
  record: TaskRecord;
  /** The agent's latest report, if it is of the task's node and epoch. */
  report: TaskStatus | null;
}

export interface NodeView {
  id: string;
  name: string;
  rev: number;
  record: NodeRecord;
  /** Tasks desired running on it, and of those the ones observed running. */
  tasks: number;
  running: number;
  /** What the scheduler counts as taken on it (the reservations of its tasks). */
  reserved: { cpuMillis: number; memoryBytes: number };
}

/**
 * The service's budget now. What waits is what the orchestrator, deciding now on this state, would
 * hold back (a pure pass of it, nothing written); `now` is the leader's log time, which the
 * update's pacing reads. Without it, nothing is said to wait.
 */
export function disruptionStatus(state: ControlState, svc: ServiceRecord, now?: number): DisruptionStatus {
  const a = assessBudget(state, svc);
  const waiting = now === undefined ? null : reconcileService(state, svc.name, { now, newTaskId: () => 'preview' }).budgetWait ?? null;
  return { limit: a.limit, maxUnavailable: a.maxUnavailable, unavailable: a.unavailable, allowed: a.allowed, waiting, forced: svc.forcedDisruptions };
}

export function serviceStatus(state: ControlState, svc: ServiceRecord, now?: number): ServiceStatus {
  const views = tasksOf(state, svc.name).map((t) => viewOf(state, t));
  const alive = views.filter((v) => v.record.desired === 'running');
  const desired = svc.spec.mode === 'global'
    ? eligibleNodes(svc.spec, [...state.nodes.values()].map((n) => n.value), state.voters).length
    : svc.spec.replicas ?? 0;
  const reachable = (v: TaskView): boolean => v.node?.state === 'ready';
  const serving = alive.filter((v) => v.healthy && reachable(v));
  const running = serving.filter((v) => v.record.specVersion === svc.specVersion).length;
  const unreachable = alive.filter((v) => v.observed === 'running' && !reachable(v)).length;
  const pendingViews = alive.filter((v) => v.observed === 'pending');
  const stopping = views.filter((v) => v.record.desired === 'shutdown' && v.record.nodeId !== null && !isTerminal(v)).length;
  const updating = updateInProgress.has(svc.updateStatus.state);
  return {
    desired, running, serving: serving.length, unreachable, tasks: alive.length, pending: pendingViews.length,
    pendingReasons: [...new Set(pendingViews.flatMap((v) => (v.record.pendingReason === null ? [] : [v.record.pendingReason])))],
    stopping, updating, converged: !updating && running === desired && alive.length === desired && stopping === 0,
    disruption: disruptionStatus(state, svc, now),
  };
}

export function serviceView(state: ControlState, s: Versioned<ServiceRecord>, now?: number): ServiceView {
  return { name: s.value.name, rev: s.rev, record: s.value, status: serviceStatus(state, s.value, now), stack: stackOfSource(s.value.source) };
}

export function taskItem(state: ControlState, t: Versioned<TaskRecord>): TaskItem {
  return itemOf(viewOf(state, t), state);
}

function itemOf(v: TaskView, state: ControlState): TaskItem {
  const r = v.record;
  const nodeName = r.nodeId === null ? null : state.nodes.get(r.nodeId)?.value.name ?? null;
  return {
    id: r.id, rev: v.rev, service: r.service, slot: r.slot, nodeId: r.nodeId, nodeName, desired: r.desired, observed: v.observed,
    health: v.status?.health ?? null, record: r, report: v.status ?? null,
  };
}

/** Every node's view, sorted by name. */
export function nodeViews(state: ControlState): NodeView[] {
  const nodes = [...state.nodes.values()];
  const withSpec: TaskWithSpec[] = [];
  for (const t of state.tasks.values()) {
    const svc = state.services.get(t.value.service)?.value;
    const spec = svc === undefined ? null : specForTask(svc, t.value);
    if (spec !== null) withSpec.push({ task: t.value, spec });
  }
  const usage = usageByNode(nodes.map((n) => n.value), withSpec, new Set());
  const running = new Map<string, number>();
  for (const t of state.tasks.values()) {
    if (t.value.nodeId === null || t.value.desired !== 'running') continue;
    if (viewOf(state, t).observed === 'running') running.set(t.value.nodeId, (running.get(t.value.nodeId) ?? 0) + 1);
  }
  return nodes.map((n): NodeView => {
    const u = usage.get(n.value.id);
    return {
      id: n.value.id, name: n.value.name, rev: n.rev, record: n.value, tasks: [...state.tasks.values()].filter((t) => t.value.nodeId === n.value.id && t.value.desired === 'running').length,
      running: running.get(n.value.id) ?? 0, reserved: { cpuMillis: u?.cpuMillis ?? 0, memoryBytes: u?.memoryBytes ?? 0 },
    };
  }).sort((a, b) => compareText(a.name, b.name) || compareText(a.id, b.id));
}

export function findService(state: ControlState, name: string): Versioned<ServiceRecord> {
  const s = state.services.get(name);
  if (s === undefined) throw new ShoalError('not_found', `no service named '${name}'; list them with: shoal service ls`, { service: name });
  return s;
}

/** The node a user means by `ref`: the node with that id, else the one node with that name. */
export function findNode(state: ControlState, ref: string): Versioned<NodeRecord> {
  const byId = state.nodes.get(ref);
  if (byId !== undefined) return byId;
  const named = [...state.nodes.values()].filter((n) => n.value.name === ref);
  if (named.length === 1 && named[0] !== undefined) return named[0];
  if (named.length > 1) {
    throw new ShoalError('ambiguous_name', `${named.length} nodes are named '${ref}'; use the id`, { name: ref, candidates: named.map((n) => ({ id: n.value.id, name: n.value.name })) });
  }
  throw new ShoalError('not_found', `no node named '${ref}' or with that id; list them with: shoal node ls`, { node: ref });
}
