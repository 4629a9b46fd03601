// A fake applied store for agent tests: the agent's view, writer and read barrier in one object,
// with switches for the failures the agent must survive (no quorum, a barrier held open, a
// view that lags the leader, writes refused). Time is a ManualClock moved by the tests.

import type { NodeRecord, ServiceRecord, TaskRecord, TaskStatus } from '../../src/resources/records.ts';
import type { ServiceSpec } from '../../src/resources/spec/index.ts';
import { Agent, type AgentLimits, type AgentLog, type AgentView, type AgentWriter, type ImagePullUpdate, type NodeAssignments, type NodeRuntimeReport } from '../../src/executor/agent.ts';
import type { ImagePullRequest } from '../../src/resources/image-pulls.ts';
import type { Runtime } from '../../src/executor/runtime.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { node as nodeRecord, task as taskRecord } from '../control/fixtures.ts';

export { spec } from '../control/fixtures.ts';

export class RefusedWrite extends Error {
  constructor(readonly code: string) {
    super(`refused: ${code}`);
  }
}

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => { resolve = r; });
  return { promise, resolve };
}

export class FakeStore implements AgentView {
  readonly nodes = new Map<string, NodeRecord>();
  readonly services = new Map<string, ServiceRecord>();
  readonly tasks = new Map<string, TaskRecord>();
  readonly statuses = new Map<string, TaskStatus>();
  /** Pulls the leader asked of a node before a stop elsewhere (image-pulls.ts), and every state a node reported of them. */
  readonly imagePulls = new Map<string, ImagePullRequest>();
  readonly imagePullReports: ImagePullUpdate[] = [];
  /** Every accepted batch of task reports, with the clock's time when it was written. */
  readonly writes: { atMs: number; statuses: TaskStatus[] }[] = [];
  /** Every attempt to write task reports, accepted or not. */
  writeAttempts = 0;
  readonly runtimeWrites: (NodeRuntimeReport & { nodeId: string })[] = [];
  /** False: the barrier and every write fail with no_leader. */
  quorum = true;
  /** Writes of task reports fail with this code this many more times. */
  failWrites: { code: string; times: number } | null = null;
  /** Task ids the view does not show yet (it lags the leader until a barrier). */
  readonly lagging = new Set<string>();
  /** Node records the view keeps showing as they were (it lags the leader), while writes see the real ones. */
  readonly frozenNodes = new Map<string, NodeRecord>();
  barriers = 0;
  private gate: Deferred | null = null;
  private listeners = new Set<() => void>();

  constructor(readonly clock: ManualClock) {}

  addNode(id: string, overrides: Partial<NodeRecord> = {}): NodeRecord {
    const n = nodeRecord(id, { runtime: { status: 'unknown', error: null }, ...overrides });
    this.nodes.set(id, n);
    this.changed();
    return n;
  }

  addService(s: ServiceSpec, overrides: Partial<ServiceRecord> = {}): ServiceRecord {
    const r: ServiceRecord = {
      name: s.name, spec: s, specVersion: 1, previousSpec: null, previousSpecVersion: null,
      updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: null, forcedDisruptions: [], createdAt: 1, updatedAt: 1, ...overrides,
    };
    this.services.set(r.name, r);
    this.changed();
    return r;
  }

  /** A task of `service` placed on `nodeId` in the node's current epoch, desired running. */
  assign(id: string, service: string, nodeId: string, overrides: Partial<TaskRecord> = {}): TaskRecord {
    const n = this.nodes.get(nodeId);
    const t = taskRecord(id, {
      service, slot: this.tasks.size + 1, nodeId, observed: 'assigned', assignedTerm: 1, nodeEpoch: n?.epoch ?? 0, ...overrides,
    });
    this.tasks.set(id, t);
    this.changed();
    return t;
  }

  update(id: string, overrides: Partial<TaskRecord>): void {
    const t = this.tasks.get(id);
    if (t === undefined) throw new Error(`no task ${id}`);
    this.tasks.set(id, { ...t, ...overrides });
    this.changed();
  }

  raiseEpoch(nodeId: string): number {
    const n = this.nodes.get(nodeId);
    if (n === undefined) throw new Error(`no node ${nodeId}`);
    this.nodes.set(nodeId, { ...n, epoch: n.epoch + 1 });
    this.changed();
    return n.epoch + 1;
  }

  freezeNodeView(nodeId: string): void {
    const n = this.nodes.get(nodeId);
    if (n !== undefined) this.frozenNodes.set(nodeId, n);
  }

  thawNodeView(nodeId: string): void {
    this.frozenNodes.delete(nodeId);
    this.changed();
  }

  /** The barrier waits until releaseBarrier(). */
  holdBarrier(): void {
    this.gate ??= deferred();
  }

  releaseBarrier(): void {
    const g = this.gate;
    this.gate = null;
    g?.resolve();
  }

  // ---- the ports ----

  assignments(nodeId: string): NodeAssignments {
    const tasks = [...this.tasks.values()]
      .filter((t) => t.nodeId === nodeId && !this.lagging.has(t.id))
      .map((task) => ({ task, service: this.services.get(task.service) ?? null, status: this.statuses.get(task.id) ?? null }));
    const pulls = [...this.imagePulls.values()];
    const withElsewhere = tasks.map((a) => (pulls.some((p) => p.taskId === a.task.id && p.nodeId !== nodeId) ? { ...a, pullElsewhere: true } : a));
    const mine = pulls.filter((p) => p.nodeId === nodeId);
    return { node: this.frozenNodes.get(nodeId) ?? this.nodes.get(nodeId) ?? null, tasks: withElsewhere, ...(mine.length > 0 ? { imagePulls: mine } : {}) };
  }

  /** The leader asks `nodeId` to pull `image` before task `taskId` stops. */
  askPull(taskId: string, nodeId: string, image: string): void {
    this.imagePulls.set(taskId, {
      taskId, service: 'web', nodeId, nodeEpoch: this.nodes.get(nodeId)?.epoch ?? 0, image, pullsWith: 'docker.io',
      requestedAt: this.clock.now(), state: 'requested', message: null, updatedAt: this.clock.now(),
    });
    this.changed();
  }

  async reportImagePull(nodeId: string, u: ImagePullUpdate): Promise<void> {
    await Promise.resolve();
    if (!this.quorum) throw new RefusedWrite('no_leader');
    const cur = this.imagePulls.get(u.taskId);
    if (cur === undefined || cur.nodeId !== nodeId || cur.image !== u.image) return;
    if (this.nodes.get(nodeId)?.epoch !== u.nodeEpoch) throw new RefusedWrite('stale_epoch');
    this.imagePulls.set(u.taskId, { ...cur, state: u.state, message: u.message });
    this.imagePullReports.push(u);
    this.changed();
  }

  subscribe(onChange: () => void): () => void {
    this.listeners.add(onChange);
    return () => this.listeners.delete(onChange);
  }

  async caughtUp(): Promise<void> {
    this.barriers++;
    if (this.gate !== null) await this.gate.promise;
    if (!this.quorum) throw new RefusedWrite('no_leader');
    if (this.lagging.size > 0 || this.frozenNodes.size > 0) {
      this.lagging.clear();
      this.frozenNodes.clear();
      this.changed();
    }
  }

  async reportTaskStatus(statuses: TaskStatus[]): Promise<void> {
    this.writeAttempts++;
    await Promise.resolve();
    if (!this.quorum) throw new RefusedWrite('no_leader');
    if (this.failWrites !== null && this.failWrites.times > 0) {
      this.failWrites.times--;
      throw new RefusedWrite(this.failWrites.code);
    }
    for (const s of statuses) {
      if (this.nodes.get(s.nodeId)?.epoch !== s.nodeEpoch) throw new RefusedWrite('stale_epoch');
    }
    for (const s of statuses) this.statuses.set(s.taskId, s);
    this.writes.push({ atMs: this.clock.now(), statuses });
    this.changed();
  }

  async reportNodeRuntime(nodeId: string, report: NodeRuntimeReport): Promise<void> {
    await Promise.resolve();
    if (!this.quorum) throw new RefusedWrite('no_leader');
    this.runtimeWrites.push({ nodeId, ...report });
    const n = this.nodes.get(nodeId);
    if (n !== undefined) this.nodes.set(nodeId, { ...n, runtime: { status: report.status, error: report.error } });
    this.changed();
  }

  /** The writer of one node's agent. */
  writerFor(nodeId: string): AgentWriter {
    return {
      reportTaskStatus: (statuses) => this.reportTaskStatus(statuses),
      reportNodeRuntime: (report) => this.reportNodeRuntime(nodeId, report),
      reportImagePull: (u) => this.reportImagePull(nodeId, u),
    };
  }

  private changed(): void {
    for (const l of [...this.listeners]) l();
  }
}

/** A log that keeps its lines. */
export class MemoryLog implements AgentLog {
  readonly lines: string[] = [];
  debug(msg: string): void { this.lines.push(`debug ${msg}`); }
  info(msg: string): void { this.lines.push(`info ${msg}`); }
  warn(msg: string): void { this.lines.push(`warn ${msg}`); }
  error(msg: string): void { this.lines.push(`error ${msg}`); }
  matching(re: RegExp): string[] { return this.lines.filter((l) => re.test(l)); }
}

/** Lets every pending promise chain and I/O callback run. */
export async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Moves simulated time forward by `ms` in steps, letting the agent work at each step. */
export async function run(clock: ManualClock, ms: number, stepMs = 10): Promise<void> {
  await flush();
  for (let t = 0; t < ms; t += stepMs) {
    clock.advance(Math.min(stepMs, ms - t));
    await flush();
  }
}

export const clusterId = 'c1';

/** An agent for `nodeId` of cluster c1 on `runtime`, reading and writing `store`; started. */
export function startAgent(store: FakeStore, runtime: Runtime, log: MemoryLog, nodeId = 'n1', limits: Partial<Omit<AgentLimits, 'reports'>> = {}): Agent {
  const agent = new Agent({
    owner: { clusterId, nodeId }, view: store, writer: store.writerFor(nodeId), caughtUp: () => store.caughtUp(),
    runtime, clock: store.clock, log, limits,
  });
  agent.start();
  return agent;
}
