// The agent's reconcile as a pure function: the tasks the store assigns to this node and the
// containers the runtime shows with this node's labels, in; the actions that converge them and
// the reports to write, out. No I/O, no clock (time is an input), so it is tested with tables
// and the same inputs always give the same plan.
//
// Quorum. Actions that act on what the store *does not* say, or that start something, are
// gated: creating or starting a task's container, and stopping and removing any container.
// After a restart of shoal the applied store can lag what the node already did (a container
// created for a task the store has not applied yet), and a node cut off from the leader may have
// been declared down and its tasks replaced elsewhere. So a gated action is planned only when
// `quorum` is 'yes' (the caller's read barrier succeeded in this pass, so the store is caught up
// with the leader's commit); with 'unknown' the plan asks for a barrier instead; with 'no'
// nothing gated happens, running containers keep running, and the restart policy of tasks
// already on the node applies locally.
//
// Exclusive services (docs/control-plane.md, "Exclusive services") run only under the node's
// lease: their containers are created and started only while `leaseCovered` (the lease of the
// node's current epoch holds), `leaseWanted` asks the agent to keep renewing it while any of
// them is wanted, and an exited one is never restarted locally: the exit's report may reach the
// leader after a restart, and the leader replaces a failed task at once. Killing a container the
// lease no longer covers is the agent's, outside the plan (it must not wait for a pass).

import { registryHostFor } from '../resources/registry-logins.ts';
import { specForTask, type NodeRecord, type ServiceRecord, type TaskRecord, type TaskStatus } from '../resources/records.ts';
import type { RestartPolicy, SecretRefSpec } from '../resources/spec/service-spec.ts';
import { buildContainerSpec, isExclusiveContainer, readLabels, type ContainerLabels, type Owner } from './labels.ts';
import { decideLocalRestart, type LocalRestarts } from './restart-backoff.ts';
import type { ContainerInfo, ContainerSpec } from './runtime.ts';
import {
  exitedStatus, exitMessage, failedStartStatus, goneStatus, isExitedState, isRunningState, isTerminal, observedStatus, sameStatus,
  type ReportBase,
} from './task-report.ts';

/** One task assigned to this node, as the applied store holds it. */
export interface AgentAssignment {
  task: TaskRecord;
  /** The task's service; null when the store no longer has it. */
  service: ServiceRecord | null;
  /** The agent's last report on the task that the store applied; null if none. */
  status: TaskStatus | null;
  /** Its replacement's image is pulled on another node, where the replacement goes (image-pulls.ts): not here before the stop. */
  pullElsewhere?: boolean;
}

export type Quorum = 'unknown' | 'yes' | 'no';

export interface PlanInput {
  owner: Owner;
  /** This node's record; null before the node is registered (then nothing is planned). */
  node: NodeRecord | null;
  assignments: AgentAssignment[];
  /** What the runtime lists with this node's owner labels. */
  containers: ContainerInfo[];
  quorum: Quorum;
  /** Work keys with an operation in flight: left alone (their state is changing). */
  busyKeys: ReadonlySet<string>;
  /** The newest report this agent made of each task (written or not): newer than the store's copy. */
  latestReports: ReadonlyMap<string, TaskStatus>;
  /** Tasks whose start failed in this agent's life: never tried again (the leader replaces them). */
  failedStarts: ReadonlySet<string>;
  /** Containers whose failure the writer acknowledged: their fate is the leader's now. */
  /** Exits already reported as failures: container id → the reported exit's finish time. */
  failureReported: ReadonlyMap<string, number | null>;
  restarts: ReadonlyMap<string, LocalRestarts>;
  /** Monotonic ms, for the restart backoff. */
  nowMs: number;
  /** The stop signal and grace period of a container whose spec is unknown. */
  defaultStop: StopOptions;
  /** The node's lease holds now for its current epoch (exclusive tasks may start). */
  leaseCovered: boolean;
}

export interface StopOptions {
  signal: string;
  graceMs: number;
}

export type PlanAction =
  /** Pull if absent, write the task's secret files, create and start a container for the task. */
  | {
    type: 'create'; key: string; base: ReportBase; spec: ContainerSpec; secrets: SecretRefSpec[];
    /** The registry whose login the image is pulled with (the spec's registryLogin, else the image's registry). */
    pullsWith: string;
  }
  /** Start a container created but never started (shoal stopped between create and start). */
  | { type: 'start'; key: string; base: ReportBase; containerId: string }
  /** Restart an exited container of the task under its restart policy (no quorum only). */
  | { type: 'restart'; key: string; base: ReportBase; containerId: string; restarts: LocalRestarts }
  /** Stop (signal, grace period) and remove; then report the task shut down when `shutdownOf` is set. */
  | {
    type: 'remove'; key: string; containerId: string; name: string; reason: string; stop: StopOptions; shutdownOf: ReportBase | null;
    /** The image of the spec that replaces the task's (a rolling update), pulled before the stop so the slot is not down for the download, and the registry whose login pulls it. */
    prePull?: { image: string; pullsWith: string };
  };

export interface Plan {
  actions: PlanAction[];
  /** New observations to report (already compared with the store's copy). */
  reports: TaskStatus[];
  /** Gated work exists and `quorum` was 'unknown': take a read barrier and plan again. */
  needsBarrier: boolean;
  /** Restart backoffs started: record them. */
  restartUpdates: [string, LocalRestarts][];
  /** When a restart backoff ends: plan again then. Null when none is waiting. */
  wakeAtMs: number | null;
  /** An exclusive task of the node's current epoch is wanted running: keep its lease renewed. */
  leaseWanted: boolean;
}

interface Parsed {
  c: ContainerInfo;
  labels: ContainerLabels;
}

/** The work key of a container whose labels do not parse: it has no task. */
export function containerKey(containerId: string): string {
  return `container:${containerId}`;
}

export function planReconcile(input: PlanInput): Plan {
  const plan: Plan = { actions: [], reports: [], needsBarrier: false, restartUpdates: [], wakeAtMs: null, leaseWanted: false };
  const node = input.node;
  if (node === null) return plan;
  const ctx = new Planner(input, node, plan);
  ctx.planUnreadable();
  ctx.planContainers();
  ctx.planTasksWithoutContainer();
  return plan;
}

class Planner {
  private readonly epoch: number;
  private readonly tasks = new Map<string, AgentAssignment>();
  private readonly byTask = new Map<string, Parsed[]>();
  private readonly unreadable: { c: ContainerInfo; problems: string[] }[] = [];
  /** Containers of an older epoch are still on the node: nothing new starts until they are gone. */
  private readonly staleLeft: boolean;

  constructor(private readonly input: PlanInput, node: NodeRecord, private readonly plan: Plan) {
    this.epoch = node.epoch;
    for (const a of input.assignments) if (a.task.nodeId === input.owner.nodeId) this.tasks.set(a.task.id, a);
    let stale = false;
    for (const c of input.containers) {
      // The runtime filtered by owner labels; check again, since a container that is not
      // certainly ours is never touched.
      if (c.labels['io.shoal.cluster'] !== input.owner.clusterId || c.labels['io.shoal.node'] !== input.owner.nodeId) continue;
      const r = readLabels(c.labels);
      if (!r.ok) {
        this.unreadable.push({ c, problems: r.problems });
        continue;
      }
      if (r.labels.clusterId !== input.owner.clusterId || r.labels.nodeId !== input.owner.nodeId) continue;
      if (r.labels.nodeEpoch < this.epoch) stale = true;
      const list = this.byTask.get(r.labels.taskId) ?? [];
      list.push({ c, labels: r.labels });
      this.byTask.set(r.labels.taskId, list);
    }
    this.staleLeft = stale;
  }

  planUnreadable(): void {
    for (const { c, problems } of this.unreadable) {
      const key = containerKey(c.id);
      if (this.input.busyKeys.has(key)) continue;
      this.gated({
        type: 'remove', key, containerId: c.id, name: c.name, reason: `its labels do not parse (${problems.join('; ')})`,
        stop: this.input.defaultStop, shutdownOf: null,
      });
    }
  }

  planContainers(): void {
    for (const [taskId, list] of this.byTask) {
      if (this.input.busyKeys.has(taskId)) continue;
      const a = this.tasks.get(taskId);
      const [keep, ...extras] = [...list].sort(keeperOrder);
      for (const x of extras) this.remove(taskId, x, a, 'another container of the same task is kept', null);
      if (keep === undefined) continue;
      const reason = this.removalReason(a, keep.labels);
      if (reason !== null) this.remove(taskId, keep, a, reason, this.shutdownReportOf(a, keep.labels));
      else if (a !== undefined && keep.labels.nodeEpoch === this.epoch) this.planCurrent(a, keep.c);
      // A container of an epoch newer than the node record's: the store lags; leave it.
    }
  }

  planTasksWithoutContainer(): void {
    for (const a of this.tasks.values()) {
      const t = a.task;
      if (this.byTask.has(t.id) || this.input.busyKeys.has(t.id) || t.nodeEpoch !== this.epoch) continue;
      const base = this.base(t);
      const last = this.reported(a);
      if (t.desired === 'shutdown') {
        // Shut down with no container here: finished, even if this agent never acted on it (it
        // lagged, was cut off, its runtime was down). Unreported, the leader would count it as
        // still stopping and a stop-first slot would wait for it forever (the control-plane
        // simulator's seed 30).
        if (!isTerminal(last)) this.report(a, goneStatus(base, 'shutdown', last?.containerId ?? null, null));
        continue;
      }
      if (isTerminal(last) || this.input.failedStarts.has(t.id)) continue;
      if (last?.containerId != null) {
        // Its container existed and is gone (removed outside shoal): a task has one container, ever.
        this.report(a, goneStatus(base, 'failed', last.containerId, `container ${last.containerId} was removed outside shoal`));
        continue;
      }
      const spec = a.service === null ? null : specForTask(a.service, t);
      if (spec === null) {
        const why = a.service === null ? `service ${t.service} is not in the store` : `spec version ${t.specVersion} of service ${t.service} is not in the store`;
        this.report(a, failedStartStatus(base, null, why));
        continue;
      }
      if (this.staleLeft || !this.leaseAllows(spec.exclusive)) continue;
      this.gated({ type: 'create', key: t.id, base, spec: buildContainerSpec(spec, t, this.input.owner), secrets: spec.secrets, pullsWith: registryHostFor(spec) });
    }
  }

  /** A container of a task wanted running in the node's current epoch. */
  private planCurrent(a: AgentAssignment, c: ContainerInfo): void {
    const base = this.base(a.task);
    const spec = a.service === null ? null : specForTask(a.service, a.task);
    const exclusive = spec?.exclusive === true || isExclusiveContainer(c.labels);
    if (exclusive && (isRunningState(c) || c.state === 'created')) this.plan.leaseWanted = true;
    if (isRunningState(c)) {
      const s = observedStatus(base, c, spec !== null ? spec.healthCheck !== null : c.health !== null);
      if (s !== null) this.report(a, s);
      return;
    }
    if (c.state === 'created') {
      if (isTerminal(this.reported(a)) || this.input.failedStarts.has(a.task.id) || this.staleLeft || !this.leaseAllows(exclusive)) return;
      this.gated({ type: 'start', key: a.task.id, base, containerId: c.id });
      return;
    }
    if (!isExitedState(c)) return;
    // This exit, not an earlier one of the same container (restarted by the agent without a
    // quorum, it exits again later: the control-plane simulator's seed 540).
    const known = (this.input.failureReported.has(c.id) && this.input.failureReported.get(c.id) === c.finishedAt)
      || (a.status?.state === 'failed' && a.status.containerId === c.id && a.status.finishedAt === c.finishedAt);
    if (known) return;
    if (this.input.quorum === 'unknown') this.plan.needsBarrier = true;
    else if (this.input.quorum === 'yes' || spec === null || exclusive) this.report(a, exitedStatus(base, c, 'failed', exitMessage(c)));
    else this.planLocalRestart(a, c, base, spec.restart);
  }

  private planLocalRestart(a: AgentAssignment, c: ContainerInfo, base: ReportBase, policy: RestartPolicy): void {
    const d = decideLocalRestart(policy, a.task.attempt, c.exitCode, this.input.restarts.get(a.task.id), this.input.nowMs);
    if (d.kind === 'restart') {
      this.plan.actions.push({ type: 'restart', key: a.task.id, base, containerId: c.id, restarts: d.state });
    } else if (d.kind === 'wait') {
      this.plan.restartUpdates.push([a.task.id, d.state]);
      this.plan.wakeAtMs = this.plan.wakeAtMs === null ? d.untilMs : Math.min(this.plan.wakeAtMs, d.untilMs);
    }
    // Reported either way: queued while there is no quorum, superseded by `running` after a restart.
    this.report(a, exitedStatus(base, c, 'failed', exitMessage(c)));
  }

  private removalReason(a: AgentAssignment | undefined, l: ContainerLabels): string | null {
    if (a === undefined) return 'no task assigned to this node claims it';
    if (l.nodeEpoch < this.epoch) return `it was placed in epoch ${l.nodeEpoch} and the node is in epoch ${this.epoch}`;
    if (a.task.nodeEpoch === null || a.task.nodeEpoch < this.epoch) return `its task was assigned in epoch ${String(a.task.nodeEpoch)} and the node is in epoch ${this.epoch}`;
    if (a.task.desired === 'shutdown') return 'its task is shut down';
    return null;
  }

  /** Report `shutdown` after removing the container of a task shut down in this epoch, unless its end is already reported. */
  private shutdownReportOf(a: AgentAssignment | undefined, l: ContainerLabels): ReportBase | null {
    if (a === undefined || a.task.desired !== 'shutdown' || a.task.nodeEpoch !== this.epoch || l.nodeEpoch !== this.epoch) return null;
    return isTerminal(this.reported(a)) ? null : this.base(a.task);
  }

  private remove(key: string, p: Parsed, a: AgentAssignment | undefined, reason: string, shutdownOf: ReportBase | null): void {
    const spec = a?.service == null ? null : specForTask(a.service, a.task);
    const stop = spec === null ? this.input.defaultStop : { signal: spec.stopSignal, graceMs: spec.stopGracePeriodMs };
    // A task shut down for an update to another image: its replacement's image is pulled first.
    const current = a?.service?.spec;
    const prePull = a?.task.desired === 'shutdown' && a.pullElsewhere !== true && current !== undefined && spec !== null && a.service?.specVersion !== a.task.specVersion && current.image !== spec.image
      ? { image: current.image, pullsWith: registryHostFor(current) } : null;
    this.gated({ type: 'remove', key, containerId: p.c.id, name: p.c.name, reason, stop, shutdownOf, ...(prePull !== null ? { prePull } : {}) });
  }

  /** An exclusive task starts only under a lease that holds; asking for one when it does not. */
  private leaseAllows(exclusive: boolean): boolean {
    if (!exclusive) return true;
    this.plan.leaseWanted = true;
    return this.input.leaseCovered;
  }

  private gated(action: PlanAction): void {
    if (this.input.quorum === 'yes') this.plan.actions.push(action);
    else if (this.input.quorum === 'unknown') this.plan.needsBarrier = true;
  }

  private report(a: AgentAssignment, s: TaskStatus): void {
    const last = this.reported(a);
    if (last !== null && sameStatus(last, s)) return;
    this.plan.reports.push(s);
  }

  /** What the agent last said of the task: its newest report, else the store's copy. */
  private reported(a: AgentAssignment): TaskStatus | null {
    return this.input.latestReports.get(a.task.id) ?? a.status;
  }

  private base(t: TaskRecord): ReportBase {
    return { taskId: t.id, nodeId: this.input.owner.nodeId, nodeEpoch: this.epoch };
  }
}

/** Which of a task's containers to keep: a running one, then a created one, then the latest started; ties by id. */
function keeperOrder(x: Parsed, y: Parsed): number {
  const rank = (c: ContainerInfo): number => (isRunningState(c) ? 0 : c.state === 'created' ? 1 : 2);
  return rank(x.c) - rank(y.c) || (y.c.startedAt ?? -1) - (x.c.startedAt ?? -1) || (x.c.id < y.c.id ? -1 : x.c.id > y.c.id ? 1 : 0);
}
