// The per-node agent: runs on every node (the leader included) and converges the node's
// containers toward what its applied store assigns to it (design.md, "Control plane").
//
// Level-triggered: a store change, a runtime event, the end of an operation or a slow timer only
// marks the agent dirty; a pass then re-reads the store and lists the runtime, plans with the
// pure planReconcile, and hands each action to the per-task work queue. A pass never replays
// history, so after a restart of shoal it adopts the containers it finds (same ids; a running
// one is never restarted) and converges from there.
//
// Fencing (design.md, "Fencing"): containers carry the node epoch that placed them; anything
// that starts a container or stops and removes one waits for a read barrier (`caughtUp`) in the
// same pass, so it acts on a store caught up with the leader's commit and never without a
// quorum. Reports carry the node's epoch and are dropped when the writer says it was raised.
//
// Exclusive services: their tasks start only under the node's lease (lease-keeper.ts), and a
// running exclusive container the lease no longer covers is SIGKILLed at once, outside the work
// queue (a hung stop of the same task must not delay it): through the runtime, and when the
// runtime does not answer within `killTimeoutMs`, through its process (process-kill.ts).
//
// Ports: `view` (this node's applied store), `writer` (reports, as transactions the lead's store
// code fences by epoch), `caughtUp` (the read barrier), `runtime`, `clock`, `log`, and `lease`.

import type { NodeRecord, RuntimeStatus } from '../resources/records.ts';
import { backoffDelayMs } from '../base/backoff.ts';
import type { LeaseConfig } from '../resources/lease.ts';
import type { BootClock, Clock, Timer } from './clock.ts';
import { isExclusiveContainer, labelKeys, ownerLabels, type Owner } from './labels.ts';
import { LeaseKeeper, type LeaseStore, type LeaseWriter } from './lease-keeper.ts';
import { killContainerProcess } from './process-kill.ts';
import { planReconcile, type AgentAssignment, type Plan, type PlanAction, type PlanInput, type Quorum, type StopOptions } from './plan-reconcile.ts';
import type { LocalRestarts } from './restart-backoff.ts';
import { RuntimeReporter, type RuntimeStatusWriter } from './runtime-reporter.ts';
import { RuntimeError, type ContainerInfo, type Runtime } from './runtime.ts';
import { errorText, StatusReporter, statusReporterDefaults, type StatusReporterLimits, type StatusWriter } from './status-reporter.ts';
import { exitedStatus, failedStartStatus, goneStatus, startingStatus, type ReportBase } from './task-report.ts';
import { callWithTimeout, TaskWorkQueue, type Call } from './work-queue.ts';
import { pullAuthFor, type PullAuth, type RegistryLogins } from './registry-auth.ts';
import { pullProgressText, type PullProgress } from './pull-progress.ts';
import { deliverSecrets, retainSecretFiles, type SecretDelivery } from './secret-delivery.ts';
import type { TaskNetworks } from './task-networks.ts';
import type { TaskVolumes } from './volumes/task-volumes.ts';
import type { Logger } from '../log.ts';
import type { ImagePullRequest } from '../resources/image-pulls.ts';

export type { AgentAssignment } from './plan-reconcile.ts';
export type { NodeRuntimeReport } from './runtime-reporter.ts';
export { isStaleEpoch } from './status-reporter.ts';

/** What this node's applied store says about it. */
export interface NodeAssignments {
  /** The node's own record (its epoch); null before the node is registered. */
  node: NodeRecord | null;
  /** Every task whose nodeId is this node, desired running or shutdown, with its service and the agent's last applied report. */
  tasks: AgentAssignment[];
  /** Pulls the leader asks of this node before it stops a task elsewhere (image-pulls.ts); absent: none. */
  imagePulls?: ImagePullRequest[];
}

/** This node's applied store (never a linearizable read: the agent takes a barrier when it must). */
export interface AgentView {
  assignments(nodeId: string): NodeAssignments;
  /** onChange after store changes that may concern this node; the agent coalesces them. Returns the unsubscribe. */
  subscribe(onChange: () => void): () => void;
}

/**
 * Writes through the log. reportTaskStatus is one transaction comparing the node record's epoch
 * with the reports' (all of one epoch); it rejects with `{code: 'stale_epoch'}` when the epoch
 * was raised, or another error (no_leader, timeout) to be retried.
 */
export interface AgentWriter extends StatusWriter, RuntimeStatusWriter {
  /**
   * Writes the state of a pull the leader asked of this node (image-pulls.ts): a compare-and-set
   * on the request (same task, image and node) and on the node's epoch. Absent: such requests are
   * not answered (the leader's wait then runs out).
   */
  reportImagePull?(update: ImagePullUpdate): Promise<void>;
}

/** What a node says of a pull asked of it. */
export interface ImagePullUpdate {
  taskId: string;
  image: string;
  nodeEpoch: number;
  state: 'pulling' | 'present' | 'failed';
  message: string | null;
}

/** The process's one logger interface (src/log.ts). */
export type AgentLog = Logger;

export interface AgentLimits {
  /** The slow timer: a pass at least this often, whatever happens. */
  resyncIntervalMs: number;
  /** Timeout of every runtime call but pulls and stops (and of list and ping). */
  callTimeoutMs: number;
  /** Given to ensureImage; the call's own timeout is this plus callTimeoutMs. */
  pullTimeoutMs: number;
  /** A stop call's timeout is the grace period plus this. */
  stopMarginMs: number;
  /** How long a read barrier may take before the pass counts it as no quorum. */
  barrierTimeoutMs: number;
  /** Tasks with an operation under way at once. */
  opsConcurrentMax: number;
  /** Ping backoff while the runtime is unavailable. */
  pingBackoffMinMs: number;
  pingBackoffMaxMs: number;
  /** What close() waits for operations in flight. */
  closeDrainMs: number;
  /** How to stop a container whose service is unknown (no task claims it). */
  defaultStop: StopOptions;
  reports: StatusReporterLimits;
}

export const agentDefaults: AgentLimits = {
  resyncIntervalMs: 10_000,
  callTimeoutMs: 30_000,
  pullTimeoutMs: 300_000,
  stopMarginMs: 10_000,
  barrierTimeoutMs: 10_000,
  opsConcurrentMax: 8,
  pingBackoffMinMs: 500,
  pingBackoffMaxMs: 30_000,
  closeDrainMs: 10_000,
  defaultStop: { signal: 'SIGTERM', graceMs: 10_000 },
  reports: statusReporterDefaults,
};

/** The exclusive-task lease (lease-keeper.ts). Without it no exclusive task ever starts here. */
export interface AgentLeaseOptions {
  writer: LeaseWriter;
  config: LeaseConfig;
  boot: BootClock;
  store: LeaseStore;
  /** How long a runtime kill may take before the process is killed directly (default 1 s). */
  killTimeoutMs?: number;
  /** Kills a container's process by pid (default: killContainerProcess). */
  killProcess?: (pid: number, containerId: string) => 'killed' | 'gone';
  /** Expiry checks on the boot clock (default 200 ms). */
  checkEveryMs?: number;
}

export interface AgentOptions {
  owner: Owner;
  view: AgentView;
  writer: AgentWriter;
  /** Resolves once this node has applied what the leader had committed; rejects without a quorum. */
  caughtUp: () => Promise<void>;
  runtime: Runtime;
  clock: Clock;
  log: AgentLog;
  limits?: Partial<Omit<AgentLimits, 'reports'>> & { reports?: Partial<StatusReporterLimits> };
  /** Told of each image the runtime had to pull for a task: the image cleaner removes only those (image-cleaner.ts). */
  onImagePulled?: (image: string) => void;
  lease?: AgentLeaseOptions;
  /** Reads secrets from the store and writes their files (secret-delivery.ts); absent, a task that names a secret fails to start. */
  secrets?: SecretDelivery;
  /** The registry logins in the node's store (registry-auth.ts); absent, every pull goes without credentials. */
  registryLogins?: RegistryLogins;
  /**
   * Addresses and overlay readiness of tasks on networks (task-networks.ts): the container of such
   * a task is created only once every address is allocated and the node's overlay is in place.
   * Absent, its containers are created with no fixed address (the runtime picks).
   */
  networks?: TaskNetworks;
  /**
   * Replicated volumes (issue 41, volumes/task-volumes.ts): a task's replicated volume is made
   * ready for its era (restored, or kept) and bound into the container before it is created; the
   * task waits until the volume's record names this node its writer. Absent, a replicated mount
   * is created as a plain volume of the runtime.
   */
  volumes?: TaskVolumes;
}

export type AgentRuntimeState = RuntimeStatus;

export interface AgentState {
  runtime: AgentRuntimeState;
  runtimeError: string | null;
  /** Tasks with an operation under way (hung calls' included). */
  opsInFlight: number;
  reportsPending: number;
  /** Passes completed since start. */
  passes: number;
  /** The last pass's barrier: 'unknown' when it needed none. */
  lastQuorum: Quorum;
}

/** How often a task waiting for a secret it cannot decrypt yet is tried again. */
export const secretRetryMs = 2_000;
/** The longest a stop waits for the pull of its replacement's image (agent.ts, prePull). */
export const prePullTimeoutMs = 60_000;
/** How often a pull's progress is reported as the starting task's message, at most. */
export const pullProgressIntervalMs = 1_000;

export class Agent {
  private readonly limits: AgentLimits;
  /** The pulls asked of this node, as the last pass read them (image-pulls.ts). */
  private imagePulls: ImagePullRequest[] = [];
  /** Pulls answered (request's task id → image), not run again while the request stays. */
  private readonly imagePullsDone = new Map<string, string>();
  private readonly queue: TaskWorkQueue;
  private readonly reporter: StatusReporter;
  private readonly runtimeReporter: RuntimeReporter;
  private readonly failedStarts = new Set<string>();
  /** Tasks waiting for a secret this node cannot decrypt now (autolocked, no voter answers): when to try again. */
  private readonly secretWaits = new Map<string, number>();
  /** Exits already reported as failures: container id → the exit's finish time (a restarted container exits again later). */
  private readonly failureReported = new Map<string, number | null>();
  private readonly restarts = new Map<string, LocalRestarts>();
  private runtimeState: AgentRuntimeState = 'unknown';
  private runtimeError: string | null = null;
  private pingFailures = 0;
  private pinging = false;
  private pingTimer: Timer | null = null;
  private resyncTimer: Timer | null = null;
  private wake: { atMs: number; timer: Timer } | null = null;
  private unsubView: (() => void) | null = null;
  private unsubNetworks: (() => void) | null = null;
  private unsubEvents: (() => void) | null = null;
  private dirty = false;
  private looping: Promise<void> | null = null;
  private passes = 0;
  private lastQuorum: Quorum = 'unknown';
  private noQuorumLogged = false;
  private started = false;
  private closed = false;
  private closing: Promise<void> | null = null;
  private readonly lease: LeaseKeeper | null;
  /** The last list of the runtime: what a lease's expiry kills without asking a runtime that may hang. */
  private lastContainers: ContainerInfo[] = [];
  private readonly killing = new Set<string>();

  constructor(private readonly opts: AgentOptions) {
    this.limits = { ...agentDefaults, ...opts.limits, reports: { ...agentDefaults.reports, ...opts.limits?.reports } };
    this.queue = new TaskWorkQueue(opts.clock, this.limits.opsConcurrentMax);
    this.reporter = new StatusReporter({
      writer: opts.writer, clock: opts.clock, log: opts.log, limits: this.limits.reports,
      onWritten: (statuses) => {
        for (const s of statuses) if (s.state === 'failed' && s.containerId !== null) this.failureReported.set(s.containerId, s.finishedAt);
      },
    });
    this.runtimeReporter = new RuntimeReporter({
      writer: opts.writer, clock: opts.clock, log: opts.log,
      backoffMinMs: this.limits.reports.backoffMinMs, backoffMaxMs: this.limits.reports.backoffMaxMs,
    });
    const l = opts.lease;
    this.lease = l === undefined ? null : new LeaseKeeper({
      writer: l.writer, config: l.config, clock: opts.clock, boot: l.boot, store: l.store, log: opts.log,
      onExpired: () => {
        this.killUncovered(this.lastContainers, 'the node\'s lease ran out');
        // A container started since the last list is found by a new one.
        this.kick();
      },
      onRenewed: () => this.kick(),
      ...(l.checkEveryMs !== undefined ? { checkEveryMs: l.checkEveryMs } : {}),
    });
  }

  /** Starts watching the store and the runtime. Call once. */
  start(): void {
    if (this.started) throw new Error('assertion: Agent.start called twice');
    this.started = true;
    this.unsubView = this.opts.view.subscribe(() => this.kick());
    this.unsubNetworks = this.opts.networks?.subscribe(() => this.kick()) ?? null;
    this.scheduleResync();
    this.checkRuntime();
  }

  /** Stops the agent; containers are left as they are (the next agent adopts them). Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  state(): AgentState {
    return {
      runtime: this.runtimeState, runtimeError: this.runtimeError, opsInFlight: this.queue.size(),
      reportsPending: this.reporter.pendingCount(), passes: this.passes, lastQuorum: this.lastQuorum,
    };
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    // One last renewal, then renewals stop: what the lease holds runs out on its own (the fence
    // kills at expiry) unless the next agent renews first, as after a restart shorter than the lease.
    const leaseClosed = this.lease?.closeAfterRenewing();
    for (const t of [this.pingTimer, this.resyncTimer, this.wake?.timer]) t?.cancel();
    this.unsubView?.();
    this.unsubNetworks?.();
    this.unsubEvents?.();
    if (this.looping !== null) await this.looping;
    // Every call is time-boxed, but a hung call keeps its task's key busy: wait a bounded time.
    await new Promise<void>((resolve) => {
      const t = this.opts.clock.setTimer(this.limits.closeDrainMs, resolve);
      void this.queue.whenIdle().then(() => {
        t.cancel();
        resolve();
      });
    });
    await leaseClosed;
    await this.reporter.close();
    await this.runtimeReporter.close();
  }

  // ---- the reconcile loop ----

  private kick(): void {
    if (this.closed) return;
    this.dirty = true;
    this.looping ??= this.loop().finally(() => {
      this.looping = null;
      if (this.dirty) this.kick();
    });
  }

  private async loop(): Promise<void> {
    while (this.dirty && !this.closed) {
      this.dirty = false;
      try {
        await this.pass();
      } catch (err) {
        this.opts.log.error(`agent: reconcile pass failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      }
      this.passes++;
    }
  }

  private async pass(): Promise<void> {
    if (this.runtimeState !== 'up') return;
    const first = await this.readInput('unknown');
    if (first === null) return;
    let plan = planReconcile(first);
    this.lastQuorum = 'unknown';
    if (plan.needsBarrier) {
      const quorum = await this.barrier();
      const again = await this.readInput(quorum);
      if (again === null || this.closed) return;
      plan = planReconcile(again);
      this.lastQuorum = quorum;
      // Local restarts count only while the leader cannot hear of failures.
      if (quorum === 'yes') this.restarts.clear();
    }
    if (!this.closed) this.applyPlan(plan);
    if (!this.closed) this.startImagePulls(first.node);
    const node = first.node;
    this.lease?.want(plan.leaseWanted && node !== null ? node.epoch : null);
  }

  /** The store and the runtime as they are now; null when the runtime does not answer. */
  private async readInput(quorum: Quorum): Promise<PlanInput | null> {
    const { owner, runtime, clock } = this.opts;
    // Taken before the list: a create under way now either still holds its key or shows in the list.
    const busyBefore = new Set(this.queue.busyKeys());
    let containers;
    try {
      containers = await callWithTimeout(clock, 'listing containers', this.limits.callTimeoutMs, () => runtime.list(ownerLabels(owner))).result;
    } catch (err) {
      this.onRuntimeTrouble(err);
      return null;
    }
    this.lastContainers = containers;
    this.killUncovered(containers, 'the node holds no lease that covers it');
    await retainSecretFiles(this.opts.secrets, containers, busyBefore, this.opts.log);
    const snap = this.opts.view.assignments(owner.nodeId);
    this.imagePulls = snap.imagePulls ?? [];
    this.runtimeReporter.want({ status: 'up', error: null, kind: runtime.kind }, snap.node?.runtime ?? null);
    const taskIds = new Set(snap.tasks.map((a) => a.task.id));
    const containerIds = new Set(containers.map((c) => c.id));
    this.reporter.retain(taskIds);
    for (const id of this.failedStarts) if (!taskIds.has(id)) this.failedStarts.delete(id);
    for (const id of this.secretWaits.keys()) if (!taskIds.has(id)) this.secretWaits.delete(id);
    for (const id of this.restarts.keys()) if (!taskIds.has(id)) this.restarts.delete(id);
    for (const id of this.failureReported.keys()) if (!containerIds.has(id)) this.failureReported.delete(id);
    return {
      owner, node: snap.node, assignments: snap.tasks, containers, quorum, busyKeys: this.queue.busyKeys(),
      latestReports: this.reporter.latest(), failedStarts: this.failedStarts, failureReported: this.failureReported, restarts: this.restarts,
      nowMs: clock.now(), defaultStop: this.limits.defaultStop, leaseCovered: snap.node !== null && this.lease?.covers(snap.node.epoch) === true,
    };
  }

  // ---- the exclusive-task lease ----

  /** SIGKILLs every running exclusive container whose epoch's lease does not hold now. */
  private killUncovered(containers: readonly ContainerInfo[], why: string): void {
    if (this.closed) return;
    for (const c of containers) {
      if (c.state !== 'running' || !isExclusiveContainer(c.labels)) continue;
      const epoch = Number(c.labels[labelKeys.nodeEpoch]);
      if (Number.isSafeInteger(epoch) && this.lease?.covers(epoch) === true) continue;
      this.fenceKill(c, why);
    }
  }

  private fenceKill(c: ContainerInfo, why: string): void {
    if (this.killing.has(c.id)) return;
    this.killing.add(c.id);
    const { runtime, clock, log } = this.opts;
    log.warn(`agent: killing exclusive container ${c.name} (${c.id}) with SIGKILL: ${why}`);
    const timeoutMs = this.opts.lease?.killTimeoutMs ?? 1_000;
    callWithTimeout(clock, `killing container ${c.id}`, timeoutMs, () => runtime.kill(c.id, 'SIGKILL')).result.catch((err: unknown) => {
      // The runtime answered (gone, or not running any more): only a runtime that does not answer is gone around.
      if (err instanceof RuntimeError && (err.kind === 'not_found' || err.kind === 'failed')) return;
      if (c.pid === undefined) {
        log.error(`agent: the runtime did not kill exclusive container ${c.id} (${errorText(err)}), and its process is unknown`);
        return;
      }
      log.warn(`agent: the runtime did not kill exclusive container ${c.id} (${errorText(err)}); killing its process ${c.pid} directly`);
      try {
        (this.opts.lease?.killProcess ?? killContainerProcess)(c.pid, c.id);
      } catch (e) {
        log.error(`agent: killing process ${c.pid} of container ${c.id} failed: ${errorText(e)}`);
      }
    }).finally(() => {
      this.killing.delete(c.id);
      this.kick();
    });
  }

  private async barrier(): Promise<'yes' | 'no'> {
    try {
      await callWithTimeout(this.opts.clock, 'catching up with the leader', this.limits.barrierTimeoutMs, () => this.opts.caughtUp()).result;
      if (this.noQuorumLogged) this.opts.log.info('agent: caught up with the leader again');
      this.noQuorumLogged = false;
      return 'yes';
    } catch (err) {
      if (!this.noQuorumLogged) {
        this.opts.log.warn(`agent: cannot catch up with the leader (${errorText(err)}): running containers keep running, nothing new starts and nothing is removed until it can`);
      }
      this.noQuorumLogged = true;
      return 'no';
    }
  }

  /**
   * Pulls the leader asked of this node before it stops a task on another node (image-pulls.ts,
   * src/control/image-pull-gate.ts), each under its own key in the work queue: the state goes
   * back through the store, `pulling` with the pull's progress, then `present` or `failed`.
   */
  private startImagePulls(node: NodeRecord | null): void {
    const report = this.opts.writer.reportImagePull;
    if (report === undefined || node === null) return;
    for (const r of this.imagePulls) {
      if (r.nodeId !== this.opts.owner.nodeId || r.nodeEpoch !== node.epoch || r.state === 'present' || r.state === 'failed') continue;
      const key = `image-pull:${r.taskId}`;
      if (!this.queue.hasRoom()) break;
      if (this.queue.isBusy(key) || this.imagePullsDone.get(r.taskId) === r.image) continue;
      this.queue.run(key, (call) => this.imagePullOp(r, call), (thrown) => {
        if (thrown !== undefined) this.opts.log.error(`agent: ${key} failed unexpectedly: ${errorText(thrown)}`);
        this.kick();
      });
    }
    const asked = new Set(this.imagePulls.map((r) => r.taskId));
    for (const id of this.imagePullsDone.keys()) if (!asked.has(id)) this.imagePullsDone.delete(id);
  }

  private async imagePullOp(r: ImagePullRequest, call: Call): Promise<void> {
    const send = (state: ImagePullUpdate['state'], message: string | null): Promise<boolean> => (this.opts.writer.reportImagePull?.({ taskId: r.taskId, image: r.image, nodeEpoch: r.nodeEpoch, state, message }) ?? Promise.resolve())
      .then(() => true, (err: unknown) => {
        this.opts.log.warn(`agent: reporting the pull of ${r.image} (before task ${r.taskId} stops) failed: ${errorText(err)}`);
        return false;
      });
    const pullMs = Math.min(this.limits.pullTimeoutMs, prePullTimeoutMs);
    let outcome: { state: 'present' | 'failed'; message: string | null };
    const pull = await this.pullAuthIfAbsent(r.image, r.pullsWith, r.taskId, call);
    if (!pull.ok) {
      outcome = { state: 'failed', message: pull.message };
    } else {
      let last = -Infinity;
      let sent: Promise<unknown> = Promise.resolve();
      const progress = (p: PullProgress): void => {
        const now = this.opts.clock.now();
        if (now - last < pullProgressIntervalMs) return;
        last = now;
        sent = sent.then(() => send('pulling', pullProgressText(r.image, p)));
      };
      try {
        const ensured = await call(`pulling ${r.image} before task ${r.taskId} stops on another node`, pullMs + this.limits.callTimeoutMs, () => this.opts.runtime.ensureImage(r.image, pullMs, pull.auth, progress));
        if (ensured === 'pulled') {
          this.opts.onImagePulled?.(r.image);
          this.opts.log.info(`agent: pulled ${r.image} for the task that replaces task ${r.taskId} of another node, before that task stops`);
        }
        outcome = { state: 'present', message: null };
      } catch (err) {
        this.opts.log.warn(`agent: pulling ${r.image} before task ${r.taskId} stops on another node failed: ${errorText(err)}`);
        outcome = { state: 'failed', message: errorText(err) };
      }
      await sent;
    }
    // Answered: not pulled again while the request stays (a write that failed is tried by the next pass).
    if (await send(outcome.state, outcome.message)) this.imagePullsDone.set(r.taskId, r.image);
  }

  private applyPlan(plan: Plan): void {
    for (const s of plan.reports) this.reporter.submit(s);
    for (const [id, st] of plan.restartUpdates) this.restarts.set(id, st);
    if (plan.wakeAtMs !== null) this.wakeAt(plan.wakeAtMs);
    // Removals first, so stops are under way before anything new pulls or starts.
    const ordered = [...plan.actions.filter((a) => a.type === 'remove'), ...plan.actions.filter((a) => a.type !== 'remove')];
    for (const a of ordered) {
      // Beyond the bound, the rest waits for the next pass (kicked when an operation ends).
      if (!this.queue.hasRoom()) break;
      if (this.queue.isBusy(a.key)) continue;
      // Waiting for a secret: not before its retry (a timer kicks a pass then).
      if (a.type === 'create' && (this.secretWaits.get(a.base.taskId) ?? 0) > this.opts.clock.now()) continue;
      const action = a.type === 'create' ? this.withNetworks(a) : a;
      // Waiting for its networks: nothing is queued, so nothing kicks a pass until they change.
      if (action === null) continue;
      this.queue.run(a.key, (call) => this.perform(action, call), (thrown) => {
        if (thrown !== undefined) this.opts.log.error(`agent: ${a.type} of ${a.key} failed unexpectedly: ${errorText(thrown)}`);
        this.kick();
      });
    }
  }

  private wakeAt(atMs: number): void {
    if (this.wake !== null && this.wake.atMs <= atMs) return;
    this.wake?.timer.cancel();
    const timer = this.opts.clock.setTimer(atMs - this.opts.clock.now(), () => {
      this.wake = null;
      this.kick();
    });
    this.wake = { atMs, timer };
  }

  private scheduleResync(): void {
    this.resyncTimer = this.opts.clock.setTimer(this.limits.resyncIntervalMs, () => {
      this.runtimeReporter.resync();
      if (this.runtimeState === 'unavailable') this.wantRuntimeReport();
      this.kick();
      this.scheduleResync();
    });
  }

  // ---- operations (one task's, under its key in the work queue) ----

  private perform(a: PlanAction, call: Call): Promise<void> {
    switch (a.type) {
      case 'create': return this.createOp(a, call);
      case 'start': return this.startOp(a.base, a.containerId, call);
      case 'restart': return this.restartOp(a.base, a.containerId, a.restarts, call);
      case 'remove': return this.removeOp(a, call);
    }
  }

  private async createOp(a: Extract<PlanAction, { type: 'create' }>, call: Call): Promise<void> {
    const { runtime } = this.opts;
    const { base, spec: { image } } = a;
    this.reporter.submit(startingStatus(base));
    const secrets = await deliverSecrets(this.opts.secrets, base.taskId, a.secrets, (what, fn) => call(what, this.limits.callTimeoutMs, fn));
    if (!secrets.ok && secrets.wait) return this.waitForSecrets(base, secrets.message);
    this.secretWaits.delete(base.taskId);
    if (!secrets.ok) return this.failStart(base, null, secrets.message);
    let spec = secrets.mounts.length === 0 ? a.spec : { ...a.spec, mounts: [...a.spec.mounts, ...secrets.mounts] };
    const volumes = this.opts.volumes;
    if (volumes !== undefined && spec.mounts.some((m) => m.replicate !== undefined)) {
      const node = { id: base.nodeId, epoch: base.nodeEpoch };
      const ready = await call('preparing replicated volumes', this.limits.pullTimeoutMs, () => volumes.prepare(node, spec.mounts));
      if (!ready.ok && ready.wait) return this.waitForSecrets(base, ready.message);
      if (!ready.ok) return this.failStart(base, null, ready.message);
      spec = { ...spec, mounts: ready.mounts };
    }
    const create = (): Promise<string> => runtime.create(spec);
    const pull = await this.pullAuthIfAbsent(image, a.pullsWith, base.taskId, call);
    if (!pull.ok && pull.wait) return this.waitForSecrets(base, pull.message);
    if (!pull.ok) return this.failStart(base, null, pull.message);
    try {
      const pullMs = this.limits.pullTimeoutMs;
      const ensured = await call(`pulling ${image}`, pullMs + this.limits.callTimeoutMs, () => runtime.ensureImage(image, pullMs, pull.auth, this.pullProgressReporter(base, image)));
      if (ensured === 'pulled') this.opts.onImagePulled?.(image);
    } catch (err) {
      if (err instanceof RuntimeError && err.kind === 'unavailable') return this.onRuntimeTrouble(err);
      return this.failStart(base, null, `image_pull_failed: ${errorText(err)}`);
    }
    let id: string;
    try {
      id = await call('creating the container', this.limits.callTimeoutMs, create);
    } catch (err) {
      // A create that timed out may have happened: the next pass finds it by its labels.
      if (this.isRuntimeTrouble(err)) return this.onRuntimeTrouble(err);
      // Its message starts with the code and says what to do (volume-options.ts).
      if (err instanceof RuntimeError && err.kind === 'volume_options_differ') return this.failStart(base, null, err.message);
      return this.failStart(base, null, `create failed: ${errorText(err)}`);
    }
    await this.startOp(base, id, call);
  }

  /**
   * The create with the task's overlay addresses and DNS server in its spec, or null while it waits for them
   * (reported as `starting` with what it waits for; a change of the networks or the overlay
   * kicks a new pass, which tries again).
   */
  private withNetworks(a: Extract<PlanAction, { type: 'create' }>): Extract<PlanAction, { type: 'create' }> | null {
    const networks = this.opts.networks;
    if (a.spec.networks.length === 0 || networks === undefined) return a;
    const answer = networks.resolve(a.base.taskId, a.spec.networks.map((n) => n.name));
    if (!answer.ready) {
      this.reporter.submit({ ...startingStatus(a.base), message: answer.waiting });
      return null;
    }
    // The node's service resolver first (service names resolve), then the service's own name servers.
    const dns = [...answer.dns, ...a.spec.dns.filter((d) => !answer.dns.includes(d))];
    return { ...a, spec: { ...a.spec, networks: answer.networks, dns } };
  }

  private async startOp(base: ReportBase, containerId: string, call: Call): Promise<void> {
    try {
      await call('starting the container', this.limits.callTimeoutMs, () => this.opts.runtime.start(containerId));
    } catch (err) {
      if (this.isRuntimeTrouble(err)) return this.onRuntimeTrouble(err);
      this.failStart(base, containerId, `start failed: ${errorText(err)}`);
    }
  }

  private async restartOp(base: ReportBase, containerId: string, restarts: LocalRestarts, call: Call): Promise<void> {
    this.restarts.set(base.taskId, restarts);
    try {
      await call('restarting the container', this.limits.callTimeoutMs, () => this.opts.runtime.start(containerId));
      this.opts.log.info(`agent: restarted container ${containerId} of task ${base.taskId} on the node (restart ${restarts.count} without a quorum)`);
    } catch (err) {
      if (this.isRuntimeTrouble(err)) return this.onRuntimeTrouble(err);
      this.opts.log.warn(`agent: restarting container ${containerId} of task ${base.taskId} failed: ${errorText(err)}`);
    }
  }

  private async removeOp(a: Extract<PlanAction, { type: 'remove' }>, call: Call): Promise<void> {
    const { runtime } = this.opts;
    if (a.prePull !== undefined && a.shutdownOf !== null) await this.prePull(a.prePull.image, a.prePull.pullsWith, a.shutdownOf.taskId, call);
    try {
      await call('stopping the container', a.stop.graceMs + this.limits.stopMarginMs, () => runtime.stop(a.containerId, a.stop));
      const info = a.shutdownOf === null ? undefined : await call('inspecting the container', this.limits.callTimeoutMs, () => runtime.inspect(a.containerId));
      await call('removing the container', this.limits.callTimeoutMs, () => runtime.remove(a.containerId));
      this.opts.log.info(`agent: removed container ${a.name} (${a.containerId}): ${a.reason}`);
      if (a.shutdownOf !== null) {
        this.reporter.submit(info === undefined ? goneStatus(a.shutdownOf, 'shutdown', a.containerId, null) : exitedStatus(a.shutdownOf, info, 'shutdown', null));
      }
    } catch (err) {
      if (this.isRuntimeTrouble(err)) return this.onRuntimeTrouble(err);
      this.opts.log.warn(`agent: removing container ${a.name} (${a.containerId}) failed: ${errorText(err)}; trying again later`);
    }
  }

  /**
   * Pulls the image of the spec that replaces a task before the task is stopped (a rolling
   * update, stop-first or not): its replacement, placed here as a rule (the slot's resources are
   * freed here), then starts without a download. Best effort, bounded by prePullTimeoutMs: a pull
   * that fails is logged and the stop goes on (the replacement's own pull reports the failure).
   */
  private async prePull(image: string, pullsWith: string, taskId: string, call: Call): Promise<void> {
    const pull = await this.pullAuthIfAbsent(image, pullsWith, taskId, call);
    const pullMs = Math.min(this.limits.pullTimeoutMs, prePullTimeoutMs);
    try {
      const ensured = await call(`pulling ${image} before the stop`, pullMs + this.limits.callTimeoutMs, () => this.opts.runtime.ensureImage(image, pullMs, pull.ok ? pull.auth : undefined));
      if (ensured === 'pulled') {
        this.opts.onImagePulled?.(image);
        this.opts.log.info(`agent: pulled ${image} before stopping task ${taskId}, which a task of it replaces`);
      }
    } catch (err) {
      this.opts.log.warn(`agent: pulling ${image} before stopping task ${taskId} failed: ${errorText(err)}; stopping it anyway`);
    }
  }

  /**
   * The registry credentials a pull of `image` needs, read only when the image is not on the
   * runtime already: a password is released to a node for a pull it makes, and a node that cannot
   * read it now (autolocked) still starts a task whose image it has. A runtime that cannot say
   * counts as "absent" (ensureImage then meets the same trouble and reports it).
   */
  private async pullAuthIfAbsent(image: string, pullsWith: string, taskId: string, call: Call): Promise<PullAuth> {
    if (this.opts.registryLogins?.login(pullsWith) === undefined) return { ok: true, auth: undefined };
    const present = await call(`inspecting image ${image}`, this.limits.callTimeoutMs, () => this.opts.runtime.imagePresent(image)).catch(() => false);
    return present ? { ok: true, auth: undefined } : pullAuthFor(this.opts.registryLogins, this.opts.secrets, pullsWith, taskId);
  }

  /** Reports a pull's progress as the starting task's message, at most once every pullProgressIntervalMs (and its end). */
  private pullProgressReporter(base: ReportBase, image: string): (p: PullProgress) => void {
    let last = -Infinity;
    return (p) => {
      const now = this.opts.clock.now();
      const done = p.layers > 0 && p.layersDone === p.layers;
      if (!done && now - last < pullProgressIntervalMs) return;
      last = now;
      this.reporter.submit({ ...startingStatus(base), message: pullProgressText(image, p) });
    };
  }

  /** The task stays `starting` with why it waits (a secret, a login, its replicated volume's era), and is tried again after secretRetryMs. */
  private waitForSecrets(base: ReportBase, message: string): void {
    const first = !this.secretWaits.has(base.taskId);
    const at = this.opts.clock.now() + secretRetryMs;
    this.secretWaits.set(base.taskId, at);
    if (first) this.opts.log.warn(`agent: task ${base.taskId} waits: ${message}`);
    this.reporter.submit({ ...startingStatus(base), message });
    this.wakeAt(at);
  }

  private failStart(base: ReportBase, containerId: string | null, message: string): void {
    this.failedStarts.add(base.taskId);
    this.opts.log.warn(`agent: task ${base.taskId} did not start: ${message}`);
    this.reporter.submit(failedStartStatus(base, containerId, message));
  }

  // ---- the runtime's availability ----

  /** Unavailable, timed out, or a container gone behind the agent's back: nothing the task did. */
  private isRuntimeTrouble(err: unknown): boolean {
    return err instanceof RuntimeError && (err.kind === 'unavailable' || err.kind === 'timeout' || err.kind === 'not_found');
  }

  private onRuntimeTrouble(err: unknown): void {
    if (!(err instanceof RuntimeError)) {
      this.opts.log.error(`agent: unexpected runtime failure: ${errorText(err)}`);
    } else if (err.kind === 'unavailable') {
      this.becomeUnavailable(err.message);
    } else if (err.kind === 'timeout') {
      // One slow call (a stop past its grace period, a busy daemon) is not an unavailable
      // runtime: a ping decides.
      this.opts.log.warn(`agent: ${err.message}`);
      this.checkRuntime();
    }
    // not_found: the container went away behind the agent's back; the next pass re-lists.
  }

  private checkRuntime(): void {
    if (this.closed || this.pinging) return;
    this.pinging = true;
    callWithTimeout(this.opts.clock, 'runtime ping', this.limits.callTimeoutMs, () => this.opts.runtime.ping()).result.then(() => {
      this.pinging = false;
      this.becomeUp();
    }, (err: unknown) => {
      this.pinging = false;
      this.becomeUnavailable(errorText(err));
    });
  }

  private becomeUp(): void {
    if (this.closed) return;
    const was = this.runtimeState;
    this.runtimeState = 'up';
    this.runtimeError = null;
    this.pingFailures = 0;
    this.unsubEvents?.();
    this.unsubEvents = this.opts.runtime.events(ownerLabels(this.opts.owner), () => this.kick(), (err) => this.onStreamError(err));
    if (was === 'unavailable') this.opts.log.info(`agent: the ${this.opts.runtime.kind} runtime answers again; reconciling`);
    this.wantRuntimeReport();
    this.kick();
  }

  private becomeUnavailable(error: string): void {
    if (this.closed) return;
    this.unsubEvents?.();
    this.unsubEvents = null;
    if (this.runtimeState !== 'unavailable' || this.runtimeError !== error) {
      this.opts.log.warn(`agent: the ${this.opts.runtime.kind} runtime is unavailable (${error}); containers are left as they are; retrying`);
    }
    this.runtimeState = 'unavailable';
    this.runtimeError = error;
    this.wantRuntimeReport();
    this.pingFailures++;
    this.pingTimer?.cancel();
    this.pingTimer = this.opts.clock.setTimer(backoffDelayMs(this.pingFailures, this.limits.pingBackoffMinMs, this.limits.pingBackoffMaxMs), () => {
      this.pingTimer = null;
      this.checkRuntime();
    });
  }

  /** The event stream broke: a ping says whether the runtime went away or only the stream did. */
  private onStreamError(err: RuntimeError): void {
    if (this.closed) return;
    this.unsubEvents = null;
    this.opts.log.debug(`agent: the runtime's event stream ended (${err.message})`);
    this.checkRuntime();
  }

  private wantRuntimeReport(): void {
    if (this.runtimeState === 'unknown') return;
    const stored = this.opts.view.assignments(this.opts.owner.nodeId).node?.runtime ?? null;
    this.runtimeReporter.want({ status: this.runtimeState, error: this.runtimeError, kind: this.opts.runtime.kind }, stored);
  }
}
