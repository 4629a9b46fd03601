// A small world for the job loop: the real reconcileJob and placePending deciding against an
// in-memory store (compare-and-set as the store does it, all or nothing), with leaders that come
// and go (and decide from applied state that lags), nodes whose agents start and stop containers,
// nodes that freeze (their containers run on until their lease expires, as the agent's lease
// keeper kills them) and are declared down (epoch raised), all driven by one seeded PRNG.
//
// The checkers are kept apart from the code under test: they watch the world (which containers
// really run) and every write the store accepted.

import type { Change, Plan } from '../../src/resources/changes.ts';
import { nodesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import { reconcileJob } from '../../src/control/job-loop.ts';
import { placePending } from '../../src/control/placement.ts';
import { jobRunsCollection, jobsCollection, newJob, type JobRecord, type JobRunRecord } from '../../src/resources/jobs.ts';
import type { NodeRecord, TaskRecord, TaskStatus } from '../../src/resources/records.ts';
import { parseSpecs, type JobSpec } from '../../src/resources/spec/index.ts';
import { latestAtOrBefore, nextAfter, parseSchedule } from '../../src/resources/spec/schedule.ts';
import type { ControlState, Versioned } from '../../src/resources/state.ts';

export function jobSpecOf(yaml: string): JobSpec {
  const spec = parseSpecs(yaml).jobs[0];
  if (spec === undefined) throw new Error('no job in the yaml');
  return spec;
}

/** mulberry32: small, seeded, good enough to pick faults. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

type Coll = Map<string, Versioned<unknown>>;

export class JobWorld {
  rev = 1;
  now: number;
  readonly colls = new Map<string, Coll>();
  /** Every run id the store ever accepted a creation of, with how many times. */
  readonly runCreations = new Map<string, number>();
  /** Containers that really run: task id to node. */
  readonly running = new Map<string, { nodeId: string; epoch: number; endsAt: number; exitCode: number }>();
  /** Per node: last lease renewal (world ms), frozen or not. */
  readonly nodes = new Map<string, { frozen: boolean; renewedAt: number }>();
  /** World ms of each instant at which a checker found two containers of the job running. */
  readonly overlaps: string[] = [];
  leader: { term: number; since: number; lagState: ControlState | null } | null = null;
  term = 0;
  private taskSeq = 0;
  readonly leaseMs = 5_000;
  readonly marginMs = 1_000;
  /** Shorter than lease + margin: an attempt is declared lost while it may still run (the lease must fence it). */
  readonly downAfterMs = 2_000;
  /** World ms at which a leader ran a job pass. */
  readonly leaderPasses: number[] = [];

  constructor(readonly random: () => number, start: number, nodeIds: readonly string[]) {
    this.now = start;
    for (const id of nodeIds) {
      this.put(nodesCollection, id, {
        id, name: id, addresses: { api: `${id}:1`, peer: `${id}:2` }, capacity: { cpuMillis: 4000, memoryBytes: 8 * 2 ** 30 }, labels: {},
        availability: 'active', state: 'ready', epoch: 0, runtime: { status: 'up', error: null }, softwareVersion: 't', mesh: null,
      } satisfies NodeRecord);
      this.nodes.set(id, { frozen: false, renewedAt: start });
    }
  }

  coll(name: string): Coll {
    let c = this.colls.get(name);
    if (c === undefined) {
      c = new Map();
      this.colls.set(name, c);
    }
    return c;
  }

  put(collection: string, id: string, doc: unknown): void {
    this.coll(collection).set(id, { value: structuredClone(doc), rev: ++this.rev });
  }

  addJob(spec: JobSpec): void {
    this.put(jobsCollection, spec.name, newJob(spec, this.now, null));
  }

  state(): ControlState {
    const m = <T>(c: string): Map<string, Versioned<T>> => new Map([...this.coll(c)].map(([k, v]) => [k, structuredClone(v) as Versioned<T>]));
    return {
      revision: this.rev, nodes: m(nodesCollection), services: new Map(), tasks: m(tasksCollection), statuses: m(taskStatusCollection),
      jobs: m<JobRecord>(jobsCollection), runs: m<JobRunRecord>(jobRunsCollection),
    };
  }

  /** Applies a plan all or nothing, as the store's transaction does; false when a compare fails. */
  apply(plan: Plan): boolean {
    for (const c of plan.changes) if (!this.holds(c)) return false;
    for (const c of plan.compares) {
      const cur = this.coll(c.collection).get(c.id);
      if (c.target === 'rev' && cur?.rev !== c.value) return false;
    }
    for (const c of plan.changes) {
      if (c.kind === 'delete') {
        this.coll(c.collection).delete(c.id);
        continue;
      }
      if (c.collection === jobRunsCollection && 'absent' in c.expect) this.runCreations.set(c.id, (this.runCreations.get(c.id) ?? 0) + 1);
      this.put(c.collection, c.id, c.doc);
    }
    return true;
  }

  private holds(c: Change): boolean {
    const cur = this.coll(c.collection).get(c.id);
    return 'absent' in c.expect ? cur === undefined : cur?.rev === c.expect.rev;
  }

  /** The leader's view: lease expiry as the leader knows it (renewals it applied, since its start). */
  private clearInMs(nodeId: string, _epoch: number): number {
    const n = this.nodes.get(nodeId);
    const since = this.leader?.since ?? this.now;
    const from = Math.max(since, n?.renewedAt ?? since);
    return Math.max(0, from + this.leaseMs + this.marginMs - this.now);
  }

  /** One leader pass over the job and placement, deciding from a state that may lag. */
  leaderPass(job: string, lag: boolean): void {
    if (this.leader === null) return;
    const state = lag && this.leader.lagState !== null ? this.leader.lagState : this.state();
    this.leader.lagState = this.state();
    this.leaderPasses.push(this.now);
    const d = reconcileJob(state, job, { now: this.now, newTaskId: () => `t${++this.taskSeq}`, exclusiveClearInMs: (n, e) => this.clearInMs(n, e) });
    // A lost write (a timeout) changes nothing; the loop decides again later.
    if (this.random() < 0.05) return;
    this.apply(d.plan);
    this.apply(placePending(this.state(), this.leader.term, this.now).plan);
  }

  /** Node agents: start what is assigned, report exits, stop what is shut down; frozen nodes do nothing. */
  agents(durationMs: () => number, exitCode: () => number): void {
    const nodes = this.coll(nodesCollection);
    for (const [id, n] of this.nodes) {
      if (n.frozen) continue;
      n.renewedAt = this.now;
      const epoch = (nodes.get(id)?.value as NodeRecord).epoch;
      // Back from a freeze: containers of an older epoch are removed before anything else.
      for (const [tid, c] of this.running) if (c.nodeId === id && c.epoch !== epoch) this.running.delete(tid);
      for (const [tid, v] of this.coll(tasksCollection)) {
        const t = v.value as TaskRecord;
        if (t.nodeId !== id || t.nodeEpoch !== epoch) continue;
        const status = this.coll(taskStatusCollection).get(tid)?.value as TaskStatus | undefined;
        const c = this.running.get(tid);
        if (t.desired === 'running' && status === undefined) {
          this.running.set(tid, { nodeId: id, epoch, endsAt: this.now + durationMs(), exitCode: exitCode() });
          this.report(t, epoch, 'running', null);
        } else if (c !== undefined && t.desired === 'shutdown') {
          this.running.delete(tid);
          this.report(t, epoch, 'shutdown', null);
        } else if (c !== undefined && this.now >= c.endsAt) {
          this.running.delete(tid);
          this.report(t, epoch, 'failed', c.exitCode);
        } else if (c === undefined && t.desired === 'shutdown' && status?.state === 'running') {
          this.report(t, epoch, 'shutdown', null);
        }
      }
    }
    // A frozen node's lease keeper kills its exclusive containers once the lease has run out.
    for (const [tid, c] of this.running) {
      const n = this.nodes.get(c.nodeId);
      if (n !== undefined && n.frozen && this.now >= n.renewedAt + this.leaseMs) this.running.delete(tid);
    }
  }

  private report(t: TaskRecord, epoch: number, state: TaskStatus['state'], exitCode: number | null): void {
    const s: TaskStatus = {
      taskId: t.id, nodeId: t.nodeId as string, nodeEpoch: epoch, state, containerId: `c-${t.id}`, exitCode, health: null, message: null, startedAt: null, finishedAt: null,
    };
    this.put(taskStatusCollection, t.id, s);
  }

  /** The leader's node health, reduced: a node silent past downAfterMs is declared down (epoch raised). */
  nodeHealth(): void {
    if (this.leader === null) return;
    for (const [id, n] of this.nodes) {
      const rec = this.coll(nodesCollection).get(id)?.value as NodeRecord;
      const silent = this.now - Math.max(n.renewedAt, this.leader.since);
      if (n.frozen && silent >= this.downAfterMs && rec.state !== 'down') this.put(nodesCollection, id, { ...rec, state: 'down', epoch: rec.epoch + 1 });
      if (!n.frozen && rec.state === 'down') this.put(nodesCollection, id, { ...rec, state: 'ready' });
    }
  }

  /** Containers of `job` running now (a forbid job must never have two). */
  checkOverlap(job: string): void {
    const mine = [...this.running.keys()].filter((tid) => (this.coll(tasksCollection).get(tid)?.value as TaskRecord | undefined)?.service === job || !this.coll(tasksCollection).has(tid));
    if (mine.length > 1) this.overlaps.push(`${new Date(this.now).toISOString()}: ${mine.join(', ')}`);
  }
}

/** Scheduled times in [from, to] of a schedule text. */
export function timesBetween(text: string, from: number, to: number): number[] {
  const s = parseSchedule(text);
  if (!s.ok) throw new Error(s.message);
  const out: number[] = [];
  let t = latestAtOrBefore(s.value, from - 1) ?? from - 1;
  for (;;) {
    const n = nextAfter(s.value, t);
    if (n === null || n > to) return out;
    out.push(n);
    t = n;
  }
}
