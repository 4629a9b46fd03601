// The leader's loops of one term on one node, run the way src/control/supervisor.ts runs them
// (which reads performance.now() and needs a RaftNode, so it cannot run on simulated time): one
// work queue (the real WorkQueue, on the simulated clock) fed by the node's own store events,
// with the keys svc:<name>, place and nodes; each pass reads the node's applied state, decides
// with the real pure loop, and proposes the plan as transactions fenced by the loop's term; a
// plan refused because what it read changed is decided again, a stale_term refusal ends the
// pass (the world stops the run once the node knows it no longer leads).
//
// Every decision goes out with the world's record of who made it and what the world knew then
// (the checkers read that record, never the command's fence).

import type { DocumentStore } from '../../fsm/index.ts';
import { encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, WatchEvent } from '../../fsm/types.ts';
import { toTransactions, type Plan } from '../../src/control/changes.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../src/control/collections.ts';
import { assessNodes, type NodeHealthConfig } from '../../src/control/node-health.ts';
import { reconcileService, type Decision } from '../../src/control/orchestrator.ts';
import { placePending } from '../../src/control/placement.ts';
import { ControlStateReader, type ControlState } from '../../src/control/state.ts';
import { WorkQueue } from '../../src/control/work-queue.ts';
import { ShoalError } from '../../src/errors.ts';
import type { Clock, Timer } from '../../src/executor/clock.ts';
import type { ProposalResult } from '../../src/node/raft-node.ts';
import type { LoopOrigin } from './log-entry.ts';

/** As in the supervisor: how often node health is looked at while any node is not ready. */
const recheckNodesMs = 1_000;

export interface LoopPorts {
  store: DocumentStore;
  clock: Clock;
  self: string;
  members: ReadonlySet<string>;
  health: NodeHealthConfig;
  /** What the real node's silentForMs answers: since this incarnation last heard from `id`. */
  silentForMs(id: string): number | undefined;
  /** The world's own contact table for the checkers' record: ms since the deciding node last heard from each node. */
  worldSilenceMs(): Record<string, number | null>;
  propose(data: Uint8Array, term: number, origin: LoopOrigin): Promise<ProposalResult>;
  newTaskId(): string;
  trace(line: string): void;
}

export class LeaderLoops {
  private readonly queue: WorkQueue;
  private readonly reader: ControlStateReader;
  private readonly startedAt: number;
  private closed = false;
  private unsubscribe: (() => void) | null = null;
  readonly counts = { passes: 0, proposed: 0, conflicts: 0 };

  constructor(private readonly ports: LoopPorts, readonly term: number) {
    const clock = ports.clock;
    this.queue = new WorkQueue({ setTimeout: (fn, ms) => clock.setTimer(ms, fn), clearTimeout: (h) => (h as Timer).cancel() }, () => clock.now());
    this.reader = new ControlStateReader(ports.store);
    this.startedAt = clock.now();
  }

  start(): void {
    this.unsubscribe = this.ports.store.subscribe((ev) => this.enqueueFor(ev));
    this.queue.add('nodes');
    this.queue.add('place');
    for (const id of this.reader.read().services.keys()) this.queue.add(`svc:${id}`);
    void this.loop();
  }

  stop(): void {
    this.closed = true;
    this.queue.close();
    this.unsubscribe?.();
  }

  private async loop(): Promise<void> {
    for (;;) {
      const key = await this.queue.next();
      if (key === undefined || this.closed) return;
      await this.pass(key);
    }
  }

  /** Which keys a change of the store concerns (as the supervisor's enqueueFor). */
  private enqueueFor(ev: WatchEvent): void {
    switch (ev.collection) {
      case servicesCollection:
        this.queue.add(`svc:${ev.id}`);
        this.queue.add('place');
        return;
      case tasksCollection:
      case taskStatusCollection: {
        const service = this.serviceOfTask(ev);
        if (service !== undefined) this.queue.add(`svc:${service}`);
        this.queue.add('place');
        return;
      }
      case nodesCollection:
        this.queue.add('nodes');
        this.queue.add('place');
        for (const id of this.reader.read().services.keys()) this.queue.add(`svc:${id}`);
        return;
      default:
    }
  }

  private serviceOfTask(ev: WatchEvent): string | undefined {
    const fromDoc = (ev.doc?.doc as { service?: unknown } | undefined)?.service;
    if (typeof fromDoc === 'string') return fromDoc;
    const task = this.ports.store.get(tasksCollection, ev.id)?.doc as { service?: unknown } | undefined;
    return typeof task?.service === 'string' ? task.service : undefined;
  }

  private async pass(key: string): Promise<void> {
    this.counts.passes++;
    try {
      const state = this.reader.read();
      const decision = this.decide(key, state);
      const origin: LoopOrigin = {
        kind: 'loop', node: this.ports.self, term: this.term, key, decidedAtMs: this.ports.clock.now(), readRevision: state.revision,
        loopsRunningMs: this.ports.clock.now() - this.startedAt, silenceMs: key === 'place' ? this.ports.worldSilenceMs() : {},
      };
      const outcome = await this.write(decision.plan, origin);
      if (outcome === 'conflict') {
        this.counts.conflicts++;
        this.queue.add(key);
        return;
      }
      this.queue.forget(key);
      if (decision.wakeInMs !== null) this.queue.addAfter(key, decision.wakeInMs);
    } catch (err) {
      if (err instanceof ShoalError && err.code === 'stale_term') return;
      const ms = this.queue.retry(key);
      this.ports.trace(`loops t${this.term} ${key}: ${(err as Error).message}; retrying in ${ms} ms`);
    }
  }

  private decide(key: string, state: ControlState): Decision {
    const now = this.ports.clock.now();
    if (key === 'place') return placePending(state, this.term, now);
    if (key === 'nodes') return this.decideNodes(state);
    if (key.startsWith('svc:')) return reconcileService(state, key.slice(4), { now, newTaskId: () => this.ports.newTaskId() });
    return { plan: { changes: [], compares: [] }, wakeInMs: null };
  }

  private decideNodes(state: ControlState): Decision {
    const { members } = this.ports;
    const d = assessNodes(state, {
      self: this.ports.self, members, silentForMs: (id) => this.ports.silentForMs(id), loopsRunningForMs: this.ports.clock.now() - this.startedAt,
    }, this.ports.health);
    const anyUnready = [...state.nodes.values()].some((x) => members.has(x.value.id) && x.value.state !== 'ready');
    const wake = anyUnready ? Math.min(recheckNodesMs, d.wakeInMs ?? recheckNodesMs) : d.wakeInMs;
    return { plan: { changes: d.changes, compares: [] }, wakeInMs: wake };
  }

  /** Proposes the plan, fenced by the loop's term; 'conflict' when what it read has changed. */
  private async write(plan: Plan, origin: LoopOrigin): Promise<'done' | 'conflict'> {
    for (const txn of toTransactions(plan)) {
      const data = encodeCommand({ cmd: txn, ts: origin.decidedAtMs, fence: { term: this.term }, principal: 'shoal:leader' });
      this.counts.proposed++;
      const { result } = await this.ports.propose(data, this.term, origin);
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
