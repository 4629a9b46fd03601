// The world: the simulated clock, the machines and their runtimes, the network, the modelled
// consensus and the reference store, and one step of everything. The code under test runs
// inside it unchanged: each node's DocumentStore applies its prefix of the log, its agent (the
// real Agent on a MemoryRuntime, through the real StoreAgentView and StoreAgentWriter) converges
// its containers, and the node that believes it leads runs the real leader loops (src/control/leader-run.ts).
//
// One step: leadership (elections, step-downs, nodes hearing of the new term), proposals whose
// time has come reach the log, nodes apply a little of what they lag, contacts are noted, leader
// loops start and stop, then simulated time moves on by stepMs (every timer firing at its due
// time, with every promise chain run between), and the checkers look at the committed state and
// the runtimes.

import type { SeededPrng } from '../../src/raft/prng.ts';
import { StoreAgentView, StoreAgentWriter, type NodeIdentity } from '../../src/executor/store-ports.ts';
import type { Availability } from '../../src/resources/records.ts';
import { ShoalError } from '../../src/errors.ts';
import { Agent, type AgentLimits } from '../../src/executor/agent.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import type { Timer } from '../../src/executor/clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import type { RaftNode } from '../../src/node/raft-node.ts';
import type { Trace } from '../sim/trace.ts';
import { readCommitted } from './checkers/committed-view.ts';
import { ContainersChecker } from './checkers/containers.ts';
import { ExclusiveChecker, SimFence } from './checkers/exclusive.ts';
import { JobChecker } from './checkers/jobs.ts';
import { NodeClock } from './node-clock.ts';
import type { Amounts } from './checkers/placement.ts';
import { ReplicasChecker } from './checkers/replicas.ts';
import { Consensus, describeOrigin, type Cluster } from './consensus.ts';
import { flush } from './flush.ts';
import { LeaderRun } from '../../src/control/leader-run.ts';
import { RenewalLog } from '../../src/control/renewal-log.ts';
import type { NodeContact } from '../../src/control/node-health.ts';
import type { PeerLink } from '../../src/ports/leadership.ts';
import { PeerViewReporter, peerViewUnheardAfterMs } from '../../src/node/peer-view-reporter.ts';
import { controlFeatureLevel } from '../../src/resources/collections.ts';
import type { HealthFact } from './checkers/health.ts';
import { tookEffect, type LogEntry, type LoopOrigin } from './log-entry.ts';
import { Network } from './network.ts';
import { Reference } from './reference.ts';
import { zones, type ControlScenario } from './scenario.ts';
import { Session } from './session.ts';
import { SimNode } from './sim-node.ts';
import { SimVolumes, volumeRecordOf } from './sim-volumes.ts';
import { emptyStats, type SimStats } from './stats.ts';

export const clusterId = 'sim';

/** The agent's limits in the simulation: the real defaults, scaled to seconds of simulated time. */
export const simAgentLimits: Partial<Omit<AgentLimits, 'reports'>> & { reports: Partial<AgentLimits['reports']> } = {
  resyncIntervalMs: 2_000, callTimeoutMs: 2_000, pullTimeoutMs: 1_000, stopMarginMs: 1_000, barrierTimeoutMs: 1_500,
  pingBackoffMinMs: 200, pingBackoffMaxMs: 2_000, closeDrainMs: 1_000,
  reports: { intervalMinMs: 200, backoffMinMs: 200, backoffMaxMs: 2_000 },
};

/** Placement checker slack over downAfterMs (the health write's way to the log and the leader's store). */
export const placementSlackMs = 2_000;

/**
 * The health checker's slack: a member's view write reaching the log (proposals wait up to a few
 * steps) and the leader's applied store (nodes apply a few entries per step, and stall for up to
 * 30 steps).
 */
export const healthSlackMs = 5_000;
/**
 * The last steps of a stop of shoal in which the new process listens but answers no handshake
 * yet (starting up): dials to it hang. 1.5-2.1 s from listening to the first handshake in
 * `npm run bench:nodeloss`.
 */
export const startupSteps = 20;

/** What a machine is named and what it offers. */
function identityOf(id: string, i: number, capacity: Amounts): NodeIdentity {
  return { id, name: id, apiAddress: `sim:${id}`, peerAddress: `sim:${id}`, softwareVersion: 'sim', capacity: { ...capacity }, labels: { zone: zones[i % zones.length] as string } };
}

export class World implements Cluster {
  readonly clock = new ManualClock(0);
  readonly stats: SimStats = emptyStats();
  readonly nodes: SimNode[];
  readonly network: Network;
  readonly consensus: Consensus;
  readonly reference: Reference;
  readonly memberIds: ReadonlySet<string>;
  step = 0;
  /** The operator's record of each node's availability (ground truth for the checkers). */
  readonly availability = new Map<string, Availability>();
  readonly everDrained = new Set<string>();
  /** Per service: replicas it had before an operator change the orchestrator has not acted on. */
  readonly pendingReplicas = new Map<string, { index: number; replicas: number }[]>();
  private readonly lastContact = new Map<string, number>();
  /** Per `a>b`: since when a and b have been connected without a break (absent: not connected now). */
  private readonly connectedSince = new Map<string, number>();
  /** Per node: since when its shoal has run unfrozen without a break (absent: not now). */
  private readonly aliveSince = new Map<string, number>();
  private readonly replicas = new ReplicasChecker();
  private readonly containers = new ContainersChecker();
  private readonly exclusive = new ExclusiveChecker();
  private readonly jobs = new JobChecker();
  private readonly fence = new SimFence();
  private taskSeq = 0;
  /** The replicated volume's model (issue 41), in seeds that have one. */
  readonly volumes: SimVolumes | null;

  constructor(readonly scenario: ControlScenario, private readonly prng: SeededPrng, private readonly trace: Trace) {
    this.nodes = Array.from({ length: scenario.nodes }, (_, i) => this.makeNode(i));
    this.memberIds = new Set(this.nodes.map((n) => n.id));
    this.network = new Network(this.nodes.map((n) => n.id));
    for (const n of this.nodes) this.availability.set(n.id, 'active');
    this.consensus = new Consensus(this, prng.fork(), scenario.consensus, this.stats);
    const h = scenario.health;
    this.reference = new Reference({
      downAfterMs: h.downAfterMs, slackMs: placementSlackMs,
      health: { downAfterMs: h.downAfterMs, restartGraceMs: h.restartGraceMs, viewDelayMs: peerViewUnheardAfterMs(h) + 1_000, slackMs: healthSlackMs },
    }, {
      availability: (id) => this.availability.get(id) ?? 'active',
      capacity: () => scenario.capacity,
    }, this.stats);
    this.consensus.onAppend = (e) => this.onAppend(e);
    this.volumes = scenario.volume === null ? null : new SimVolumes({
      stats: this.stats, now: () => this.now(), log: (l) => this.log(l), connected: (a, b) => this.connected(a, b), nodeById: (id) => this.nodeById(id),
      caughtUp: (n) => this.caughtUp(n), committed: () => this.reference.store, memberIds: this.memberIds,
    }, scenario.volume);
  }

  private makeNode(i: number): SimNode {
    const id = `n${i + 1}`;
    const runtime = new MemoryRuntime({ clock: this.clock, pullAny: true, pullDelayMs: 50, idPrefix: `${id}-`, historyMax: 1 });
    // Images that fail at once: one that exits a moment after it starts, one that cannot start.
    runtime.program((s) => s.image.startsWith('crash/'), { exitAfterMs: 150, exitCode: 1 });
    runtime.program((s) => s.image.startsWith('nostart/'), { startError: 'exec /serve: exec format error' });
    // A job's runs: the chore exits 0 after its run time.
    if (this.scenario.job !== null) runtime.program((s) => s.image.startsWith('chore/'), { exitAfterMs: this.scenario.job.runMs, exitCode: 0 });
    return new SimNode(id, identityOf(id, i, this.scenario.capacity), runtime, new NodeClock(this.clock, this.scenario.exclusive.rates[i] ?? 1));
  }

  now(): number {
    return this.clock.now();
  }

  log(line: string): void {
    if (this.trace.enabled) this.trace.add(`${(this.clock.now() / 1000).toFixed(1).padStart(6)}s #${this.step} ${line}`);
  }

  connected(a: SimNode, b: SimNode): boolean {
    // A frozen shoal (SIGSTOP, a suspended machine) hears nobody and nobody hears it.
    return a.isUp && b.isUp && !a.clock.frozen && !b.clock.frozen && this.network.sameSide(a.id, b.id);
  }

  /** Starts shoal on every machine. */
  boot(): void {
    for (const n of this.nodes) this.startShoal(n);
  }

  // ---- one step ----

  async runStep(faults: boolean): Promise<void> {
    this.step++;
    this.stats.steps++;
    this.consensus.stepLeadership();
    this.consensus.stepDeliveries();
    this.applyLogs(faults);
    this.noteContacts();
    this.manageLoops();
    await flush();
    await this.advance(this.scenario.stepMs);
    this.checkAfterStep();
  }

  /** Moves simulated time, firing each timer at its due time and running every promise chain between. */
  private async advance(ms: number): Promise<void> {
    const end = this.clock.now() + ms;
    for (;;) {
      const due = this.clock.nextDueMs();
      if (due === null || due > end) break;
      this.clock.advance(Math.max(0, due - this.clock.now()));
      await flush();
      this.checkExclusive();
    }
    this.clock.advance(end - this.clock.now());
    await flush();
    this.checkExclusive();
  }

  /** The fences in the containers act, then no exclusive slot may run twice (at every instant anything changes). */
  private checkExclusive(): void {
    const facts = this.nodes.map((n) => ({ node: n, containers: n.runtime.all() }));
    for (const kill of this.fence.expired(facts)) {
      kill.node.runtime.exit(kill.containerId, 137);
      this.stats.fenceKills++;
      this.log(`FENCE in ${kill.name} on ${kill.node.id}: the lease ran out; killed`);
    }
    this.exclusive.check(facts.map((f) => ({ nodeId: f.node.id, suspended: f.node.clock.suspended, containers: f.node.runtime.all() })), this.clock.now());
    this.volumes?.checkStarts(this.nodes);
    if (this.scenario.job !== null) {
      this.jobs.check(facts.map((f) => ({ nodeId: f.node.id, suspended: f.node.clock.suspended, containers: f.node.runtime.all() })), this.reference.store, this.scenario.job.name, this.clock.now());
    }
  }

  /** Nodes connected to a majority apply some of what they lag; a few stall for a while. */
  private applyLogs(faults: boolean): void {
    const k = this.scenario.consensus;
    const last = this.consensus.lastIndex;
    for (const n of this.nodes) {
      if (!n.isUp || n.clock.frozen || this.step < n.stalledUntil || !this.consensus.hasMajority(n)) continue;
      if (faults && k.applyStall > 0 && this.prng.chance(k.applyStall)) {
        n.stalledUntil = this.step + 1 + this.prng.nextInt(k.applyStallStepsMax);
        this.log(`${n.id} stalls applying until step ${n.stalledUntil}`);
        continue;
      }
      n.applyUpTo(this.consensus.entries, Math.min(last, n.applied + 1 + this.prng.nextInt(k.applyBatchMax)));
    }
  }

  private noteContacts(): void {
    const now = this.clock.now();
    for (const a of this.nodes) {
      if (a.isUp && !a.clock.frozen) {
        if (!this.aliveSince.has(a.id)) this.aliveSince.set(a.id, now);
      } else {
        this.aliveSince.delete(a.id);
      }
      for (const b of this.nodes) {
        const key = `${a.id}>${b.id}`;
        if (a === b || !this.connected(a, b)) {
          this.connectedSince.delete(key);
          if (a !== b && a.isUp && !a.clock.frozen && this.linkOf(a, b) === 'refused') a.refusedAt.set(b.id, now);
          continue;
        }
        if (!this.connectedSince.has(key)) this.connectedSince.set(key, now);
        a.lastHeard.set(b.id, now);
        this.lastContact.set(key, now);
      }
    }
  }

  /**
   * How `from`'s dials to `to` fare now: a machine that is up with shoal stopped refuses the
   * peer port, except in the last `startupSteps` of the stop, when the new shoal listens but
   * answers no handshake yet (the dial hangs, as a dead machine's would); a frozen shoal's
   * connection stays open; a dead machine, a partition or a cut link answer nothing.
   */
  private linkOf(from: SimNode, to: SimNode): PeerLink {
    const reachable = to.state !== 'dead' && this.network.sameSide(from.id, to.id);
    if (this.connected(from, to) || (reachable && to.isUp)) return 'connected';
    if (!reachable || to.state !== 'crashed') return 'silent';
    return to.returnAt - this.step <= startupSteps ? 'silent' : 'refused';
  }

  /**
   * What `from`'s transport and driver would tell its node health of `to`: when it last heard
   * it, how long this incarnation has listened, the link, and whether `to` said goodbye or
   * refused a dial since `from` last heard it.
   */
  contactOf(from: SimNode, to: SimNode): NodeContact {
    const now = this.clock.now();
    const at = from.lastHeard.get(to.id);
    const refusedAt = from.refusedAt.get(to.id);
    return {
      heardAgoMs: at === undefined ? undefined : now - at, watchingForMs: now - from.sessionStartedAt, link: this.linkOf(from, to),
      goodbye: to.goodbyeAt !== null && (at === undefined || at <= to.goodbyeAt),
      refused: refusedAt !== undefined && (at === undefined || at <= refusedAt),
    };
  }

  /** What the health checker needs of every node when `decider`'s node health decides (checkers/health.ts). */
  healthFacts(decider: SimNode): Record<string, HealthFact> {
    const now = this.clock.now();
    const since = (key: string): number | null => {
      const t = this.connectedSince.get(key);
      return t === undefined ? null : now - t;
    };
    const out: Record<string, HealthFact> = {};
    for (const x of this.nodes) {
      if (x === decider) continue;
      const alive = this.aliveSince.get(x.id);
      let relayedForMs: number | null = null;
      for (const y of this.nodes) {
        if (y === x || y === decider) continue;
        const a = this.aliveSince.get(y.id);
        const xy = since(`${y.id}>${x.id}`);
        const yd = since(`${decider.id}>${y.id}`);
        if (a === undefined || xy === null || yd === null) continue;
        const m = Math.min(now - a, xy, yd);
        if (relayedForMs === null || m > relayedForMs) relayedForMs = m;
      }
      const c = this.contactOf(decider, x);
      out[x.id] = {
        aliveForMs: alive === undefined ? null : now - alive, relayedForMs,
        silenceMs: Math.min(c.heardAgoMs ?? Number.POSITIVE_INFINITY, c.watchingForMs),
        restarting: c.goodbye ? 'goodbye' : c.refused && x.state === 'crashed' ? 'refused' : null,
      };
    }
    return out;
  }

  /** Per node: ms since `from` last heard from it, from the world's contact table (null: never). */
  silenceFrom(from: SimNode): Record<string, number | null> {
    const out: Record<string, number | null> = {};
    for (const n of this.nodes) {
      const at = this.lastContact.get(`${from.id}>${n.id}`);
      out[n.id] = n === from ? 0 : at === undefined ? null : this.clock.now() - at;
    }
    return out;
  }

  /** Leader loops run on a node while it believes it leads and has applied an entry of its term (as the supervisor). */
  private manageLoops(): void {
    for (const n of this.nodes) {
      const mayRun = n.isUp && n.session !== null && n.role === 'leader' && n.appliedTerm === n.knownTerm;
      if (n.loops !== null && (!mayRun || n.loops.term !== n.knownTerm)) {
        this.log(`${n.id} stops its loops of term ${n.loops.term}`);
        n.loops.stop();
        n.loops = null;
      }
      if (n.loops === null && mayRun) this.startLoops(n);
    }
  }

  private startLoops(n: SimNode): void {
    const session = n.session as Session;
    const clock = session.clock;
    n.loops = new LeaderRun({
      store: n.store, clock: { now: () => clock.now(), setTimeout: (fn, ms) => clock.setTimer(ms, fn), clearTimeout: (h) => (h as Timer).cancel() },
      logTimeNow: () => this.clock.now(), self: n.id, lease: this.scenario.exclusive.lease, members: () => this.memberIds, health: this.scenario.health,
      silentForMs: (id) => {
        const at = n.lastHeard.get(id);
        return at === undefined ? undefined : this.clock.now() - at;
      },
      peerContact: (id) => this.contactOf(n, this.nodeById(id)),
      voters: () => this.memberIds,
      transferLeadership: (to) => {
        n.lastTransferAt = this.clock.now();
        this.stats.healthTransfers++;
        const moved = this.consensus.transferTo(n, this.nodeById(to));
        this.log(`${n.id} hands leadership to ${to} (node health: a node only it cannot hear)${moved ? '' : ': not possible now'}`);
      },
      lastTransferAgoMs: () => (n.lastTransferAt === undefined ? undefined : this.clock.now() - n.lastTransferAt),
      ...(n.renewals !== null ? { renewals: n.renewals } : {}),
      propose: (data, term, meta) => {
        const origin: LoopOrigin = {
          kind: 'loop', node: n.id, term, key: meta.key, decidedAtMs: clock.now(), readRevision: meta.readRevision,
          loopsRunningMs: meta.runningForMs, silenceMs: meta.key === 'place' ? this.silenceFrom(n) : {},
          ...(meta.key === 'nodes' ? { health: this.healthFacts(n) } : {}),
        };
        return session.guard(this.consensus.propose(n, session, data, term, origin));
      },
      settleOwnProposals: async () => {
        for (;;) {
          const { queued, lastAppended } = this.consensus.pendingOf(session);
          if ((queued === 0 && n.applied >= lastAppended) || n.session !== session) return;
          await new Promise<void>((resolve) => clock.setTimer(50, resolve));
        }
      },
      newTaskId: () => `t${(++this.taskSeq).toString(36).padStart(5, '0')}`,
      log: { debug: () => {}, info: (line) => this.log(`${n.id} ${line}`), warn: (line) => this.log(`${n.id} ${line}`) },
    }, n.knownTerm);
    this.log(`${n.id} starts its loops of term ${n.knownTerm}`);
    n.loops.start();
  }


  private checkAfterStep(): void {
    const view = readCommitted(this.reference.store);
    this.replicas.check(view, {
      everDrained: this.everDrained,
      pendingReplicas: (name) => Math.max(0, ...(this.pendingReplicas.get(name) ?? []).map((p) => p.replicas)),
    });
    this.containers.check(this.nodes.map((n) => ({ nodeId: n.id, containers: n.runtime.all() })), this.reference.placed);
  }

  // ---- the log ----

  private onAppend(e: LogEntry): void {
    const volume = this.scenario.volume?.name;
    const before = volume === undefined ? undefined : volumeRecordOf(this.reference.store, volume);
    this.reference.apply(e);
    if (volume !== undefined && this.volumes !== null) {
      this.volumes.checker.onCommitted(before, volumeRecordOf(this.reference.store, volume), e.index);
      this.stats.volumeFailovers = this.volumes.checker.failovers;
    }
    const o = e.origin;
    if (o.kind === 'loop' && o.key.startsWith('svc:') && tookEffect(e.result)) {
      // The orchestrator acted on a state that includes the operator's change.
      const name = o.key.slice(4);
      const list = this.pendingReplicas.get(name)?.filter((p) => p.index > o.readRevision);
      if (list !== undefined && list.length > 0) this.pendingReplicas.set(name, list);
      else this.pendingReplicas.delete(name);
    }
    if (this.trace.enabled) this.log(`+${e.index} t${e.term} ${describeOrigin(o)}: ${describeResult(e)}`);
  }

  // ---- shoal on a node ----

  nodeById(id: string): SimNode {
    const n = this.nodes.find((x) => x.id === id);
    if (n === undefined) throw new Error(`no node ${id}`);
    return n;
  }

  /** Starts an incarnation of shoal: a session, the agent on the node's runtime, its peer view, and its registration. */
  startShoal(n: SimNode): void {
    const session = new Session(n.clock, n.runtime, n.incarnation, (m) => this.log(`${n.id} ${m}`));
    n.session = session;
    n.sessionStartedAt = this.clock.now();
    n.renewals = new RenewalLog(n.store, () => session.clock.now());
    const consensus = this.consensus;
    const proposer: Pick<RaftNode, 'propose'> = {
      propose: (data) => session.guard(consensus.propose(n, session, data, null, { kind: 'agent', node: n.id, readRevision: n.store.revision })),
    };
    const writer = new StoreAgentWriter(proposer as RaftNode, n.store, n.identity);
    const agent = new Agent({
      owner: { clusterId, nodeId: n.id }, view: new StoreAgentView(n.store), writer,
      caughtUp: () => session.guard(this.caughtUp(n)), runtime: session.runtime, clock: session.clock, log: session.log, limits: simAgentLimits,
      lease: { writer, config: this.scenario.exclusive.lease, boot: n.clock, store: n.leases, checkEveryMs: 100, killTimeoutMs: 500 },
    });
    n.agent = agent;
    n.views = new PeerViewReporter({
      self: n.id, store: n.store, members: () => this.memberIds, heardAgoMs: (id) => this.contactOf(n, this.nodeById(id)).heardAgoMs,
      featureLevel: () => controlFeatureLevel, propose: (data) => proposer.propose(data), clock: session.clock, log: session.log,
      unheardAfterMs: peerViewUnheardAfterMs(this.scenario.health), checkEveryMs: 500,
    });
    n.views.start();
    const register = (): void => {
      writer.register().then(() => {
        if (!session.alive) return;
        agent.start();
        this.volumes?.startLoop(n, session, proposer);
      }, () => { session.clock.setTimer(1_000, register); });
    };
    register();
  }

  /** The agent's read barrier: the node has applied what the leader had committed. */
  caughtUp(n: SimNode): Promise<void> {
    if (!this.consensus.reachesLeader(n)) return Promise.reject(new ShoalError('no_leader', `${n.id} cannot reach a leader`));
    return n.barrier(this.consensus.lastIndex);
  }

  /**
   * kill -9 of shoal (containers keep running), a graceful stop of shoal (the same, after a
   * goodbye to its peers), or the whole machine off (they die too).
   */
  stopNode(n: SimNode, how: 'crashed' | 'dead', downSteps: number, graceful = false): void {
    // kill -9 of a stopped process works; a machine that dies wakes up no more (its next boot is a new one).
    n.clock.thaw();
    n.goodbyeAt = graceful && how === 'crashed' ? this.clock.now() : null;
    if (how === 'dead') n.leases.held.clear();
    n.stop(how);
    n.returnAt = this.step + downSteps;
    if (how === 'dead') {
      for (const c of n.runtime.all()) if (c.state === 'running') n.runtime.exit(c.id, 137);
    }
    this.log(`${how === 'dead' ? 'MACHINE DEATH' : graceful ? 'GRACEFUL STOP' : 'CRASH'} ${n.id} (back at step ${n.returnAt})`);
  }

  /** Shoal starts again on a node, its store rebuilt from disk (up to a few entries short of what it had applied). */
  restartNode(n: SimNode): void {
    const upTo = Math.max(0, n.applied - this.prng.nextInt(20));
    n.reopen(this.consensus.entries, upTo);
    this.stats.restarts++;
    this.log(`RESTART ${n.id} (store rebuilt up to ${upTo})`);
    this.startShoal(n);
  }

  /** Ends every incarnation (the end of a run). */
  dispose(): void {
    for (const n of this.nodes) n.stop('crashed');
  }
}

function describeResult(e: LogEntry): string {
  const r = e.result;
  if (r === null) return 'empty';
  if (!r.ok) return `REFUSED ${r.error.code}`;
  if (r.kind !== 'txn') return `${r.kind} ok`;
  if (!r.succeeded) return 'txn compare failed';
  const ops = r.results.map((x) => (x.kind === 'put' ? `${x.doc.collection.replace('shoal.', '')}/${x.doc.id}` : `-${x.collection.replace('shoal.', '')}/${x.id}`));
  return `txn ok [${ops.slice(0, 6).join(' ')}${ops.length > 6 ? ` +${ops.length - 6}` : ''}]`;
}
