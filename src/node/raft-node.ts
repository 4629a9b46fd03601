// The node driver: wires the consensus core to storage, transport and the state machine.
//
// One loop turns each Ready into, in order: a durable write, sends, applies, advance() — the
// order the core's safety depends on. Messages and proposals arriving while a write is in
// flight are stepped into the core at once; they come out in the next Ready.

import type { Leadership, LeaderLog, PeerContact } from '../ports/leadership.ts';
import type { MembershipView } from '../ports/membership-view.ts';
import type { ProposalResult, Proposer } from '../ports/proposer.ts';
import type { ReadBarrier } from '../ports/read-barrier.ts';
import type { TermSource } from '../ports/term-source.ts';
import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { RawNode } from '../raft/raw-node.ts';
import { SeededPrng } from '../raft/prng.ts';
import {
  NONE, ProposalDroppedError,
  type ConfChange, type ConfState, type Entry, type HardState, type Message, type NodeId, type Ready, type Role, type Status,
} from '../raft/types.ts';
import { ShoalError } from '../errors.ts';
import type { MessageRefusal, PeerStats, Transport } from '../../transport/types.ts';
import type { NodeStorage } from './node-storage.ts';
import type { StateMachine } from '../base/state-machine.ts';
import { Membership, type MemberRecord } from '../resources/membership.ts';
import { checkSnapshotData, decodeSnapshotData, type NodeState } from './snapshot-data.ts';
import { Counter, Histogram, latencyBuckets } from '../base/metrics.ts';
import { decodeEntry, encodeCommandEnvelope, encodeFeatureLevelEnvelope, restampLogTime, type DecodedEntry } from './envelope.ts';
import { featureLevelHandover, featureLevelInitial, featureLevelLeaderClock, featureLevelMax } from '../base/feature-level.ts';
import { ProposalBook } from './proposals.ts';
import { LogClock } from './log-clock.ts';
import { translateDrop } from './drop-error.ts';
import { ReadWaiters } from './read-waiters.ts';
import { SnapshotPolicy } from './snapshot-policy.ts';
import { DiskStallWatch } from './disk-stall.ts';
import { FeatureLevelRaiser } from './feature-level-raiser.ts';
import { PeerSilence } from './peer-silence.ts';
import type { Logger } from '../log.ts';

/** The process's one logger interface (src/log.ts); exported here under its old name too. */
export type { Logger } from '../log.ts';

export interface RaftNodeOptions {
  id: NodeId;
  storage: NodeStorage;
  transport: Transport;
  stateMachine: StateMachine;
  tickMs?: number;
  electionTimeoutTicks?: number;
  heartbeatIntervalTicks?: number;
  /**
   * When to snapshot (see snapshot-policy.ts): at least snapshotEntries applied entries since
   * the last snapshot, and either snapshotIntervalMs (times a random factor in [1, 2)) since it
   * or snapshotEntriesMax (times a factor in [1/2, 1)) entries since it. snapshotIntervalMs 0
   * takes one as soon as snapshotEntries have been applied.
   */
  snapshotEntries?: number;
  snapshotIntervalMs?: number;
  snapshotEntriesMax?: number;
  /** Draws the snapshot factors, uniform in [0, 1) (tests pin it). */
  random?: () => number;
  /** Entries kept in the log behind a snapshot, so slow followers catch up without one. */
  logKeepEntries?: number;
  proposalTimeoutMs?: number;
  appendBytesMax?: number;
  appendsInflightMax?: number;
  uncommittedBytesMax?: number;
  /**
   * Peers to talk to while this node knows no members yet (a node joining an existing cluster
   * with an empty log): it must be able to answer the leader before the snapshot that tells it
   * the membership arrives.
   */
  seedPeers?: MemberRecord[];
  /**
   * Where to dial a member (default: its record's peer address). The node's address book
   * (peer-addresses.ts) answers with where the member said it is now, before a leader commits it.
   */
  peerAddressOf?: (m: MemberRecord) => string;
  /** The highest feature level this node applies (default: this build's; tests lower it to play an older release). */
  featureLevelMax?: number;
  /** Proposals waiting to be applied here (queued ones included); beyond it propose() refuses with `overloaded`. */
  proposalsPendingMax?: number;
  /** Linearizable reads waiting for an index or for the applied index; beyond it readBarrier() refuses with `overloaded`. */
  readsPendingMax?: number;
  /**
   * A durable write that has not completed after this long marks the disk stalled: the node
   * refuses writes and reads (disk_stalled) until it completes. A leader's heartbeats wait for
   * its write, so the followers elect another leader meanwhile. 0 disables the check.
   */
  diskStallMs?: number;
  logger?: Logger;
}

export type { ProposalResult };

interface Pending<T> {
  resolve: (v: T) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

/** A call waiting for a condition on this node's state (see waitFor). */
interface Wait extends Pending<void> {
  done: () => boolean;
}

export interface NodeEvents {
  leaderChange: [{ leader: NodeId; term: number; role: Role }];
  applied: [number];
  /** The transport's connection to this peer closed. */
  peerDisconnected: [NodeId];
  /** The committed cluster feature level moved (src/base/feature-level.ts). */
  featureLevel: [number];
  /**
   * The node stopped for good: `failure` says why (node_failed, upgrade_required, removed). The
   * process should close its API and exit with the code that failure means.
   */
  failed: [ShoalError];
  error: [Error];
}

/** Why each bound refused something, and how often (for the metrics). */
export interface OverloadCounts {
  proposals: number;
  reads: number;
}

const quietLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * The node driver. Parts above it (loops, agents, network and certificate code) hold only the
 * narrow ports of src/ports/ it implements; the composition root (src/server/) holds the node.
 */
export class RaftNode extends EventEmitter<NodeEvents> implements Proposer, ReadBarrier, TermSource, MembershipView, Leadership, LeaderLog {
  readonly id: NodeId;
  readonly membership = new Membership();
  private raw!: RawNode;
  private readonly opts: Required<Omit<RaftNodeOptions, 'logger'>> & { logger: Logger };
  private readonly incarnation: string;
  private seq = 0;
  /** Proposals not yet applied here; the queued ones are stepped into the core together (one append). */
  private readonly book = new ProposalBook();
  /** Entries refused because their proposer term was not their own (a proposal that outlived its term). */
  staleProposals = 0;
  /**
   * A hard state whose only change was the commit index, not yet written: the commit index
   * need not be durable (a restart learns it again), so it rides along with the next write.
   */
  private unsavedHardState: HardState | undefined;
  /** Linearizable reads waiting for a read index or for the applied index (src/node/read-waiters.ts). */
  private readonly reads: ReadWaiters;
  /**
   * Calls waiting for this node's state to change (transfers, membership changes, settling):
   * checked whenever it does, failed when the node stops. Kept here rather than as listeners on
   * the node's events, so no number of them, and no exit path, leaves one behind.
   */
  private readonly waits = new Set<Wait>();
  /** How many times the connection to each peer closed (a transfer gives up on its target's). */
  private readonly disconnects = new Map<NodeId, number>();
  private ticker: NodeJS.Timeout | undefined;
  private wakeUp: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;
  private state: 'new' | 'running' | 'stopping' | 'stopped' = 'new';
  private applied = 0;
  /** When to snapshot and compact, and the snapshot in progress (src/node/snapshot-policy.ts). */
  private readonly snapshots: SnapshotPolicy;
  private term = 0;
  private leader: NodeId = NONE;
  private role: Role = 'follower';
  private fatal: Error | undefined;
  /** Why this node cannot serve (see `failure`); set once, never cleared. */
  private failed: ShoalError | undefined;
  /** Whether the durable write in progress has run past diskStallMs (src/node/disk-stall.ts). */
  private readonly diskStall: DiskStallWatch;
  /** The committed cluster feature level (src/base/feature-level.ts). */
  private level = featureLevelInitial;
  /** The leader's raising of the committed level (src/node/feature-level-raiser.ts). */
  private readonly levelRaiser: FeatureLevelRaiser;
  /** The leader's log clock: started when this node becomes leader (src/node/log-clock.ts). */
  private readonly logClock = new LogClock();
  /** The term of the last applied entry (see appliedTerm). */
  private lastAppliedTerm = 0;
  /** When a message from each peer last arrived (src/node/peer-silence.ts). */
  private readonly peerSilence = new PeerSilence();
  /** Ids removed from the cluster (replicated: from applied conf changes and snapshots). */
  private readonly removedIds = new Set<NodeId>();
  /** Log indexes of invalid entries already logged by this process (each is logged once). */
  private readonly invalidLogged = new Set<number>();
  /** Entries applied as no-ops because their bytes were not a valid envelope. */
  invalidEntries = 0;
  readonly overloads: OverloadCounts = { proposals: 0, reads: 0 };
  /** Conf change entries applied here; membership calls wait on it. */
  private confChangeCount = 0;
  leaderChanges = 0;
  /** Seconds from propose() to the entry applied here. */
  readonly proposalLatency = new Histogram('shoal_proposal_duration_seconds', 'Time from proposing a write to applying it on the proposing node.', latencyBuckets);
  readonly snapshotDuration = new Histogram('shoal_snapshot_duration_seconds', 'Time to take a snapshot of the applied state: serialize, write, sync, compact the log.', latencyBuckets);
  /** Outcomes of the proposals made here (a refusal before proposing, as `overloaded`, is not one). */
  readonly proposalsCommitted = new Counter('shoal_proposals_committed_total', 'Proposals made on this node that were committed and applied here.');
  readonly proposalsFailed = new Counter('shoal_proposals_failed_total', 'Proposals made on this node that failed, by error code (for timeout and leader_changed the outcome is unknown).', ['code']);
  /** Whether the one-line-per-write debug lines are written (docs/monitoring.md, "Following one write"). */
  private readonly debugWrites: boolean;

  constructor(options: RaftNodeOptions) {
    super();
    this.id = options.id;
    this.opts = {
      tickMs: 100, electionTimeoutTicks: 10, heartbeatIntervalTicks: 1,
      snapshotEntries: 10_000, snapshotIntervalMs: 30_000, snapshotEntriesMax: 100_000, random: Math.random, logKeepEntries: 5_000,
      proposalTimeoutMs: 10_000, appendBytesMax: 1 << 20, appendsInflightMax: 256,
      uncommittedBytesMax: 64 << 20, seedPeers: [], peerAddressOf: (m: MemberRecord) => m.peerAddress, proposalsPendingMax: 10_000, readsPendingMax: 10_000, diskStallMs: 5_000,
      featureLevelMax, logger: quietLogger, ...options,
    };
    this.incarnation = `${this.id}/${randomBytes(6).toString('hex')}`;
    this.debugWrites = this.opts.logger.isLevelEnabled?.('debug') === true;
    this.reads = new ReadWaiters({
      ask: (ctx) => { this.raw.readIndex(ctx); this.notify(); },
      holdsWithoutLeader: () => this.level >= featureLevelHandover,
    });
    this.snapshots = new SnapshotPolicy(this.opts, this.opts.storage, this.opts.stateMachine, this.snapshotDuration, {
      capture: () => this.captureForSnapshot(),
      flushHardState: () => this.flushHardState(),
      failed: (err) => { if (this.state === 'running') this.die(err); },
      ended: () => this.notify(),
    });
    this.diskStall = new DiskStallWatch(this.opts.diskStallMs, {
      running: () => this.state === 'running',
      isLeader: () => this.isLeader,
      stalled: (err) => this.failAllPending(err),
    }, this.opts.logger);
    this.levelRaiser = new FeatureLevelRaiser(this.id, this.opts.featureLevelMax, {
      members: () => this.memberIds(),
      peers: () => this.opts.transport.stats(),
      propose: (level) => this.proposeFeatureLevel(level),
    }, this.opts.logger);
  }

  get log(): Logger {
    return this.opts.logger;
  }

  /** Restores the state machine from the latest snapshot and starts ticking and processing. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`start: node is ${this.state}`);
    const storage = this.opts.storage;
    const snap = storage.log.snapshot();
    this.restoreState(snap.data);
    this.applied = snap.meta.index;
    this.lastAppliedTerm = snap.meta.term;
    this.snapshots.restart(snap.meta.index);
    this.raw = new RawNode({
      id: this.id,
      prng: new SeededPrng(randomBytes(4).readUInt32LE(0)),
      electionTimeoutTicks: this.opts.electionTimeoutTicks,
      heartbeatIntervalTicks: this.opts.heartbeatIntervalTicks,
      applied: snap.meta.index,
      appendBytesMax: this.opts.appendBytesMax,
      appendsInflightMax: this.opts.appendsInflightMax,
      uncommittedBytesMax: this.opts.uncommittedBytesMax,
      // Followers answer forwarded writes when they apply them, so they are told of those
      // commits at once; the rest ride on the next append or heartbeat (docs/architecture.md).
      commitNotice: 'proposers',
      // And a follower that forwarded a write commits it by itself once it holds it durably
      // and hears that the leader does, when the two are a quorum (docs/architecture.md).
      followerCommit: true,
      // A follower's linearizable read is confirmed by that follower and the leader, when the
      // two are a quorum, without a heartbeat round (docs/architecture.md).
      followerReadQuorum: true,
      logger: { debug: (m) => this.log.debug(m), info: (m) => this.log.info(m), warn: (m) => this.log.warn(m) },
    }, storage.log);
    this.term = this.raw.status().term;
    const t = this.opts.transport;
    t.onMessage((m) => this.receive(m));
    t.onUnreachable((id, why) => {
      this.withCore(() => this.raw.reportUnreachable(id, why === 'disconnected'));
      if (why !== 'disconnected') return;
      this.disconnects.set(id, (this.disconnects.get(id) ?? 0) + 1);
      this.emit('peerDisconnected', id);
      this.checkWaits();
    });
    t.onSnapshotStatus((id, ok) => this.withCore(() => this.raw.reportSnapshot(id, ok)));
    t.onRefused?.((id, reason) => { if (reason === 'removed') this.learnRemoved(id); });
    this.syncPeers();
    this.state = 'running';
    this.ticker = setInterval(() => this.onTick(), this.opts.tickMs);
    this.loopDone = this.loop().catch((err: unknown) => this.die(err));
  }

  // ---- client operations ------------------------------------------------------------------

  /**
   * Proposes `data`; resolves with its log index and the state machine's result once applied here.
   * `featureLevel`: the cluster feature level the command needs; refused with feature_not_enabled
   * while the committed level is lower, so no member is ever sent a command it cannot apply.
   */
  propose(data: Uint8Array, opts: { featureLevel?: number; term?: number } = {}): Promise<ProposalResult> {
    this.checkServing();
    if (opts.term !== undefined && (opts.term !== this.term || this.role !== 'leader')) {
      // A leader loop of a term this node no longer leads: its decision must not reach the log.
      throw new ShoalError('stale_term', `decided in term ${opts.term}, but this node is ${this.role === 'leader' ? 'leader' : this.role} in term ${this.term}`, { fenceTerm: opts.term, term: this.term });
    }
    const needed = opts.featureLevel ?? featureLevelInitial;
    if (needed > this.level) {
      throw new ShoalError('feature_not_enabled', `this command needs cluster feature level ${needed}; the cluster runs at ${this.level}: a member runs an older release (upgrade every member), or the cluster has just started and its leader raises the level in a moment (retry)`, { needed, committed: this.level });
    }
    this.checkBound(this.book.size, this.opts.proposalsPendingMax, 'proposals', 'proposalsPendingMax');
    const seq = ++this.seq;
    // From level 3 the envelope names the term it was proposed in, so the node may propose it
    // again once that term has passed without it (src/node/proposals.ts).
    const reproposable = this.level >= featureLevelHandover;
    // An envelope with a proposer term needs level 3 itself: a node that would ignore the term
    // must not apply it.
    const make = (term: number): Uint8Array => encodeCommandEnvelope(this.incarnation, seq, data, {
      featureLevel: reproposable ? Math.max(needed, featureLevelHandover) : needed, ...this.logStamp(), ...(reproposable ? { proposerTerm: term } : {}),
    });
    if (this.debugWrites) this.logProposing(seq);
    return this.submit(seq, make, reproposable);
  }

  /** The leader's log-time stamp for an entry proposed now (feature level 2), if this node stamps. */
  private logStamp(): { logTimeMs?: number } {
    if (this.level < featureLevelLeaderClock) return {};
    const t = this.logClock.now(performance.now());
    return t === undefined ? {} : { logTimeMs: t };
  }

  /** Queues an entry for the next loop turn; resolves when it is applied here. */
  private submit(seq: number, make: (term: number) => Uint8Array, reproposable: boolean): Promise<ProposalResult> {
    const started = performance.now();
    return new Promise<ProposalResult>((resolveRaw, rejectRaw) => {
      const resolve = (r: ProposalResult): void => {
        this.proposalLatency.observe((performance.now() - started) / 1000);
        this.proposalsCommitted.inc();
        resolveRaw(r);
      };
      const reject = (err: Error): void => {
        this.proposalsFailed.inc({ code: err instanceof ShoalError ? err.code : 'internal' });
        rejectRaw(err);
      };
      const timer = setTimeout(() => this.expireProposal(seq), this.opts.proposalTimeoutMs);
      this.book.add(seq, { make, resolve, reject, timer, stampedTerm: null, attempts: 0, reproposable });
      this.notify();
    });
  }

  /**
   * The caller's deadline passed. A proposal that is in no log that can still commit (held, or
   * of a term an applied entry has since passed) was certainly not applied: retry. Otherwise its
   * outcome is unknown.
   */
  private expireProposal(seq: number): void {
    const p = this.book.take(seq);
    if (p === undefined) return;
    const ms = this.opts.proposalTimeoutMs;
    if (p.reproposable && (p.stampedTerm === null || p.stampedTerm < this.lastAppliedTerm)) {
      p.reject(new ShoalError('proposal_dropped', `the write was not applied within ${ms} ms (leadership was moving); nothing was changed, retry`, { reason: 'deadline' }));
      return;
    }
    if (p.reproposable && p.stampedTerm !== null && p.stampedTerm < this.term) {
      p.reject(new ShoalError('leader_changed', `leadership moved while the write was in flight, and whether it committed was not known within ${ms} ms; its outcome is unknown, retry with the same Idempotency-Key`));
      return;
    }
    p.reject(new ShoalError('timeout', `the write was not applied within ${ms} ms; its outcome is unknown`));
  }

  /** Refuses with `overloaded` when `size` has reached `max` (a bound of this node). */
  private checkBound(size: number, max: number, counter: keyof OverloadCounts, limit: string): void {
    if (size < max) return;
    this.overloads[counter]++;
    throw new ShoalError('overloaded', `this node has ${size} ${counter} waiting, its limit (${limit}); retry shortly or use another node`, { limit, value: max });
  }

  /** Resolves once this node has applied everything committed before the call (linearizable read barrier). */
  readBarrier(timeoutMs = this.opts.proposalTimeoutMs): Promise<number> {
    this.checkServing();
    this.checkBound(this.reads.size, this.opts.readsPendingMax, 'reads', 'readsPendingMax');
    const ctx = `${++this.seq}`;
    return this.reads.wait(ctx, timeoutMs);
  }

  /** Proposes a membership change; resolves when it is applied here. */
  async changeMembership(cc: ConfChange): Promise<void> {
    this.checkRunning();
    // One change may be in flight at a time. One already in the log (a new leader's whole log
    // counts until applied, and the leader leaves a joint configuration by itself) is applied
    // within a commit's time: wait for it rather than refuse the caller; refuse only if it has
    // not been applied within the proposal timeout.
    // Callers waiting together each try in turn.
    const settled = (): boolean => !this.isLeader || !this.raw.confChangeInFlight() || this.state !== 'running';
    const deadline = Date.now() + this.opts.proposalTimeoutMs;
    let target: number;
    for (;;) {
      await this.waitFor(settled, Math.max(0, deadline - Date.now()), 'the membership change in flight').catch(() => undefined);
      this.checkRunning();
      target = this.confChangeCount + 1;
      try {
        this.raw.proposeConfChange(cc);
        break;
      } catch (err) {
        const pending = err instanceof ProposalDroppedError && err.reason === 'confChangePending';
        if (!pending || Date.now() >= deadline) throw translateDrop(err);
      }
    }
    this.notify();
    // A change of voters goes through a joint configuration that the leader leaves by itself;
    // answer once that is done, so the caller can make the next change at once.
    await this.waitFor(() => this.confChangeCount >= target && this.raw.confState().votersOutgoing.length === 0, this.opts.proposalTimeoutMs, 'membership change');
  }

  /**
   * Moves leadership to `to` (or the most up-to-date voter); resolves when a new leader is known.
   * `giveUpIfDisconnected`: fail as soon as the connection to the target closes (it is stopping
   * or gone, and will not campaign) instead of waiting out the timeout.
   */
  async transferLeadership(to?: NodeId, opts: { giveUpIfDisconnected?: boolean } = {}): Promise<NodeId> {
    this.checkRunning();
    const target = to ?? this.bestTransferTarget();
    if (target === NONE) throw new ShoalError('bad_request', 'no other voter to transfer leadership to');
    try {
      this.raw.transferLeadership(target);
    } catch (err) {
      throw translateDrop(err);
    }
    this.notify();
    const timeoutMs = this.opts.tickMs * this.opts.electionTimeoutTicks * 3;
    const disconnectsBefore = this.disconnects.get(target) ?? 0;
    const lost = (): boolean => opts.giveUpIfDisconnected === true && (this.disconnects.get(target) ?? 0) !== disconnectsBefore;
    const moved = (): boolean => this.leader !== NONE && this.leader !== this.id;
    await this.waitFor(() => moved() || lost(), timeoutMs, 'leadership transfer');
    if (!moved()) throw new ShoalError('stopping', `leadership transfer to ${target} abandoned: the connection to it closed`);
    return this.leader;
  }

  status(): Status & { membersInfo: MemberRecord[] } {
    return { ...this.raw.status(), membersInfo: this.membership.list() };
  }

  peerStats(): PeerStats[] {
    return this.opts.transport.stats();
  }

  /**
   * Why this node cannot serve, once it cannot: `node_failed` after a fatal error (the process
   * exits), and later `upgrade_required`, `removed` or `disk_stalled`. Undefined while healthy.
   * The API answers every request but health and metrics with it (503), and /healthz turns 503.
   */
  get failure(): ShoalError | undefined {
    if (this.failed !== undefined) return this.failed;
    return this.diskStall.error();
  }

  /** The committed cluster feature level. */
  /** Writes this node proposed again after a change of leader lost or refused them (src/node/proposals.ts). */
  get reproposedProposals(): number {
    return this.book.reproposed;
  }

  get featureLevel(): number {
    return this.level;
  }

  /** The highest feature level this build supports (what its hello announces). */
  get featureLevelSupported(): number {
    return this.opts.featureLevelMax;
  }

  /** The term of the last entry applied here: the leader's loops start once it is the leader's own term. */
  get appliedTerm(): number {
    return this.lastAppliedTerm;
  }

  /** Ms since a Raft message from `id` last arrived here, or undefined if none did since this node started. */
  silentForMs(id: NodeId): number | undefined {
    return this.peerSilence.silentForMs(id);
  }

  /**
   * What this node knows first-hand of `id` being there (node health's evidence): the later of
   * its last Raft message and anything its transport heard (pings and pongs come every second
   * on each connection, also between followers), the outbound link's state, a goodbye, and a
   * refused dial since it was last heard.
   */
  peerContact(id: NodeId): PeerContact {
    const raft = this.peerSilence.silentForMs(id);
    const t = this.opts.transport.contact?.(id);
    if (t === undefined) return { heardAgoMs: raft, watchingForMs: undefined, link: 'unknown', goodbye: false, refused: false };
    const heardAgoMs = raft === undefined ? t.heardAgoMs : Math.min(raft, t.heardAgoMs ?? raft);
    const clock = t.clockOffsetMs !== undefined && t.clockSampledAgoMs !== undefined ? { clockOffsetMs: t.clockOffsetMs, clockSampledAgoMs: t.clockSampledAgoMs } : {};
    return { heardAgoMs, watchingForMs: t.watchingForMs, link: t.link, goodbye: t.goodbye, refused: t.refused, ...clock };
  }

  /**
   * Resolves once everything in this node's log when called is applied here, or this node is no
   * longer the leader (then an entry of its own it has not applied may never commit). A leader
   * loop whose write's outcome is unknown waits for this before it decides again.
   */
  async settleOwnProposals(): Promise<void> {
    const target = this.raw.status().lastIndex;
    const term = this.term;
    await this.waitFor(() => this.applied >= target || !this.isLeader || this.term !== term || this.state !== 'running', 10 * 60_000, 'settling own proposals')
      .catch(() => undefined);
  }

  /** Log time now: the leader's log clock, or (not stamping) the applied log time. */
  logTimeNow(): number {
    return this.logClock.now(performance.now()) ?? this.opts.stateMachine.logTimeMs ?? 0;
  }

  /** Ids removed from the cluster (from the replicated log). */
  isRemoved(id: NodeId): boolean {
    return this.removedIds.has(id);
  }

  /** How many proposals and reads wait here (for the metrics of the bounds). */
  pendingCounts(): { proposals: number; reads: number } {
    return { proposals: this.book.size, reads: this.reads.size };
  }

  get isLeader(): boolean {
    return this.role === 'leader';
  }

  get leaderId(): NodeId {
    return this.leader;
  }

  get currentTerm(): number {
    return this.term;
  }

  get appliedIndex(): number {
    return this.applied;
  }

  /** The index of the newest snapshot this node holds (taken or received). */
  get latestSnapshotIndex(): number {
    return this.snapshots.index;
  }

  /**
   * Takes a snapshot at the applied index (once it reaches `through`), compacts the whole log
   * behind it, and has the storage rewrite its log and snapshot files without what the snapshot
   * covers (docs/security.md, "Secrets at rest": the entries that held secrets in the clear).
   * Resolves with what was deleted; the storage of a node built without one deletes nothing.
   */
  async purgeLog(through: number): Promise<{ snapshot: number; segments: string[]; snapshots: string[] }> {
    this.checkRunning();
    const forced = this.snapshots.forceAt(through);
    this.notify();
    const index = await forced;
    const storage = this.opts.storage;
    return storage.purge === undefined ? { snapshot: index, segments: [], snapshots: [] } : storage.purge(index);
  }

  /**
   * The first step of a graceful stop: a leader hands leadership away and keeps running as a
   * follower, so the requests still in flight on this node are forwarded rather than refused.
   */
  async handOff(): Promise<void> {
    await this.handOffBeforeStop();
  }

  /** Graceful stop: a leader hands leadership away first, then everything is closed. */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'stopping') return this.loopDone;
    await this.handOffBeforeStop();
    await this.shutdown(new ShoalError('stopping', 'the node is stopping'));
  }

  /**
   * A leader that stops hands leadership to the most up-to-date voter it is connected to. When
   * the connection to that voter closes before it takes over (it is stopping too, as when the
   * whole cluster stops at once, or the link blipped), the next voter is tried, each one once;
   * only when none is left does the cluster fall back to an election. A transfer that times out
   * is not retried: the stop has waited long enough.
   */
  private async handOffBeforeStop(): Promise<void> {
    const tried = new Set<NodeId>();
    while (this.state === 'running' && this.isLeader) {
      const target = this.bestTransferTarget({ exclude: tried, connectedOnly: true });
      if (target === NONE) return;
      tried.add(target);
      try {
        const to = await this.transferLeadership(target, { giveUpIfDisconnected: true });
        this.log.info(`handed leadership to ${to} before stopping`);
        return;
      } catch (err) {
        this.log.warn(`could not hand leadership to ${target} before stopping: ${(err as Error).message}`);
        if (!(err instanceof ShoalError && err.code === 'stopping')) return;
      }
    }
  }

  private async shutdown(reason: Error): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopping';
    clearInterval(this.ticker);
    this.notify();
    await this.loopDone;
    await this.snapshots.inProgress;
    this.state = 'stopped';
    for (const p of this.book.drain()) p.reject(reason);
    this.reads.close(reason);
    this.endWaits(reason);
    await this.opts.transport.close();
    await this.opts.storage.close();
  }

  // ---- the Ready loop ---------------------------------------------------------------------

  // Two things overlap with the durable write, as in etcd (Raft thesis §10.2.1):
  // - A leader sends its appends and heartbeats before its own write is done. The entries count
  //   toward commitment only once a follower has persisted them too, and the commit index that
  //   covers them leaves in a later Ready, after this write; a crash before the write loses
  //   entries nobody was told are committed. Not when the term or vote changes in this Ready:
  //   those must be durable before anyone hears of them.
  // - Entries committed before this Ready (so durable here and on a majority) are applied while
  //   the write runs. Not conf changes, whose commit must be durable before they take effect.
  private async loop(): Promise<void> {
    while (this.state === 'running') {
      this.stepQueuedProposals();
      if (!this.raw.hasReady()) {
        // Between two Readys: a snapshot forced while the loop idles (purgeLog) starts here.
        this.snapshots.maybeStart(this.applied);
        await new Promise<void>((resolve) => { this.wakeUp = resolve; });
        this.wakeUp = undefined;
        continue;
      }
      const rd = this.raw.ready();
      const sendFirst = maySendBeforeWrite(rd, this.role, this.opts.storage.log.initialState().hardState);
      const applyFirst = mayApplyBeforeWrite(rd);
      // With new entries, replication goes first: the transport writes to the sockets in a
      // microtask, and the write-ahead log's write(2) waits for it, so the appends leave before
      // the log takes the thread. With none (only the commit index moved), the answers to
      // clients go first: the entries are applied, and the sends wait for the end of this
      // event-loop turn, after the promise continuations that write the HTTP responses.
      const commitOnly = !mustWrite(rd) && applyFirst;
      if (sendFirst && !commitOnly) {
        for (const m of rd.messages) if (isReplication(m)) this.opts.transport.send(m);
        if (rd.entries.length > 0) await Promise.resolve();
      }
      const writing = this.persist(rd);
      if (applyFirst && !this.applyEntries(rd.committedEntries)) return;
      if (commitOnly) await new Promise<void>((resolve) => setImmediate(resolve));
      if (sendFirst && commitOnly) for (const m of rd.messages) if (isReplication(m)) this.opts.transport.send(m);
      if (writing !== undefined) await this.diskStall.watch(writing);
      if (this.state !== 'running') return;
      for (const m of rd.messages) if (!sendFirst || !isReplication(m)) this.opts.transport.send(m);
      if (rd.snapshot) this.applySnapshot(rd.snapshot.meta.index, rd.snapshot.meta.term, rd.snapshot.data);
      if (!applyFirst && !this.applyEntries(rd.committedEntries)) return;
      this.raw.advance(rd);
      if (rd.committedEntries.some((e) => e.kind === 'conf')) {
        this.membership.retain(this.raw.confState());
        this.syncPeers();
        this.maybeLeaveRemoved();
      }
      this.afterAdvance(rd);
      // After advance: membership changes among the entries are in effect only from here.
      if (rd.committedEntries.length > 0 || rd.snapshot) {
        this.emit('applied', this.applied);
        this.checkWaits();
      }
      this.snapshots.maybeStart(this.applied);
    }
  }

  /** The disk stalled (src/node/disk-stall.ts): every pending request fails with `err`. */
  private failAllPending(err: ShoalError): void {
    for (const p of this.book.drain()) p.reject(err);
    this.reads.failAll(err);
  }

  /** Writes what `rd` must make durable; undefined when there is nothing to write now. */
  private persist(rd: Ready): Promise<void> | undefined {
    const hardState = rd.hardState ?? this.unsavedHardState;
    if (!mustWrite(rd)) {
      // Only the commit index moved (or nothing did): keep it for the next write.
      this.unsavedHardState = hardState;
      return undefined;
    }
    this.unsavedHardState = undefined;
    return this.opts.storage.save(
      { entries: rd.entries, ...(hardState ? { hardState } : {}), ...(rd.snapshot ? { snapshot: rd.snapshot } : {}) },
      { sync: rd.mustSync },
    );
  }

  /** Steps the proposals made since the last turn into the core, as few proposals as the limits allow. */
  private stepQueuedProposals(): void {
    if (!this.book.hasQueued()) return;
    const queued = this.book.takeQueued(this.term);
    let start = 0;
    while (start < queued.length) {
      let end = start;
      let bytes = 0;
      while (end < queued.length && (end === start || bytes + (queued[end]?.data.length ?? 0) <= this.opts.appendBytesMax)) {
        bytes += queued[end]?.data.length ?? 0;
        end++;
      }
      const batch = queued.slice(start, end);
      start = end;
      try {
        this.raw.proposeBatch(batch.map((q) => q.data));
      } catch (err) {
        if (!(err instanceof ProposalDroppedError)) {
          for (const q of queued.slice(start - batch.length)) this.failProposal(q.seq, translateDrop(err));
          this.die(err);
          return;
        }
        for (const q of batch) this.onDropped(q.seq, err);
      }
    }
  }

  /** The core refused a proposal: held until a leader is known when that is why, else failed. */
  private onDropped(seq: number, err: ProposalDroppedError): void {
    const holdable = err.reason === 'noLeader' || err.reason === 'transferInProgress';
    if (holdable && this.book.get(seq)?.reproposable === true) this.book.hold(seq, err.reason === 'noLeader' ? 'noLeader' : 'transfer', performance.now());
    else this.failProposal(seq, translateDrop(err));
  }

  private failProposal(seq: number, err: Error): void {
    this.book.take(seq)?.reject(err);
  }

  private afterAdvance(rd: Ready): void {
    this.reads.onReadStates(rd.readStates, this.applied);
    // The term is in the hard state, which a Ready carries whenever it changed.
    const term = rd.hardState?.term ?? this.term;
    const termChanged = term !== this.term;
    this.term = term;
    if (rd.softState) this.onSoftState(rd.softState.leader, rd.softState.role);
    else if (termChanged) this.emit('leaderChange', { leader: this.leader, term: this.term, role: this.role });
    if (rd.softState || termChanged) this.checkWaits();
  }

  private onSoftState(leader: NodeId, role: Role): void {
    const changed = leader !== this.leader;
    this.leader = leader;
    if (role !== this.role) {
      if (role === 'leader') this.startLogClock();
      else this.logClock.stop();
    }
    this.role = role;
    if (changed) {
      this.leaderChanges++;
      this.carryOverLeaderChange();
    }
    this.emit('leaderChange', { leader, term: this.term, role });
    if (changed) this.log.info(`leader is now ${leader || '(none)'} at term ${this.term}`);
  }

  /**
   * Leadership moved. From level 3 nothing is failed: reads are asked again of the new leader,
   * proposals held for want of one go to it, and proposals caught in flight are proposed again
   * once an entry of a newer term shows they cannot apply (applyEntries). Before level 3, reads
   * not yet given an index and proposals not yet applied fail with leader_changed (their
   * outcome unknown), as the first release did.
   */
  private carryOverLeaderChange(): void {
    if (this.level >= featureLevelHandover) {
      if (this.leader !== NONE) {
        this.reads.askAllAgain();
        if (this.book.releaseHeld()) this.notify();
      }
    } else {
      this.reads.failUnansweredOnLeaderChange();
    }
    for (const p of this.book.drainNotReproposable()) {
      p.reject(new ShoalError('leader_changed', 'leadership changed before the write was applied; its outcome is unknown, retry (with the same Idempotency-Key to be safe)'));
    }
  }

  /** Starts stamping log time from what this node has applied (feature level 2). */
  private startLogClock(): void {
    this.logClock.start(this.opts.stateMachine.logTimeMs ?? 0, performance.now(), Date.now());
  }

  /**
   * Applies committed entries in order. Returns false when it stopped before the end: an entry
   * needs a newer release (upgrade_required); `applied` stays below it and the node halts.
   */
  private applyEntries(entries: Entry[]): boolean {
    let complete = true;
    for (const e of entries) {
      if (e.kind === 'conf') {
        this.membership.applyConfChange(e.change);
        for (const c of e.change.changes) if (c.type === 'removeNode') this.removedIds.add(c.node);
        this.confChangeCount++;
      } else if (e.data.length > 0 && !this.applyNormal(e.index, e.term, e.data)) {
        complete = false;
        break;
      }
      this.applied = e.index;
      this.lastAppliedTerm = e.term;
    }
    if (entries.length > 0) {
      this.syncPeers();
      this.reads.release(this.applied);
      if (this.book.reproposeOlderThan(this.lastAppliedTerm)) this.notify();
    }
    return complete;
  }

  /** Applies one normal entry; false when it needs a newer release. Never throws for bad bytes. */
  private applyNormal(index: number, term: number, data: Uint8Array): boolean {
    const entry = decodeEntry(data, this.opts.featureLevelMax);
    switch (entry.kind) {
      case 'invalid':
        this.applyInvalid(index, entry.reason);
        return true;
      case 'newer':
        this.halt(new ShoalError('upgrade_required', `log entry ${index} was written by a newer release (${entry.reason}); this node stopped applying at index ${index - 1}. Install the release the rest of the cluster runs, then start it again`, { index, level: entry.level, featureLevelMax: this.opts.featureLevelMax }));
        return false;
      case 'featureLevel':
        this.applyFeatureLevel(index, entry.level);
        this.answer(entry, { index, result: { featureLevel: this.level } });
        return true;
      case 'command': {
        if (entry.proposerTerm !== undefined && entry.proposerTerm !== term) {
          // Proposed in one term, appended in another (forwarded late, or re-proposed meanwhile):
          // a no-op on every node, so that the write applies at most once (proposals.ts).
          this.staleProposals++;
          return true;
        }
        const result = this.opts.stateMachine.apply({
          index, term, data: entry.data, featureLevel: this.level,
          ...(entry.logTimeMs !== undefined ? { logTimeMs: entry.logTimeMs } : {}),
        });
        this.answer(entry, { index, result });
        return true;
      }
    }
  }

  /** Resolves this node's proposal that `entry` carries, if it is one of ours. */
  private answer(entry: Extract<DecodedEntry, { proposer: string }>, r: ProposalResult): void {
    if (entry.proposer !== this.incarnation) return;
    this.book.take(entry.seq)?.resolve(r);
  }

  /**
   * An entry whose bytes are not an envelope is applied as a no-op, the same on every node: a
   * bug or a hostile member put it there, and refusing it would stop the whole cluster on every
   * restart. Logged once per index and process, and counted.
   */
  private applyInvalid(index: number, reason: string): void {
    this.invalidEntries++;
    if (this.invalidLogged.has(index) || this.invalidLogged.size >= 1000) return;
    this.invalidLogged.add(index);
    this.log.warn(`log entry ${index} is not a valid command (${reason}); applied as a no-op (invalid_command) on every node`);
  }

  private applyFeatureLevel(index: number, level: number): void {
    if (level <= this.level) return;
    const from = this.level;
    this.level = level;
    this.log.info(`cluster feature level ${from} -> ${level} (entry ${index})`);
    if (level >= featureLevelLeaderClock && this.role === 'leader') this.startLogClock();
    this.emit('featureLevel', level);
  }

  private applySnapshot(index: number, term: number, data: Uint8Array): void {
    this.restoreState(data);
    this.book.snapshotInstalled();
    this.applied = index;
    this.lastAppliedTerm = term;
    this.snapshots.restart(index);
    this.syncPeers();
    this.log.info(`applied snapshot at index ${index}`);
  }

  /** What a snapshot taken now records besides the state machine (src/node/snapshot-policy.ts). */
  private captureForSnapshot(): { confState: ConfState; nodeState: NodeState } {
    const confState = this.raw.confState();
    const nodeState = { members: this.membership.list(), featureLevel: this.level, removed: [...this.removedIds].sort() };
    return { confState, nodeState };
  }

  /**
   * Writes the hard state whose only change was the commit index, if one waits: a snapshot past
   * the durable commit index would not survive a restart's checks. Queued now, before any later
   * save, so an older hard state never lands after a newer one.
   */
  private flushHardState(): Promise<void> {
    if (this.unsavedHardState === undefined) return Promise.resolve();
    const flushed = this.opts.storage.save({ entries: [], hardState: this.unsavedHardState }, { sync: false });
    this.unsavedHardState = undefined;
    return flushed;
  }

  /** Snapshot data is {members, app}; an empty snapshot (a joining node) restores nothing. */
  private restoreState(data: Uint8Array): void {
    if (data.length === 0) return;
    const decoded = decodeSnapshotData(data);
    this.membership.restore(decoded.members);
    this.level = decoded.featureLevel;
    this.removedIds.clear();
    for (const id of decoded.removed) this.removedIds.add(id);
    this.opts.stateMachine.restore(decoded.app);
  }

  // ---- plumbing ---------------------------------------------------------------------------

  /**
   * A message from a peer, already checked by the transport (transport/types.ts). A snapshot
   * whose payload cannot be restored is refused here, before the core takes it: restoring it
   * would stop this node, and every start after it wrote the snapshot.
   */
  private receive(m: Message): MessageRefusal | undefined {
    this.peerSilence.heard(m.from);
    // One not past the applied index the core ignores anyway: no need to decode it.
    if (m.type === 'snap' && m.snapshot !== undefined && m.snapshot.meta.index > this.applied) {
      const sm = this.opts.stateMachine;
      const problem = checkSnapshotData(m.snapshot.data, (app) => sm.checkSnapshot?.(app));
      if (problem !== undefined) return { reason: 'bad_snapshot_data', detail: `snapshot ${m.snapshot.meta.index}: ${problem}` };
    }
    if (m.type === 'prop' && this.role === 'leader' && this.debugWrites) this.logForwarded(m);
    if (m.type === 'prop' && this.role === 'leader' && this.level >= featureLevelLeaderClock) this.restampProposal(m);
    this.withCore(() => this.raw.step(m));
    return undefined;
  }

  /** The debug line of the node that took a write: its proposal id, to follow it across nodes. */
  private logProposing(seq: number): void {
    const id = proposalId(this.incarnation, seq);
    this.log.debug(`proposing write ${id}${this.isLeader ? ' as leader' : ` through leader ${this.leader || '(none)'}`}`, { proposal: id });
  }

  /** The leader's debug line for each write a follower forwarded: its proposal id, to follow it across nodes. */
  private logForwarded(m: Message): void {
    for (const e of m.entries) {
      if (e.kind !== 'normal' || e.data.length === 0) continue;
      const env = decodeEntry(e.data, this.opts.featureLevelMax);
      if (env.kind !== 'command') continue;
      const id = proposalId(env.proposer, env.seq);
      this.log.debug(`leader appending write ${id} forwarded by ${m.from}`, { proposal: id, from: m.from });
    }
  }

  /**
   * A follower's forwarded proposal carries no trusted log time: the leader stamps its own
   * (src/node/log-clock.ts). Entries that are not command envelopes are left as they are.
   */
  private restampProposal(m: Message): void {
    const t = this.logClock.now(performance.now());
    if (t === undefined) return;
    for (const e of m.entries) {
      if (e.kind !== 'normal' || e.data.length === 0) continue;
      const stamped = restampLogTime(e.data, t);
      if (stamped !== undefined) (e as { data: Uint8Array }).data = stamped;
    }
  }

  /** Runs an input into the core and wakes the loop. A thrown assertion stops the node. */
  private withCore(fn: () => void): void {
    if (this.state !== 'running') return;
    try {
      fn();
    } catch (err) {
      this.die(err);
      return;
    }
    this.notify();
  }

  private notify(): void {
    this.wakeUp?.();
  }

  /** A bug or a fatal storage or transport error: the node stops (node_failed) and the process should exit. */
  private die(err: unknown): void {
    if (this.fatal) return;
    this.fatal = err instanceof Error ? err : new Error(String(err));
    this.log.error(`fatal: ${this.fatal.stack ?? this.fatal.message}`);
    this.halt(new ShoalError('node_failed', `this node stopped after a fatal error (${this.fatal.message}); it is exiting, use another node`));
    if (this.listenerCount('error') > 0) this.emit('error', this.fatal);
  }

  /**
   * Stops the node for good with `failure` (node_failed, upgrade_required, removed): pending
   * requests fail with it, the loop and the timers stop, storage and transport close, and
   * `failed` tells the process to exit with the code the failure means.
   */
  private halt(failure: ShoalError): void {
    if (this.failed !== undefined) return;
    this.failed = failure;
    if (failure.code !== 'node_failed') this.log.error(failure.message);
    void this.shutdown(failure).finally(() => this.emit('failed', failure));
  }

  private checkRunning(): void {
    if (this.state !== 'running') throw this.failed ?? new ShoalError('stopping', `the node is ${this.state}`);
  }

  /** checkRunning, and refuses while the disk is stalled. */
  private checkServing(): void {
    this.checkRunning();
    const f = this.failure;
    if (f !== undefined) throw f;
  }

  private onTick(): void {
    this.withCore(() => this.raw.tick());
    // Held for want of a leader for two election timeouts: no election is coming; fail fast.
    const holdMs = 2 * this.opts.electionTimeoutTicks * this.opts.tickMs;
    for (const p of this.book.takeHeldLongerThan(performance.now(), holdMs)) {
      p.reject(new ShoalError('no_leader', 'the cluster has no leader right now; nothing was changed, retry shortly'));
    }
    // A leader is known (a transfer ended, or was aborted and the leader stayed): try the held ones again.
    if (this.leader !== NONE) {
      if (this.book.releaseHeld()) this.notify();
      this.reads.askUnasked();
    }
    if (this.state === 'running' && this.isLeader && !this.diskStall.stalled) this.levelRaiser.maybeRaise(this.level);
  }

  /** Proposes the feature-level entry raising the committed level to `level` (src/node/feature-level-raiser.ts). */
  private proposeFeatureLevel(level: number): Promise<ProposalResult> {
    const seq = ++this.seq;
    return this.submit(seq, () => encodeFeatureLevelEnvelope(this.incarnation, seq, level), false);
  }

  /**
   * A node that has applied its own removal stops (exit code 5, not restarted). A leader first
   * waits for another leader: the core hands leadership over (docs/architecture.md).
   */
  private maybeLeaveRemoved(): void {
    if (!this.removedIds.has(this.id)) return;
    if (this.memberIds().includes(this.id)) return;
    const leave = (): void => this.halt(removedError(this.id));
    if (!this.isLeader) return leave();
    const timeoutMs = this.opts.tickMs * this.opts.electionTimeoutTicks * 3;
    void this.waitFor(() => this.leader !== NONE && this.leader !== this.id, timeoutMs, 'hand-over after removal').then(leave, leave);
  }

  /**
   * A member refused this node's handshake because the cluster removed it: believed at once,
   * since only a committed removal puts an id on that list and ids are never reused.
   */
  learnRemoved(by: NodeId): void {
    if (this.state !== 'running') return;
    this.log.error(`peer ${by} refused this node: it was removed from the cluster`);
    this.halt(removedError(this.id));
  }

  /** Dials every member again where peerAddressOf says it is now (the address book changed). */
  refreshPeers(): void {
    if (this.state === 'running') this.syncPeers();
  }

  private syncPeers(): void {
    const members = this.membership.list();
    const known = members.length > 0 ? members : this.opts.seedPeers;
    const peers = known.filter((m) => m.id !== this.id).map((m) => ({ id: m.id, address: this.opts.peerAddressOf(m) }));
    this.opts.transport.setPeers(peers);
  }

  /** The voter with the longest log; `exclude`d ones left out, and with `connectedOnly` those this node has no connection to. */
  private bestTransferTarget(opts: { exclude?: ReadonlySet<NodeId>; connectedOnly?: boolean } = {}): NodeId {
    const st = this.raw.status();
    const connected = opts.connectedOnly === true
      ? new Set(this.opts.transport.stats().filter((p) => p.connected).map((p) => p.id))
      : undefined;
    let best: NodeId = NONE;
    let bestMatch = -1;
    for (const id of st.confState.voters) {
      if (id === this.id || opts.exclude?.has(id) === true || (connected !== undefined && !connected.has(id))) continue;
      const match = st.progress?.[id]?.match ?? 0;
      if (match > bestMatch) { best = id; bestMatch = match; }
    }
    return best;
  }

  /**
   * Resolves once `done()` holds, checked on every change of the applied index, leader, term or
   * a peer's connection; fails after `timeoutMs`, or with the stop's reason if the node stops first.
   */
  private waitFor(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (done()) return Promise.resolve();
    if (this.state === 'stopped') return Promise.reject(this.failed ?? new ShoalError('stopping', 'the node is stopping'));
    return new Promise<void>((resolve, reject) => {
      const wait: Wait = {
        done, resolve, reject,
        timer: setTimeout(() => {
          this.waits.delete(wait);
          reject(new ShoalError('timeout', `${what} did not complete within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.waits.add(wait);
    });
  }

  private checkWaits(): void {
    for (const w of this.waits) {
      if (!w.done()) continue;
      this.waits.delete(w);
      clearTimeout(w.timer);
      w.resolve();
    }
  }

  /** The node stopped: each wait ends now, done or failed with `reason`, not at its timeout. */
  private endWaits(reason: Error): void {
    for (const w of this.waits) {
      clearTimeout(w.timer);
      if (w.done()) w.resolve();
      else w.reject(reason);
    }
    this.waits.clear();
  }

  /** Every member of the configuration: voters and learners, incoming and outgoing. */
  private memberIds(): NodeId[] {
    const cs = this.raw.confState();
    return [...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext];
  }

  /** The confState as of the applied index (for snapshots and status). */
  confState(): ConfState {
    return this.raw.confState();
  }
}

/** Whether `rd` has anything to make durable now; otherwise its hard state waits for the next write. */
function mustWrite(rd: Ready): boolean {
  return rd.mustSync || rd.entries.length > 0 || rd.snapshot !== undefined;
}

/** Messages a leader may send before its own write completes (see loop()): none says that write is durable. */
function isReplication(m: Message): boolean {
  return m.type === 'app' || m.type === 'heartbeat' || m.type === 'persisted';
}

/**
 * Whether `rd`'s appends and heartbeats may leave before its write: only from a leader whose term
 * and vote in `rd` are those already durable (`durable`: the storage's hard state, the previous
 * write being done). Exported for tests.
 */
export function maySendBeforeWrite(rd: Ready, role: Role, durable: HardState): boolean {
  if ((rd.softState?.role ?? role) !== 'leader') return false;
  return rd.hardState === undefined || (rd.hardState.term === durable.term && rd.hardState.vote === durable.vote);
}

/**
 * Whether `rd`'s committed entries may be applied while its write runs: all of them durable
 * before it (none among its new entries), no membership change, no snapshot. Exported for tests.
 */
export function mayApplyBeforeWrite(rd: Ready): boolean {
  const last = rd.committedEntries[rd.committedEntries.length - 1];
  if (last === undefined || rd.snapshot !== undefined) return false;
  const firstNew = rd.entries[0];
  if (firstNew !== undefined && last.index >= firstNew.index) return false;
  return !rd.committedEntries.some((e) => e.kind === 'conf');
}

/** A proposal's id in the logs: the proposer's incarnation and sequence number, as the envelope carries them. */
export function proposalId(incarnation: string, seq: number): string {
  return `${incarnation}#${seq}`;
}

function removedError(id: NodeId): ShoalError {
  return new ShoalError('removed', `this node (${id}) was removed from the cluster and stops; it is not restarted (exit code 5). To bring the machine back, wipe its data directory and join it again as a new node`, { id });
}
