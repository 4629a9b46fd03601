// The supervisor of the leader's loops (design.md, Control plane and Fencing). The loops run on a
// node only while it is leader *and* has applied an entry of its own term (its view of the store
// then includes everything committed before it became leader), and the cluster runs at the
// control plane's feature level. Each run belongs to one term: every command it proposes is
// fenced by that term, the driver refuses to propose it once the node no longer leads that
// term, and the state machine refuses it if it lands in another term's entry. A change of
// leadership stops the run (and awaits it) before another can start.
//
// One run is one work queue (work-queue.ts) fed by the store's events, with these keys:
//   svc:<name>  the orchestrator for one service (orchestrator.ts)
//   place       the placement of pending tasks (placement.ts)
//   nodes       node health (node-health.ts)
// Keys are handled one at a time; each pass re-reads the state (level-triggered) and proposes
// its plan; a plan refused because something it read changed is simply decided again.

import { randomBytes } from 'node:crypto';
import type { DocumentStore } from '../../fsm/index.ts';
import { encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, WatchEvent } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import type { Logger } from '../node/raft-node.ts';
import type { RaftNode } from '../node/raft-node.ts';
import { toTransactions, type Plan } from './changes.ts';
import { controlFeatureLevel, nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from './collections.ts';
import { assessNodes, type NodeHealthConfig } from './node-health.ts';
import { reconcileService, type Decision } from './orchestrator.ts';
import { placePending } from './placement.ts';
import { ControlStateReader, type ControlState } from './state.ts';
import { WorkQueue } from './work-queue.ts';

export interface SupervisorOptions {
  node: RaftNode;
  store: DocumentStore;
  log: Logger;
  health: NodeHealthConfig;
  /** New task ids (default: 12 random hex digits). */
  newTaskId?: () => string;
}

/** How often node health is looked at while any node is not ready (a node may come back). */
const recheckNodesMs = 1_000;

type Outcome = 'done' | 'conflict';

interface Run {
  term: number;
  queue: WorkQueue;
  done: Promise<void>;
  startedAt: number;
}

export class Supervisor {
  private run: Run | undefined;
  private stopping: Promise<void> | undefined;
  private closed = false;
  private readonly reader: ControlStateReader;
  private readonly newTaskId: () => string;
  private readonly onNodeEvent = (): void => this.check();
  /** Passes run, plans proposed, and plans refused for a conflict, since start (for metrics and tests). */
  readonly counts = { passes: 0, proposed: 0, conflicts: 0, runs: 0 };

  constructor(private readonly opts: SupervisorOptions) {
    this.reader = new ControlStateReader(opts.store, (m) => opts.log.warn(`${m.collection}/${m.id} (rev ${m.rev}) is not a valid record and is ignored: ${m.problem}`));
    this.newTaskId = opts.newTaskId ?? (() => randomBytes(6).toString('hex'));
  }

  start(): void {
    const n = this.opts.node;
    n.on('leaderChange', this.onNodeEvent);
    n.on('applied', this.onNodeEvent);
    n.on('featureLevel', this.onNodeEvent);
    this.check();
  }

  /** The term whose loops run here, or null. */
  get runningTerm(): number | null {
    return this.run?.term ?? null;
  }

  /** Stops the loops and awaits them; idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    const n = this.opts.node;
    n.off('leaderChange', this.onNodeEvent);
    n.off('applied', this.onNodeEvent);
    n.off('featureLevel', this.onNodeEvent);
    await this.stopRun();
  }

  private check(): void {
    const n = this.opts.node;
    const mayRun = !this.closed && n.isLeader && n.appliedTerm === n.currentTerm && n.featureLevel >= controlFeatureLevel && n.failure === undefined;
    if (this.run !== undefined && (!mayRun || this.run.term !== n.currentTerm)) void this.stopRun().then(() => this.check());
    else if (this.run === undefined && this.stopping === undefined && mayRun) this.startRun(n.currentTerm);
  }

  private startRun(term: number): void {
    const queue = new WorkQueue();
    const run: Run = { term, queue, startedAt: performance.now(), done: Promise.resolve() };
    this.run = run;
    this.counts.runs++;
    this.opts.log.info(`leader loops started for term ${term}`);
    run.done = this.loop(run).catch((err: unknown) => this.opts.log.error(`leader loops of term ${term} failed: ${(err as Error).stack ?? String(err)}`));
  }

  private async stopRun(): Promise<void> {
    const run = this.run;
    if (run === undefined) return this.stopping;
    this.run = undefined;
    run.queue.close();
    this.stopping = run.done.finally(() => {
      this.stopping = undefined;
      this.opts.log.info(`leader loops of term ${run.term} stopped`);
    });
    return this.stopping;
  }

  private async loop(run: Run): Promise<void> {
    const unsubscribe = this.opts.store.subscribe((ev) => this.enqueueFor(run.queue, ev));
    try {
      run.queue.add('nodes');
      run.queue.add('place');
      for (const id of this.reader.read().services.keys()) run.queue.add(`svc:${id}`);
      for (;;) {
        const key = await run.queue.next();
        if (key === undefined || this.run !== run) return;
        await this.pass(run, key);
      }
    } finally {
      unsubscribe();
    }
  }

  /** Which keys a change of the store concerns. */
  private enqueueFor(queue: WorkQueue, ev: WatchEvent): void {
    switch (ev.collection) {
      case servicesCollection:
        queue.add(`svc:${ev.id}`);
        queue.add('place');
        return;
      case tasksCollection:
      case taskStatusCollection: {
        const service = this.serviceOfTask(ev);
        if (service !== undefined) queue.add(`svc:${service}`);
        queue.add('place');
        return;
      }
      case nodesCollection:
        queue.add('nodes');
        queue.add('place');
        for (const id of this.reader.read().services.keys()) queue.add(`svc:${id}`);
        return;
      default:
    }
  }

  private serviceOfTask(ev: WatchEvent): string | undefined {
    const fromDoc = (ev.doc?.doc as { service?: unknown } | undefined)?.service;
    if (typeof fromDoc === 'string') return fromDoc;
    const task = this.opts.store.get(tasksCollection, ev.id)?.doc as { service?: unknown } | undefined;
    return typeof task?.service === 'string' ? task.service : undefined;
  }

  private async pass(run: Run, key: string): Promise<void> {
    this.counts.passes++;
    try {
      const state = this.reader.read();
      const decision = this.decide(run, key, state);
      const outcome = await this.write(decision.plan, run.term);
      if (outcome === 'conflict') {
        this.counts.conflicts++;
        run.queue.add(key);
        return;
      }
      run.queue.forget(key);
      if (decision.wakeInMs !== null) run.queue.addAfter(key, decision.wakeInMs);
    } catch (err) {
      if (err instanceof ShoalError && err.code === 'stale_term') {
        this.check();
        return;
      }
      const ms = run.queue.retry(key);
      this.opts.log.warn(`leader loop ${key}: ${(err as Error).message}; retrying in ${ms} ms`);
    }
  }

  private decide(run: Run, key: string, state: ControlState): Decision {
    const n = this.opts.node;
    const now = n.logTimeNow();
    if (key === 'place') return placePending(state, run.term, now);
    if (key === 'nodes') return this.decideNodes(run, state);
    if (key.startsWith('svc:')) return reconcileService(state, key.slice(4), { now, newTaskId: this.newTaskId });
    return { plan: { changes: [], compares: [] }, wakeInMs: null };
  }

  private decideNodes(run: Run, state: ControlState): Decision {
    const n = this.opts.node;
    const cs = n.confState();
    const members = new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext]);
    const d = assessNodes(state, { self: n.id, members, silentForMs: (id) => n.silentForMs(id), loopsRunningForMs: performance.now() - run.startedAt }, this.opts.health);
    const anyUnready = [...state.nodes.values()].some((x) => members.has(x.value.id) && x.value.state !== 'ready');
    const wake = anyUnready ? Math.min(recheckNodesMs, d.wakeInMs ?? recheckNodesMs) : d.wakeInMs;
    return { plan: { changes: d.changes, compares: [] }, wakeInMs: wake };
  }

  /** Proposes the plan, fenced by `term`; 'conflict' when what it read has changed. */
  private async write(plan: Plan, term: number): Promise<Outcome> {
    for (const txn of toTransactions(plan)) {
      const data = encodeCommand({ cmd: txn, ts: Date.now(), fence: { term }, principal: 'shoal:leader' });
      this.counts.proposed++;
      const { result } = await this.opts.node.propose(data, { featureLevel: controlFeatureLevel, term });
      const r = result as CommandResult;
      if (!r.ok) {
        if (r.error.code === 'stale_term') throw new ShoalError('stale_term', r.error.message);
        if (r.error.code === 'revision_mismatch' || r.error.code === 'already_exists' || r.error.code === 'not_found') return 'conflict';
        throw new ShoalError('internal', `a leader loop's write was refused: ${r.error.code}: ${r.error.message}`);
      }
      if (r.kind === 'txn' && !r.succeeded) return 'conflict';
    }
    return 'done';
  }
}
