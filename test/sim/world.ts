// The simulated world: nodes, their disks and the network, driven step by step. It plays the
// driver's part for every node (persist, send, apply, advance, in the order the Ready contract
// says), records every observable fact as an event for the checkers, and offers the fault and
// operator actions that the nemesis, the operator and the clients use.

import { RawNode } from '../../src/raft/raw-node.ts';
import { SeededPrng } from '../../src/raft/prng.ts';
import { bootstrapStorage } from '../../src/raft/storage.ts';
import type { ConfState, Entry, Message, MessageType, NodeId, Ready } from '../../src/raft/types.ts';
import { admitMessage } from '../../transport/check-message.ts';
import { CheckerSet } from './checkers/checker-set.ts';
import { Violation, type EntryFact, type SimEvent } from './checkers/events.ts';
import { SimNetwork, type Envelope } from './network.ts';
import type { Scenario } from './scenario.ts';
import { SimNode, termAt, type CrashPoint } from './sim-node.ts';
import { entryDigest } from './hash.ts';
import { HashChainStateMachine } from './state-machine.ts';
import { emptyStats, type SeedStats } from './stats.ts';
import { freezeEntries, freezeMessage } from './freeze.ts';
import type { Trace } from './trace.ts';
import { describeMessage, describeReady } from './trace-format.ts';

const localTypes: ReadonlySet<MessageType> = new Set(['hup', 'beat', 'checkQuorum', 'unreachable', 'snapStatus']);
/** Readies one node may hand out in a row before the world calls it a livelock (applies page by committedBytesMax, so catching up takes many). */
const readiesPerDrainMax = 10_000;

const decoder = new TextDecoder();

export class World {
  readonly nodes = new Map<NodeId, SimNode>();
  readonly network: SimNetwork;
  readonly checkers = new CheckerSet();
  readonly stats: SeedStats = emptyStats();
  /** Simulation steps; a tick happens every `stepsPerTick` steps. */
  now = 0;
  tick = 0;
  /** Membership as of the highest applied configuration seen anywhere. */
  latestConf: ConfState | null = null;
  private latestConfIndex = 0;
  private readonly confIndexes = new Set<number>();
  private readonly touched = new Set<SimNode>();
  /** Read contexts that a leader's heartbeat round carried (the ReadOnly key: asker, context). */
  private readonly readRounds = new Set<string>();
  private nextNodeNumber = 1;
  /** Told about every acknowledged proposal (the liveness phase waits for its own). */
  onAck: ((node: SimNode, payload: string, index: number) => void) | null = null;
  /** A transfer in progress: the target, and the tick by which it counts as completed. */
  transfer: { to: NodeId; until: number } | null = null;

  private readonly schedPrng: SeededPrng;
  private readonly nodePrng: SeededPrng;
  readonly faultPrng: SeededPrng;

  constructor(readonly scenario: Scenario, prng: SeededPrng, readonly trace: Trace) {
    this.network = new SimNetwork(prng.fork(), { ...scenario.network });
    this.schedPrng = prng.fork();
    this.nodePrng = prng.fork();
    this.faultPrng = prng.fork();
  }

  // ---- Life cycle of nodes ------------------------------------------------------------------

  /** Creates and boots the founding members of a new cluster. */
  found(voters: number, learners: number): void {
    const ids = Array.from({ length: voters + learners }, () => this.newId());
    const v = ids.slice(0, voters);
    const l = ids.slice(voters);
    const data = HashChainStateMachine.initial(1).serialize();
    for (const id of ids) {
      const node = new SimNode(id, this.tick);
      node.disk.format((s) => bootstrapStorage(s, v, l, data));
      this.nodes.set(id, node);
      this.boot(node);
    }
    this.stats.nodes = ids.length;
    this.latestConf = { voters: v, votersOutgoing: [], learners: l, learnersNext: [], autoLeave: false };
    this.latestConfIndex = 1;
    for (const n of this.nodes.values()) n.everMember = true;
  }

  /** Starts a brand-new empty node, to be added to the cluster by a membership change. */
  spawn(): SimNode {
    const node = new SimNode(this.newId(), this.tick);
    this.nodes.set(node.id, node);
    this.boot(node);
    this.stats.nodes++;
    this.log(`${node.id} spawned (empty)`);
    return node;
  }

  crash(node: SimNode, why: string): void {
    node.raw = null;
    node.state = 'crashed';
    node.crashArm = null;
    const lost = node.disk.crash(this.faultPrng);
    node.pending.clear();
    node.reads = [];
    this.stats.crashes++;
    this.stats.unsyncedWritesLost += lost;
    this.log(`${node.id} CRASH ${why}; ${lost} unsynced writes lost`);
  }

  armCrash(node: SimNode, at: CrashPoint): void {
    node.crashArm = at;
    node.crashArmedAt = this.tick;
  }

  restart(node: SimNode): void {
    node.life++;
    node.state = 'up';
    this.stats.restarts++;
    this.boot(node);
  }

  /** A node removed from the cluster (or never added: `removed` false) is shut down for good. */
  stop(node: SimNode, removed = true): void {
    node.raw = null;
    node.state = 'stopped';
    node.pending.clear();
    node.reads = [];
    if (removed) this.stats.nodesRemoved++;
    this.log(`${node.id} stopped (${removed ? 'removed from the cluster' : 'its addition was refused'})`);
  }

  private newId(): NodeId {
    return `n${this.nextNodeNumber++}`;
  }

  /**
   * Starts the core on the node's disk. The state machine comes back from its own checkpoint
   * when that is newer than the log's snapshot; otherwise from the snapshot, telling the core
   * either the snapshot index or 0 as applied.
   */
  private boot(node: SimNode): void {
    const storage = node.disk.live;
    const snap = storage.snapshot();
    const cp = node.disk.liveCheckpoint;
    let applied: number;
    node.replayUpTo = 0;
    if (cp !== null && cp.index > snap.meta.index) {
      node.sm = HashChainStateMachine.restore(cp.data, cp.index);
      applied = cp.index;
    } else {
      node.sm = HashChainStateMachine.restore(snap.data, snap.meta.index);
      applied = this.nodePrng.chance(0.5) ? snap.meta.index : 0;
      if (applied === 0) node.replayUpTo = snap.meta.index;
    }
    const k = this.scenario.raft;
    node.raw = new RawNode({
      id: node.id, prng: this.nodePrng.fork(), applied,
      electionTimeoutTicks: k.electionTimeoutTicks, heartbeatIntervalTicks: k.heartbeatIntervalTicks,
      appendBytesMax: k.appendBytesMax, appendsInflightMax: k.appendsInflightMax,
      checkQuorum: k.checkQuorum, preVote: k.preVote, commitNotice: k.commitNotice, followerCommit: k.followerCommit, followerReadQuorum: k.followerReadQuorum,
      committedBytesMax: k.committedBytesMax, uncommittedBytesMax: k.uncommittedBytesMax,
    }, storage);
    const hs = storage.hardStateNow();
    this.log(`${node.id} boot life ${node.life}: term ${hs.term} vote '${hs.vote}' commit ${hs.commit} applied ${applied} sm ${node.sm.index} log [${storage.firstIndex()}, ${storage.lastIndex()}]`);
    node.role = 'follower';
    node.term = -1;
    node.commit = 0;
    node.leader = '';
    this.emit({ kind: 'boot', node: node.id, life: node.life, term: hs.term, vote: hs.vote, commit: hs.commit });
    this.emit({ kind: 'restore', node: node.id, life: node.life, index: node.sm.index, stateDigest: node.sm.digest(), reason: 'boot' });
    this.observe(node);
    this.touched.add(node);
  }

  // ---- Driving ------------------------------------------------------------------------------

  /** Runs one tick: the nodes' clocks advance, then the network runs for `stepsPerTick` steps. */
  runTick(): void {
    this.tickNodes();
    for (let s = 0; s < this.scenario.stepsPerTick; s++) this.step();
    this.tick++;
    this.stats.ticks = this.tick;
    if (this.transfer !== null && this.tick > this.transfer.until) this.transfer = null;
  }

  private tickNodes(): void {
    for (const node of this.shuffledUpNodes()) {
      if (node.crashArm !== null && this.tick - node.crashArmedAt > 5) this.crash(node, 'armed crash, no Ready came');
      else if (!this.schedPrng.chance(this.scenario.faults.tickSkip)) this.input(node, (raw) => raw.tick());
    }
    this.settle();
  }

  private step(): void {
    for (const env of this.network.take(this.now)) this.deliver(env);
    this.settle();
    this.now++;
  }

  private deliver(env: Envelope): void {
    const m = env.msg;
    const to = this.nodes.get(m.to);
    const ok = !env.lost && to !== undefined && to.isUp() && !this.network.isCut(env.sender, m.to);
    if (!ok || to === undefined) {
      this.onUndelivered(env);
      return;
    }
    if (this.trace.enabled) this.log(`deliver ${describeMessage(m)}`);
    if (m.type === 'persisted') this.stats.persistedNotices++;
    this.input(to, (raw) => {
      const before = m.type === 'persisted' ? raw.status().commit : 0;
      raw.step(m);
      // A follower that committed on the leader's notice alone (followerCommit).
      if (m.type === 'persisted' && raw.status().commit > before) this.stats.followerCommits++;
      // A read answered with no heartbeat round, in a cluster of several voters (followerReadQuorum).
      if (m.type === 'readIndexResp' && !this.readRounds.has(`${m.to}\u0000${m.context ?? ''}`)
        && raw.status().confState.voters.length > 1) this.stats.followerReads++;
    });
    if (m.type === 'snap') this.toSender(env, (raw) => raw.reportSnapshot(m.to, true));
  }

  private onUndelivered(env: Envelope): void {
    const m = env.msg;
    if (this.trace.enabled) this.log(`drop ${describeMessage(m)}`);
    if (m.type === 'snap') this.toSender(env, (raw) => raw.reportSnapshot(m.to, false));
    else if (this.schedPrng.chance(0.2)) {
      // Half the reports are of a lost connection, half of a dropped message (a full queue).
      const connectionLost = this.schedPrng.chance(0.5);
      this.toSender(env, (raw) => raw.reportUnreachable(m.to, connectionLost));
    }
  }

  /** Tells the sender about a send, if it is still the life that sent it. */
  private toSender(env: Envelope, fn: (raw: RawNode) => void): void {
    const from = this.nodes.get(env.sender);
    if (from !== undefined && from.isUp() && from.life === env.fromLife) this.input(from, fn);
  }

  /**
   * Feeds one input to a node's core, observes it, and handles its Ready now or, sometimes,
   * later in the step (so Readies batch several inputs).
   */
  input(node: SimNode, fn: (raw: RawNode) => void): void {
    const raw = node.raw;
    if (raw === null) return;
    fn(raw);
    this.observe(node);
    this.touched.add(node);
    if (!this.schedPrng.chance(this.scenario.faults.readyDefer)) this.drain(node);
  }

  /** Handles every pending Ready of every node touched, then lets the checkers see them settled. */
  settle(): void {
    for (const node of this.touched) this.drain(node);
    for (const node of this.touched) {
      if (!node.isUp()) continue;
      this.emit({ kind: 'settled', node: node.id, life: node.life, term: node.term, role: node.role, commit: node.commit, log: node.log });
    }
    this.touched.clear();
  }

  private drain(node: SimNode): void {
    for (let n = 0; node.raw !== null && node.raw.hasReady(); n++) {
      if (n >= readiesPerDrainMax) throw new Violation('ready-contract', `${node.id} still has a Ready after ${n} in a row`);
      this.handleReady(node, node.raw);
    }
  }

  private handleReady(node: SimNode, raw: RawNode): void {
    const rd = raw.ready();
    const prev = node.disk.live.hardStateNow();
    const hs = rd.hardState;
    this.emit({
      kind: 'ready', node: node.id, mustSync: rd.mustSync, entries: rd.entries.length, snapshot: rd.snapshot !== undefined,
      termOrVoteChanged: hs !== undefined && (hs.term !== prev.term || hs.vote !== prev.vote),
    });
    if (this.trace.enabled) this.log(`${node.id} ready ${describeReady(rd)}`);
    if (node.crashArm === 'beforePersist') return this.midReadyCrash(node, 'before persisting its Ready');
    this.persist(node, rd);
    if (node.crashArm === 'afterPersist') return this.midReadyCrash(node, 'after persisting its Ready, before sending');
    for (const m of rd.messages) this.send(node, m);
    const confChanged = this.apply(node, rd);
    for (const rs of rd.readStates) {
      this.emit({ kind: 'readState', node: node.id, context: rs.context, index: rs.index });
      node.reads.push(rs);
    }
    raw.advance(rd);
    this.observe(node);
    if (confChanged) this.noteConf(node, raw);
    this.serveReads(node);
  }

  private midReadyCrash(node: SimNode, why: string): void {
    this.stats.crashesMidReady++;
    this.crash(node, why);
  }

  private persist(node: SimNode, rd: Ready): void {
    node.disk.write({ snapshot: rd.snapshot, entries: rd.entries, hardState: rd.hardState }, rd.mustSync);
    if (rd.entries.length > 0) {
      freezeEntries(rd.entries);
      this.emit({ kind: 'append', node: node.id, entries: entryFacts(node, rd.entries) });
    }
    const hs = rd.hardState;
    if (hs !== undefined) this.emit({ kind: 'hardState', node: node.id, life: node.life, term: hs.term, vote: hs.vote, commit: hs.commit });
  }

  private send(node: SimNode, m: Message): void {
    if (localTypes.has(m.type) || m.to === node.id) {
      throw new Violation('ready-contract', `${node.id} handed out a message it must not send: ${describeMessage(m)}`);
    }
    // What the real transport refuses on arrival: a message in another node's name (a request
    // relayed twice used to keep its first sender's) or one a correct node never sends.
    const refused = admitMessage(m, node.id, m.to);
    if (refused !== undefined) throw new Violation('ready-contract', `${node.id} sent what a transport refuses (${refused.reason}: ${refused.detail}): ${describeMessage(m)}`);
    freezeMessage(m);
    if (m.type === 'heartbeat' && m.context !== undefined) this.readRounds.add(m.context);
    if (m.type === 'snap') {
      this.stats.snapshotsSent++;
      this.refreshStaleSnapshot(node, m);
    }
    this.network.send(node.id, m, node.life, this.now);
  }

  /** Applies the Ready's snapshot and committed entries; returns whether membership may have changed. */
  private apply(node: SimNode, rd: Ready): boolean {
    let confChanged = false;
    if (rd.snapshot !== undefined) {
      const meta = rd.snapshot.meta;
      node.sm = HashChainStateMachine.restore(rd.snapshot.data, meta.index);
      node.replayUpTo = 0;
      this.stats.snapshotsInstalled++;
      confChanged = true;
      this.emit({ kind: 'restore', node: node.id, life: node.life, index: meta.index, stateDigest: node.sm.digest(), reason: 'snapshot' });
    }
    const persistedCommit = node.disk.live.hardStateNow().commit;
    for (const e of rd.committedEntries) {
      if (e.index <= node.replayUpTo) {
        this.emit({ kind: 'reapply', node: node.id, life: node.life, index: e.index, digest: entryDigestOf(e) });
        continue;
      }
      const digest = entryDigestOf(e);
      node.sm.apply(e, digest);
      this.emit({ kind: 'apply', node: node.id, life: node.life, index: e.index, digest, stateDigest: node.sm.digest(), persistedCommit });
      if (e.kind === 'conf') {
        confChanged = true;
        if (!this.confIndexes.has(e.index)) {
          this.confIndexes.add(e.index);
          this.stats.confChangesApplied++;
        }
      } else if (e.data.length > 0) {
        this.maybeAck(node, e.index, digest, e.data);
      }
    }
    return confChanged;
  }

  private maybeAck(node: SimNode, index: number, digest: string, data: Uint8Array): void {
    if (node.pending.size === 0) return;
    const payload = decoder.decode(data);
    if (!node.pending.delete(payload)) return;
    this.stats.acked++;
    this.emit({ kind: 'ack', node: node.id, index, digest, payload });
    if (this.onAck !== null) this.onAck(node, payload, index);
  }

  private serveReads(node: SimNode): void {
    if (node.reads.length === 0) return;
    const waiting = [];
    for (const rs of node.reads) {
      if (rs.index > node.sm.index) {
        waiting.push(rs);
        continue;
      }
      this.stats.readsServed++;
      this.emit({ kind: 'readServed', node: node.id, context: rs.context, index: rs.index, applied: node.sm.index });
    }
    node.reads = waiting;
  }

  /** Tracks the newest applied membership, and plans to stop the nodes it removed. */
  private noteConf(node: SimNode, raw: RawNode): void {
    if (node.sm.index <= this.latestConfIndex) return;
    const cs = raw.confState();
    this.latestConf = cs;
    this.latestConfIndex = node.sm.index;
    this.log(`conf at ${node.sm.index}: voters [${cs.voters}] outgoing [${cs.votersOutgoing}] learners [${cs.learners}] next [${cs.learnersNext}]`);
    const members = membersOf(cs);
    for (const n of this.nodes.values()) {
      if (members.has(n.id)) n.everMember = true;
      else if (n.everMember && n.removedAt === 0) n.removedAt = node.sm.index;
    }
  }

  /**
   * Stops removed nodes, some ticks after every other member has applied the change that removed
   * them and has its commit index past that change on disk. Sooner is not safe for liveness: a
   * change takes effect when applied, not when appended, so a member that restarts without
   * knowing the change committed is back in the old configuration and needs the removed node's
   * vote. (The core writes a commit-only hard state without sync, so "applied" is not enough.)
   */
  stopRemoved(): void {
    const conf = this.latestConf;
    if (conf === null) return;
    const members = membersOf(conf);
    for (const n of this.nodes.values()) {
      if (n.removedAt === 0 || n.state === 'stopped') continue;
      if (n.stopAt < 0) {
        let known = true;
        for (const m of this.nodes.values()) {
          if (!members.has(m.id) || m.state === 'stopped') continue;
          if ((m.isUp() && m.sm.index < n.removedAt) || m.disk.durableCommit() < n.removedAt) known = false;
        }
        if (known) n.stopAt = this.tick + this.faultPrng.nextInt(30);
      } else if (this.tick >= n.stopAt) {
        this.stop(n);
      }
    }
  }

  /** Takes a snapshot of the node's state machine and compacts its log, keeping `keep` entries. */
  compact(node: SimNode, keep: number): void {
    const raw = node.raw;
    const s = node.disk.live;
    const index = node.sm.index;
    if (raw === null || index <= s.snapshot().meta.index) return;
    const compactTo = Math.max(s.firstIndex() - 1, index - keep);
    node.disk.write({ createSnapshot: { index, confState: raw.confState(), data: node.sm.serialize() }, compact: compactTo }, true);
    this.stats.compactions++;
    this.log(`${node.id} snapshot at ${index}, log compacted through ${compactTo}`);
  }

  /**
   * The core sends the snapshot in storage, which may predate the membership change that added
   * the recipient; the recipient rightly ignores a snapshot that does not list it. A driver that
   * compacts eagerly must then take a fresh snapshot, or the new member never catches up. This
   * driver does, on seeing such a message go out; the next attempt carries the fresh one.
   */
  private refreshStaleSnapshot(node: SimNode, m: Message): void {
    const snap = m.snapshot;
    if (snap === undefined || node.raw === null || membersOf(snap.meta.confState).has(m.to)) return;
    const index = node.sm.index;
    if (index <= node.disk.live.snapshot().meta.index) return;
    node.disk.write({ createSnapshot: { index, confState: node.raw.confState(), data: node.sm.serialize() } }, true);
    this.log(`${node.id} snapshot at ${index} (its snapshot at ${snap.meta.index} predates ${m.to})`);
  }

  /** Saves the state machine on its own, so a restart resumes from its applied index. */
  checkpoint(node: SimNode): void {
    if (!node.isUp()) return;
    node.disk.write({ checkpoint: { index: node.sm.index, data: node.sm.serialize() } }, true);
    this.stats.checkpoints++;
  }

  /** Reads the node's status into its observed fields and reports role or term changes. */
  private observe(node: SimNode): void {
    const raw = node.raw;
    if (raw === null) return;
    const s = raw.status();
    node.commit = s.commit;
    node.leader = s.leader;
    if (s.role === node.role && s.term === node.term) return;
    node.role = s.role;
    node.term = s.term;
    this.emit({ kind: 'role', node: node.id, life: node.life, term: s.term, role: s.role });
    if (this.trace.enabled) this.log(`${node.id} is ${s.role} in term ${s.term}`);
    if (s.role === 'leader' && this.transfer !== null && this.transfer.to === node.id) {
      this.stats.transfersCompleted++;
      this.transfer = null;
    }
  }

  emit(e: SimEvent): void {
    this.checkers.observe(e);
  }

  log(line: string): void {
    if (this.trace.enabled) this.trace.add(`[${this.tick}.${this.now}] ${line}`);
  }

  // ---- Queries for the actors ---------------------------------------------------------------

  upNodes(): SimNode[] {
    const out: SimNode[] = [];
    for (const n of this.nodes.values()) if (n.isUp()) out.push(n);
    return out;
  }

  private shuffledUpNodes(): SimNode[] {
    return this.schedPrng.shuffle(this.upNodes());
  }

  /** The up node that is leader in the highest term, if any. */
  leader(): SimNode | undefined {
    let best: SimNode | undefined;
    for (const n of this.nodes.values()) {
      if (n.isUp() && n.role === 'leader' && (best === undefined || n.term > best.term)) best = n;
    }
    return best;
  }

  /** Final figures for the stats, from the checkers and the network. */
  finishStats(): SeedStats {
    this.stats.elections = this.checkers.elections.elections();
    this.stats.commitIndex = this.checkers.commits.committed.maxIndex;
    this.stats.messagesSent = this.network.sent;
    this.stats.messagesLost = this.network.lost;
    this.stats.messagesDuplicated = this.network.duplicated;
    return this.stats;
  }
}

export function membersOf(cs: ConfState): Set<NodeId> {
  return new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext]);
}

function entryFacts(node: SimNode, entries: Entry[]): EntryFact[] {
  const first = entries[0] as Entry;
  let prevTerm = termAt(node.disk.live, first.index - 1);
  return entries.map((e) => {
    const f: EntryFact = { index: e.index, term: e.term, prevTerm, digest: entryDigestOf(e) };
    prevTerm = e.term;
    return f;
  });
}

const digests = new WeakMap<Entry, string>();

/** Entries are shared by reference between nodes in the simulation, so their digests are cached. */
function entryDigestOf(e: Entry): string {
  let d = digests.get(e);
  if (d === undefined) {
    d = entryDigest(e);
    digests.set(e, d);
  }
  return d;
}
