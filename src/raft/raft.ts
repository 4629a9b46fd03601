// The Raft state machine. Input arrives only through step() and tick(); output accumulates in
// `msgs` and `readStates` and in the log's unstable tail, and RawNode hands it out as a Ready.
//
// Each role is a step function and a tick function swapped in by becomeFollower,
// becomeCandidate, becomePreCandidate and becomeLeader.

import { assert } from '../base/assert.ts';
import { changeConfig, ConfChangeError, isLeaveJoint } from './confchange.ts';
import { RaftLog } from './log.ts';
import { Progress } from './progress.ts';
import { jointVote } from './quorum.ts';
import { ReadOnly } from './read-only.ts';
import { CompactedError, SnapshotUnavailableError, type LogStorage } from './storage.ts';
import { configFromConfState, isJoint, isVoter, ProgressTracker } from './tracker.ts';
import {
  NONE,
  type ConfChange, type Config, type DropReason, type Entry, type HardState, type Logger, type Message,
  type MessageType, type NodeId, type Prng, type ReadState, type Role, type Snapshot, type SoftState,
} from './types.ts';
import { payloadBytes } from './util.ts';

/** Context of a vote request sent on a leadership transfer: it may break a follower's lease. */
const transferContext = 'transfer';
/** Context of a forwarded proposal whose follower asks for a 'persisted' notice (followerCommit). */
const persistedRequest = 'persisted?';
const readRequestsMax = 4096;

const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {} };

type StepFn = (m: Message) => DropReason | null;
type CampaignType = 'preElection' | 'election' | 'transfer';

/** Builds a message with empty defaults for the fields a type does not use. */
export function message(fields: Partial<Message> & { type: MessageType }): Message {
  return {
    from: NONE, to: NONE, term: 0, logTerm: 0, index: 0, entries: [], commit: 0,
    reject: false, rejectHint: 0, ...fields,
  };
}

/** The node a request comes from: its origin when a follower relayed it, else its sender. */
function requesterOf(m: Message): NodeId {
  return m.origin ?? m.from;
}

/** A relayed request as if its origin had sent it straight to the leader, which answers that node. */
function asFromRequester(m: Message): Message {
  if (m.origin === undefined) return m;
  const direct: Message = { ...m, from: m.origin };
  delete direct.origin;
  return direct;
}

const localMessages: ReadonlySet<MessageType> = new Set(['hup', 'beat', 'checkQuorum', 'unreachable', 'snapStatus']);
export const isLocalMessage = (t: MessageType): boolean => localMessages.has(t);

function voteRespType(t: MessageType): MessageType {
  return t === 'vote' ? 'voteResp' : 'preVoteResp';
}

export class Raft {
  readonly id: NodeId;
  term = 0;
  vote: NodeId = NONE;
  lead: NodeId = NONE;
  role: Role = 'follower';
  readonly log: RaftLog;
  readonly tracker: ProgressTracker;
  /** Not a voter in the current configuration (a learner, or removed). */
  isLearner = false;
  msgs: Message[] = [];
  readStates: ReadState[] = [];
  /** Target of a leadership transfer in progress; NONE if none. */
  leadTransferee: NodeId = NONE;
  /** A conf change at an index above `applied` is in the log; only one may be pending. */
  pendingConfIndex = 0;
  private uncommittedBytes = 0;
  private readOnly = new ReadOnly(readRequestsMax);
  /** Reads that arrived before this leader committed an entry of its own term. */
  private pendingReads: Message[] = [];
  /**
   * Leader: per follower, the last entry of the proposals it forwarded whose commit it awaits,
   * and whether it asked for a 'persisted' notice instead (followerCommit).
   */
  private readonly commitAwaited = new Map<NodeId, { index: number; persistedNotice: boolean }>();
  /**
   * Leader: the highest index named in a 'persisted' notice. A follower may have committed, and
   * answered a client, up to it before this leader learns of the commit; so no read may be
   * served at an index below it.
   */
  private persistedNoticeMax = 0;
  /** Follower: the leader's log is durable up to here, in this term ('persisted'). */
  private leaderDurable = 0;
  /** Follower: this log matches the leader's up to here (appends accepted in this term). */
  private leaderMatched = 0;

  electionElapsed = 0;
  private heartbeatElapsed = 0;
  private randomizedElectionTimeout = 0;
  readonly electionTimeout: number;
  readonly heartbeatTimeout: number;
  private readonly prng: Prng;
  private readonly checkQuorum: boolean;
  private readonly commitNotice: 'all' | 'proposers';
  private readonly followerCommit: boolean;
  private readonly followerReadQuorum: boolean;
  private readonly preVote: boolean;
  private readonly disableProposalForwarding: boolean;
  private readonly appendBytesMax: number;
  private readonly uncommittedBytesMax: number;
  readonly logger: Logger;

  private stepRole: StepFn = (m) => this.stepFollower(m);
  private tickRole: () => void = () => this.tickElection();

  constructor(config: Config, storage: LogStorage) {
    this.id = config.id;
    assert(this.id !== NONE, 'config.id must not be empty');
    this.electionTimeout = config.electionTimeoutTicks ?? 10;
    this.heartbeatTimeout = config.heartbeatIntervalTicks ?? 1;
    assert(this.heartbeatTimeout > 0, 'heartbeatIntervalTicks must be positive');
    assert(this.electionTimeout > this.heartbeatTimeout, 'electionTimeoutTicks must exceed heartbeatIntervalTicks');
    this.prng = config.prng;
    this.checkQuorum = config.checkQuorum ?? true;
    this.preVote = config.preVote ?? true;
    this.disableProposalForwarding = config.disableProposalForwarding ?? false;
    this.commitNotice = config.commitNotice ?? 'all';
    this.followerCommit = config.followerCommit ?? false;
    this.followerReadQuorum = config.followerReadQuorum ?? false;
    this.appendBytesMax = config.appendBytesMax ?? 1024 * 1024;
    this.uncommittedBytesMax = config.uncommittedBytesMax ?? 64 * 1024 * 1024;
    this.logger = config.logger ?? silentLogger;
    this.log = new RaftLog(storage, config.committedBytesMax ?? Number.MAX_SAFE_INTEGER);
    this.tracker = new ProgressTracker(config.appendsInflightMax ?? 256);

    const { hardState, confState } = storage.initialState();
    this.restoreConfig(configFromConfState(confState));
    if (hardState.term !== 0 || hardState.vote !== NONE || hardState.commit !== 0) this.loadHardState(hardState);
    this.restoreApplied(storage.snapshot().meta.index, config.applied ?? 0);
    this.becomeFollower(this.term, NONE);
  }

  /**
   * At start, the membership is the snapshot's (storage's `initialState().confState`). The state
   * machine restarts from that snapshot, so applying resumes after it — even when the log still
   * holds entries before it (a snapshot not yet followed by compaction); handing those out again
   * would apply their membership changes twice. A driver whose state machine is durable passes
   * `applied`: the membership changes between the snapshot and it are replayed here, since they
   * will not be handed out again.
   */
  private restoreApplied(snapshotIndex: number, applied: number): void {
    if (snapshotIndex > this.log.committed) this.log.committed = snapshotIndex;
    if (snapshotIndex > this.log.applied) this.log.applied = snapshotIndex;
    if (applied <= this.log.applied) return;
    assert(applied <= this.log.committed, `config.applied ${applied} beyond the commit index ${this.log.committed}`);
    for (const e of this.log.slice(this.log.applied + 1, applied + 1, Number.MAX_SAFE_INTEGER)) {
      if (e.kind !== 'conf') continue;
      try {
        const next = changeConfig(this.tracker.config, this.tracker.progress, e.change, { lastIndex: this.log.lastIndex(), inflightMax: this.tracker.inflightMax });
        this.tracker.setConfig(next.config, next.progress);
      } catch (err) {
        if (!(err instanceof ConfChangeError)) throw err;
      }
    }
    this.isLearner = !isVoter(this.tracker.config, this.id);
    this.log.appliedTo(applied);
  }

  // ---- state ------------------------------------------------------------------------------

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed };
  }

  softState(): SoftState {
    return { leader: this.lead, role: this.role };
  }

  private loadHardState(hs: HardState): void {
    assert(hs.commit >= this.log.committed && hs.commit <= this.log.lastIndex(),
      `hard state commit ${hs.commit} outside [${this.log.committed}, ${this.log.lastIndex()}]`);
    this.log.committed = hs.commit;
    this.term = hs.term;
    this.vote = hs.vote;
  }

  /** Promotable: may campaign. A learner, a removed node or one applying a snapshot may not. */
  promotable(): boolean {
    const pr = this.tracker.progress.get(this.id);
    return pr !== undefined && !pr.learner && isVoter(this.tracker.config, this.id) && !this.log.hasPendingSnapshot();
  }

  private checkInvariants(): void {
    const { applied, committed } = this.log;
    assert(applied <= committed, `applied ${applied} > committed ${committed}`);
    assert(committed <= this.log.lastIndex(), `committed ${committed} > last index ${this.log.lastIndex()}`);
  }

  // ---- role transitions -------------------------------------------------------------------

  private reset(term: number): void {
    if (this.term !== term) {
      assert(term > this.term, `term must not decrease (${this.term} -> ${term})`);
      this.term = term;
      this.vote = NONE;
    }
    this.lead = NONE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.resetRandomizedElectionTimeout();
    this.abortLeaderTransfer();
    this.tracker.resetVotes();
    const last = this.log.lastIndex();
    for (const [id, old] of this.tracker.progress) {
      const pr = new Progress(last + 1, this.tracker.inflightMax, old.learner);
      if (id === this.id) pr.match = last;
      this.tracker.progress.set(id, pr);
    }
    this.pendingConfIndex = 0;
    this.uncommittedBytes = 0;
    this.commitAwaited.clear();
    this.persistedNoticeMax = 0;
    this.leaderDurable = 0;
    this.leaderMatched = 0;
    this.readOnly = new ReadOnly(readRequestsMax);
    this.pendingReads = [];
  }

  becomeFollower(term: number, lead: NodeId): void {
    this.stepRole = (m) => this.stepFollower(m);
    this.reset(term);
    this.tickRole = () => this.tickElection();
    this.lead = lead;
    this.role = 'follower';
  }

  becomeCandidate(): void {
    assert(this.role !== 'leader', 'invalid transition leader -> candidate');
    this.stepRole = (m) => this.stepCandidate(m);
    this.reset(this.term + 1);
    this.tickRole = () => this.tickElection();
    this.setVote(this.id);
    this.role = 'candidate';
  }

  becomePreCandidate(): void {
    assert(this.role !== 'leader', 'invalid transition leader -> preCandidate');
    // A pre-candidate changes neither term nor vote: it only asks whether it could win.
    this.stepRole = (m) => this.stepCandidate(m);
    this.tracker.resetVotes();
    this.tickRole = () => this.tickElection();
    this.lead = NONE;
    this.role = 'preCandidate';
  }

  becomeLeader(): void {
    assert(this.role !== 'follower', 'invalid transition follower -> leader');
    this.stepRole = (m) => this.stepLeader(m);
    this.reset(this.term);
    this.tickRole = () => this.tickHeartbeat();
    this.lead = this.id;
    this.role = 'leader';
    // A removed node that campaigned to hand leadership over has no progress of its own.
    const self = this.tracker.progress.get(this.id);
    if (self !== undefined) {
      self.becomeReplicate();
      self.recentActive = true;
    }
    // Conservatively assume the log holds an unapplied conf change: no new one until applied.
    this.pendingConfIndex = this.log.lastIndex();
    // The no-op of the new term: committing it commits everything before it (Figure 8).
    const ok = this.appendEntries([{ kind: 'normal', term: 0, index: 0, data: new Uint8Array(0) }]);
    assert(ok, 'the no-op entry is never refused');
    this.logger.info(`${this.id} became leader at term ${this.term}`);
  }

  private setVote(id: NodeId): void {
    assert(this.vote === NONE || this.vote === id, `one vote per term: ${this.id} voted ${this.vote} in term ${this.term}, now ${id}`);
    this.vote = id;
  }

  private resetRandomizedElectionTimeout(): void {
    this.randomizedElectionTimeout = this.electionTimeout + this.prng.nextInt(this.electionTimeout);
  }

  /**
   * The driver lost its connection to our leader (its socket closed, as when the leader's
   * process dies). Instead of waiting out a whole election timeout, campaign within a few ticks,
   * and stop honouring the leader's lease, so that this node grants the pre-votes of others that
   * lost it too. Timing never decides safety; and pre-vote keeps a node that alone lost its link
   * from disrupting a leader the others still hear: they refuse it while in lease. A heartbeat
   * from the leader in the meantime resets the timer as usual.
   *
   * The voters that remain take turns, by id, two ticks apart (the first at tick 1 or 2, the
   * next at 3 or 4, ...): followers that drew the same tick would campaign together, each vote
   * for itself, and all wait a whole randomized timeout for the next try. Only the first report
   * counts: a transport that reports the leader again at each failed reconnection must not put
   * the campaign off.
   */
  private expireLeaderLease(): void {
    if (this.electionElapsed >= this.electionTimeout) return;
    const turn = Math.max(0, this.tracker.voterIds().filter((id) => id !== this.lead).sort().indexOf(this.id));
    this.electionElapsed = this.electionTimeout;
    this.randomizedElectionTimeout = this.electionTimeout + Math.min(this.electionTimeout, 1 + 2 * turn + this.prng.nextInt(2));
  }

  pastElectionTimeout(): boolean {
    return this.electionElapsed >= this.randomizedElectionTimeout;
  }

  // ---- ticks ------------------------------------------------------------------------------

  tick(): void {
    this.tickRole();
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (!this.pastElectionTimeout()) return;
    if (this.promotable()) {
      this.electionElapsed = 0;
      this.step(message({ type: 'hup', from: this.id }));
    } else if (this.role !== 'follower') {
      // A campaign this node may not start again on its own (it campaigned to hand leadership
      // over, maybeCampaignToHandOff) did not win in time: a request or an answer was lost, or
      // the vote split. Back to following, so that the next vote it refuses starts another;
      // left a candidate, it would refuse every request and never campaign again (seeds
      // 2054434 and 2057168).
      this.becomeFollower(this.term, NONE);
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTimeout) {
      this.electionElapsed = 0;
      if (this.checkQuorum) this.step(message({ type: 'checkQuorum', from: this.id }));
      if (this.role === 'leader' && this.leadTransferee !== NONE) this.abortLeaderTransfer();
      if (this.role === 'leader') this.maybeHandOffLeadership();
    }
    if (this.role !== 'leader') return;
    if (this.heartbeatElapsed >= this.heartbeatTimeout) {
      this.heartbeatElapsed = 0;
      this.step(message({ type: 'beat', from: this.id }));
    }
  }

  // ---- step: term checks common to all roles ----------------------------------------------

  /** Feeds one message to the state machine. Returns why a proposal/read was refused, if so. */
  step(m: Message): DropReason | null {
    this.checkInvariants();
    const termBefore = this.term;
    const result = this.stepInner(m);
    assert(this.term >= termBefore, `term decreased from ${termBefore} to ${this.term}`);
    this.checkInvariants();
    return result;
  }

  private stepInner(m: Message): DropReason | null {
    if (m.term > this.term) {
      if (!this.stepHigherTerm(m)) return null;
    } else if (m.term !== 0 && m.term < this.term) {
      this.stepLowerTerm(m);
      return null;
    }
    switch (m.type) {
      case 'hup':
        this.hup(this.preVote ? 'preElection' : 'election');
        return null;
      case 'vote':
      case 'preVote':
        this.handleVoteRequest(m);
        return null;
      default:
        return this.stepRole(m);
    }
  }

  /** A message from a newer term. Returns whether to go on processing it. */
  private stepHigherTerm(m: Message): boolean {
    if (m.type === 'vote' || m.type === 'preVote') {
      const force = m.context === transferContext;
      const inLease = this.checkQuorum && this.lead !== NONE && this.electionElapsed < this.electionTimeout;
      // A follower that hears from a live leader ignores candidates: this is what keeps a node
      // returning from a partition from deposing a healthy leader.
      if (!force && inLease) return false;
    }
    if (m.type === 'preVote') return true; // a pre-vote never changes our term
    if (m.type === 'preVoteResp' && !m.reject) return true; // the term is raised on winning
    const leader = m.type === 'app' || m.type === 'heartbeat' || m.type === 'snap' ? m.from : NONE;
    if (leader === NONE && this.role !== 'leader') this.becomeFollowerKeepingElectionTimer(m.term);
    else this.becomeFollower(m.term, leader);
    return true;
  }

  /**
   * A newer term from anyone but its leader (a vote request, an answer to our own request)
   * makes this node a follower of that term, but its election timer goes on running. Raft's
   * rule (paper Figure 2, thesis Figure 3.1) restarts a follower's timer when it hears from the
   * current leader or grants a vote (handleVoteRequest), not when it merely sees a newer term;
   * LogCabin's stepDown starts a new timer only for a node that was leader. Restarting it on
   * every newer term, as etcd does, lets candidates that cannot win (their logs are behind) put
   * off, round after round, the election of the node that can: it must then be the first of
   * all to time out again. A joint configuration, needing both majorities, can leave a single
   * such node (seed 701291: voters [n4,n5], outgoing [n1,n2], only n2 held the newest entries,
   * and no leader for 350 ticks). PreVote hides it, since a pre-vote raises no term.
   */
  private becomeFollowerKeepingElectionTimer(term: number): void {
    const elapsed = this.electionElapsed;
    const timeout = this.randomizedElectionTimeout;
    this.becomeFollower(term, NONE);
    this.electionElapsed = elapsed;
    this.randomizedElectionTimeout = timeout;
  }

  private stepLowerTerm(m: Message): void {
    if ((this.checkQuorum || this.preVote) && (m.type === 'heartbeat' || m.type === 'app')) {
      // A stale leader (e.g. back from a partition) learns the new term and steps down. Without
      // this answer, with PreVote, it could keep the others from ever electing a leader.
      this.send(message({ type: 'appResp', to: m.from }));
    } else if (m.type === 'preVote') {
      this.send(message({ type: 'preVoteResp', to: m.from, term: this.term, reject: true }));
    }
    // Anything else from an older term is ignored.
  }

  private handleVoteRequest(m: Message): void {
    const canVote =
      this.vote === m.from ||
      (this.vote === NONE && this.lead === NONE) ||
      (m.type === 'preVote' && m.term > this.term);
    const upToDate = this.log.isUpToDate(m.index, m.logTerm);
    if (canVote && upToDate) {
      // A grant carries the candidate's term, so a pre-vote grant is not taken for stale.
      this.send(message({ type: voteRespType(m.type), to: m.from, term: m.term }));
      if (m.type === 'vote') {
        this.electionElapsed = 0;
        this.setVote(m.from);
      }
    } else {
      this.send(message({ type: voteRespType(m.type), to: m.from, term: this.term, reject: true }));
      if (!upToDate) this.maybeCampaignToHandOff(m.from);
    }
  }

  /**
   * A node that a committed conf change removed (or demoted to learner) may hold entries that a
   * voter lacks, while that voter, which has not heard that the change committed, still counts
   * it as a voter and needs its vote. Refusing the vote on the log then leaves both stuck: the
   * voter cannot win, and the removed node never campaigns (simulator seed 5035: a leader removed
   * itself, and the last voter was cut off before it heard of the commit). So the removed node
   * campaigns in its place, asking the voters of its own configuration. What makes an election
   * safe is the voters' check that the candidate's log is at least as up to date as theirs, not
   * the candidate's membership. Once leader, it accepts no proposals: it brings the voters up to
   * date and hands leadership to the best of them (maybeHandOffLeadership).
   *
   * A leader it still names does not hold it back once silent for an election timeout: that
   * leader may have stepped down without a newer term for this node to hear of (seed 2057168:
   * the removed leader n3 lost its quorum, and n1, removed too, still named it). The campaign
   * has an election timeout to win (tickElection), then waits for the next refused request.
   */
  private maybeCampaignToHandOff(candidate: NodeId): void {
    const cfg = this.tracker.config;
    if (this.role !== 'follower') return;
    if (this.lead !== NONE && this.electionElapsed < this.electionTimeout) return;
    if (isVoter(cfg, this.id) || isJoint(cfg) || !isVoter(cfg, candidate)) return;
    if (this.log.hasPendingSnapshot() || this.hasUnappliedConfChanges()) return;
    this.logger.info(`${this.id} is not a voter but holds entries ${candidate} lacks; campaigning to hand leadership over`);
    this.electionElapsed = 0;
    this.campaign(this.preVote ? 'preElection' : 'election');
  }

  // ---- elections --------------------------------------------------------------------------

  private hup(t: CampaignType): void {
    if (this.role === 'leader') return;
    if (!this.promotable()) return;
    if (this.hasUnappliedConfChanges()) {
      this.logger.warn(`${this.id} cannot campaign at term ${this.term}: committed conf changes are not applied yet`);
      return;
    }
    this.campaign(t);
  }

  private hasUnappliedConfChanges(): boolean {
    if (this.log.applied >= this.log.committed) return false;
    const ents = this.log.slice(this.log.applied + 1, this.log.committed + 1, Number.MAX_SAFE_INTEGER);
    return ents.some((e) => e.kind === 'conf');
  }

  private campaign(t: CampaignType): void {
    let term: number;
    let type: MessageType;
    if (t === 'preElection') {
      this.becomePreCandidate();
      type = 'preVote';
      term = this.term + 1; // the term we would campaign in
    } else {
      this.becomeCandidate();
      type = 'vote';
      term = this.term;
    }
    if (this.poll(this.id, true) === 'won') {
      // A single-voter cluster wins at once.
      if (t === 'preElection') this.campaign('election');
      else this.becomeLeader();
      return;
    }
    const context = t === 'transfer' ? transferContext : undefined;
    for (const id of this.tracker.voterIds()) {
      if (id === this.id) continue;
      this.send(message({
        type, to: id, term, index: this.log.lastIndex(), logTerm: this.log.lastTerm(), ...(context ? { context } : {}),
      }));
    }
  }

  private poll(id: NodeId, granted: boolean): 'won' | 'lost' | 'pending' {
    this.tracker.recordVote(id, granted);
    return this.tracker.tallyVotes().result;
  }

  // ---- candidate --------------------------------------------------------------------------

  private stepCandidate(m: Message): DropReason | null {
    const myVoteResp: MessageType = this.role === 'preCandidate' ? 'preVoteResp' : 'voteResp';
    switch (m.type) {
      case 'prop':
        return 'noLeader';
      case 'readIndex':
        return 'noLeader';
      case 'transferLeader':
        return 'noLeader';
      case 'app':
        this.becomeFollower(m.term, m.from);
        this.handleAppendEntries(m);
        return null;
      case 'heartbeat':
        this.becomeFollower(m.term, m.from);
        this.handleHeartbeat(m);
        return null;
      case 'snap':
        this.becomeFollower(m.term, m.from);
        this.handleSnapshot(m);
        return null;
      case 'voteResp':
      case 'preVoteResp': {
        if (m.type !== myVoteResp) return null;
        const result = this.poll(m.from, !m.reject);
        if (result === 'won') {
          if (this.role === 'preCandidate') this.campaign('election');
          else {
            this.becomeLeader();
            this.bcastAppend();
            this.maybeHandOffLeadership();
          }
        } else if (result === 'lost') {
          this.becomeFollower(this.term, NONE);
        }
        return null;
      }
      default:
        return null; // timeoutNow and the rest mean nothing to a candidate
    }
  }

  // ---- follower ---------------------------------------------------------------------------

  private stepFollower(m: Message): DropReason | null {
    switch (m.type) {
      case 'prop':
        if (this.lead === NONE) return 'noLeader';
        if (this.disableProposalForwarding) return 'forwardingDisabled';
        this.relayToLeader(this.followerCommit ? { ...m, context: persistedRequest } : m);
        return null;
      case 'app':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleAppendEntries(m);
        return null;
      case 'heartbeat':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleHeartbeat(m);
        return null;
      case 'snap':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleSnapshot(m);
        return null;
      case 'transferLeader':
      case 'readIndex':
        if (this.lead === NONE) return 'noLeader';
        this.relayToLeader(m);
        return null;
      case 'timeoutNow':
        // Campaign at once, skipping PreVote: the leader asked us to take over.
        this.hup('transfer');
        return null;
      case 'unreachable':
        // reject: a message was dropped, but nothing says the connection to the leader is gone.
        if (m.from === this.lead && !m.reject) this.expireLeaderLease();
        return null;
      case 'readIndexResp':
        this.readStates.push({ index: m.index, context: m.context ?? '' });
        // The answer carries the leader's commit index. Commit as far as this log is known to
        // match the leader's, so that the read need not wait for the next heartbeat to bring it
        // (an answer without a heartbeat round, followerReadQuorum, follows none). Not up to the
        // read index itself: it may name entries only a 'persisted' notice covers, which commit
        // once the follower notified holds them durably.
        if (m.from === this.lead) this.log.commitTo(Math.min(m.commit, this.leaderMatched, this.log.lastIndex()));
        return null;
      case 'persisted':
        if (m.from !== this.lead) return null;
        this.leaderDurable = Math.max(this.leaderDurable, m.index);
        this.maybeCommitDurable();
        return null;
      default:
        return null;
    }
  }

  /**
   * followerCommit, on a follower: the entries durable both here and on the leader, as far as
   * this log is known to match the leader's, are committed if the last of them is of this term.
   * The leader sends 'persisted' only when it and this follower are a quorum of its settled
   * configuration, in which all its entries up to its last were appended; so this is the
   * leader's own commit rule, applied where both halves of the quorum are known. A later
   * configuration needs a conf entry after these to commit first, which commits them too.
   */
  private maybeCommitDurable(): void {
    if (this.leaderDurable <= this.log.committed) return;
    this.log.maybeCommit(Math.min(this.leaderDurable, this.leaderMatched, this.log.stableIndex()), this.term);
  }

  /** The driver made the log durable up to `log.stableIndex()` (called from advance). */
  persisted(): void {
    if (this.role === 'leader') this.sendPersistedNotices();
    else if (this.role === 'follower') this.maybeCommitDurable();
  }

  /**
   * Leader: tells each follower that asked, once this log is durable past its proposals, how
   * far it is durable. Only when this leader and that follower are a quorum of a settled
   * configuration; otherwise the follower learns the commit as usual.
   */
  private sendPersistedNotices(): void {
    const durable = this.log.stableIndex();
    for (const [id, awaited] of this.commitAwaited) {
      if (!awaited.persistedNotice || awaited.index > durable) continue;
      if (!this.isSettledQuorumWith(id)) {
        awaited.persistedNotice = false; // the commit notice, then
        continue;
      }
      // The notice stands in for the commit notice of the same proposals.
      this.commitAwaited.delete(id);
      this.send(message({ type: 'persisted', to: id, index: durable }));
      this.persistedNoticeMax = durable;
    }
  }

  /** This leader and `id` are a quorum of a configuration that is not joint and has no change pending. */
  private isSettledQuorumWith(id: NodeId): boolean {
    const cfg = this.tracker.config;
    if (isJoint(cfg) || this.pendingConfIndex > this.log.applied) return false;
    const voters = cfg.voters.incoming;
    return voters.size <= 3 && voters.has(this.id) && voters.has(id);
  }

  private handleAppendEntries(m: Message): void {
    if (m.index < this.log.committed) {
      this.send(message({ type: 'appResp', to: m.from, index: this.log.committed }));
      return;
    }
    const lastNew = this.log.maybeAppend(m.index, m.logTerm, m.commit, m.entries);
    if (lastNew !== undefined) {
      this.send(message({ type: 'appResp', to: m.from, index: lastNew }));
      if (lastNew > this.leaderMatched) {
        this.leaderMatched = lastNew;
        this.maybeCommitDurable();
      }
      return;
    }
    // Reject with a hint: the last index at or below m.index whose term is at most m.logTerm.
    // The leader resumes from there, skipping a whole conflicting term per round trip.
    const hint = this.log.findConflictByTerm(Math.min(m.index, this.log.lastIndex()), m.logTerm);
    this.send(message({ type: 'appResp', to: m.from, index: m.index, reject: true, rejectHint: hint.index, logTerm: hint.term }));
  }

  private handleHeartbeat(m: Message): void {
    this.log.commitTo(Math.min(m.commit, this.log.lastIndex()));
    this.send(message({ type: 'heartbeatResp', to: m.from, ...(m.context !== undefined ? { context: m.context } : {}) }));
  }

  private handleSnapshot(m: Message): void {
    const snap = m.snapshot;
    assert(snap !== undefined, 'snap message carries a snapshot');
    if (this.restore(snap)) {
      this.send(message({ type: 'appResp', to: m.from, index: this.log.lastIndex() }));
    } else {
      this.send(message({ type: 'appResp', to: m.from, index: this.log.committed }));
    }
  }

  /** Replaces the log and membership with a snapshot. Returns false if it is not newer. */
  private restore(snap: Snapshot): boolean {
    if (snap.meta.index <= this.log.committed) return false;
    assert(this.role === 'follower', `restore snapshot as ${this.role}`);
    // The snapshot may predate this node's addition (the leader sends the newest snapshot it has,
    // taken before the change that added us). That is fine: the entries after it add us, and a
    // node outside the configuration only follows (it is not promotable, so it never campaigns).
    const cs = snap.meta.confState;
    if (this.log.matchTerm(snap.meta.index, snap.meta.term)) {
      // We have the snapshot's last entry: the log up to there is the leader's; just commit.
      this.log.commitTo(snap.meta.index);
      return false;
    }
    this.log.restore(snap);
    this.restoreConfig(configFromConfState(cs));
    this.logger.info(`${this.id} restored snapshot at index ${snap.meta.index}, term ${snap.meta.term}`);
    return true;
  }

  private restoreConfig(config: ReturnType<typeof configFromConfState>): void {
    const prs = new Map<NodeId, Progress>();
    const next = this.log.lastIndex() + 1;
    const learners = new Set([...config.learners]);
    for (const id of [...config.voters.incoming, ...config.voters.outgoing, ...config.learners, ...config.learnersNext]) {
      if (!prs.has(id)) prs.set(id, new Progress(next, this.tracker.inflightMax, learners.has(id)));
    }
    this.tracker.setConfig(config, prs);
    this.isLearner = !isVoter(config, this.id);
  }

  // ---- leader -----------------------------------------------------------------------------

  private stepLeader(m: Message): DropReason | null {
    switch (m.type) {
      case 'beat':
        this.bcastHeartbeat();
        return null;
      case 'checkQuorum':
        this.checkQuorumActive();
        return null;
      case 'prop':
        return this.handleProposal(asFromRequester(m));
      case 'readIndex':
        return this.handleReadIndex(asFromRequester(m));
      case 'transferLeader':
        this.handleTransferLeader(asFromRequester(m));
        return null;
      default:
        break;
    }
    const pr = this.tracker.progress.get(m.from);
    if (pr === undefined) return null; // not a member (any more)
    switch (m.type) {
      case 'appResp':
        this.handleAppendResponse(m, pr);
        break;
      case 'heartbeatResp':
        this.handleHeartbeatResponse(m, pr);
        break;
      case 'snapStatus':
        if (pr.state !== 'snapshot') break;
        if (m.reject) pr.pendingSnapshot = 0;
        // Either way, wait for the next heartbeat answer before probing again.
        pr.becomeProbe();
        pr.probeSent = true;
        break;
      case 'unreachable':
        if (pr.state === 'replicate') pr.becomeProbe();
        break;
      default:
        break;
    }
    return null;
  }

  private checkQuorumActive(): void {
    if (!this.tracker.quorumActive(this.id)) {
      this.logger.warn(`${this.id} stepped down at term ${this.term}: no quorum heard within an election timeout`);
      this.becomeFollower(this.term, NONE);
    }
    for (const [id, pr] of this.tracker.progress) {
      if (id === this.id) continue;
      pr.recentActive = false;
      // A snapshot unanswered for a whole round was probably lost; probe again.
      if (pr.state === 'snapshot') {
        if (pr.snapshotStale) pr.becomeProbe();
        else pr.snapshotStale = true;
      }
    }
  }

  private handleProposal(m: Message): DropReason | null {
    assert(m.entries.length > 0, 'a proposal carries entries');
    if (!this.tracker.progress.has(this.id) || this.isLearner) return 'removed';
    if (this.leadTransferee !== NONE) return 'transferInProgress';
    for (let i = 0; i < m.entries.length; i++) {
      const e = m.entries[i] as Entry;
      if (e.kind !== 'conf') continue;
      const refused = this.checkConfChange(e.change);
      if (refused !== null) return refused;
      this.pendingConfIndex = this.log.lastIndex() + i + 1;
    }
    if (!this.appendEntries(m.entries)) return 'uncommittedLimit';
    if (m.from !== this.id) this.commitAwaited.set(m.from, { index: this.log.lastIndex(), persistedNotice: m.context === persistedRequest });
    this.bcastAppend();
    return null;
  }

  /** A membership change is in flight (proposed, not yet applied) or the configuration is joint. */
  confChangeInFlight(): boolean {
    return isJoint(this.tracker.config) || this.pendingConfIndex > this.log.applied;
  }

  private checkConfChange(cc: ConfChange): DropReason | null {
    if (this.pendingConfIndex > this.log.applied) return 'confChangePending';
    try {
      changeConfig(this.tracker.config, this.tracker.progress, cc, { lastIndex: this.log.lastIndex(), inflightMax: this.tracker.inflightMax });
      return null;
    } catch (err) {
      if (err instanceof ConfChangeError) {
        this.logger.warn(`${this.id} refused conf change: ${err.message}`);
        return isJoint(this.tracker.config) && !isLeaveJoint(cc) ? 'confChangePending' : 'invalidConfChange';
      }
      throw err;
    }
  }

  private handleAppendResponse(m: Message, pr: Progress): void {
    // Every append and snapshot of this term ended within this log, so no answer of this term
    // names an index past it. One that does comes from a confused or lying peer: taken, it
    // would move the follower's `next` past the log and reach the assertion in log.term().
    if (m.index > this.log.lastIndex()) {
      this.logger.warn(`${this.id} ignored an append response from ${m.from} for index ${m.index}, past its last index ${this.log.lastIndex()}`);
      return;
    }
    pr.recentActive = true;
    if (m.reject) {
      let probe = m.rejectHint;
      if (m.logTerm > 0) probe = this.log.findConflictByTerm(m.rejectHint, m.logTerm).index;
      if (pr.maybeDecrTo(m.index, probe)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.sendAppend(m.from);
      }
      return;
    }
    const wasPaused = pr.isPaused();
    if (!pr.maybeUpdate(m.index)) return;
    if (pr.state === 'probe') {
      pr.becomeReplicate();
    } else if (pr.state === 'snapshot' && pr.match + 1 >= this.log.firstIndex()) {
      // The follower caught up through the snapshot: the log can take it from here.
      pr.becomeProbe();
      pr.becomeReplicate();
    } else if (pr.state === 'replicate') {
      pr.inflights.freeLE(m.index);
    }
    if (this.maybeCommit()) {
      this.releasePendingReads();
      this.bcastCommit();
    } else if (wasPaused) {
      this.sendAppend(m.from);
    }
    // Keep the pipeline full while the window allows.
    while (this.maybeSendAppend(m.from, false)) { /* send more */ }
    if (m.from === this.leadTransferee && pr.match === this.log.lastIndex()) {
      this.logger.info(`${this.id} sends timeoutNow to ${m.from}: it has caught up`);
      this.send(message({ type: 'timeoutNow', to: m.from }));
    }
  }

  private handleHeartbeatResponse(m: Message, pr: Progress): void {
    pr.recentActive = true;
    pr.probeSent = false;
    // An append or its answer was lost while the window was full: let one more go.
    if (pr.state === 'replicate' && pr.inflights.full()) pr.inflights.freeFirstOne();
    if (pr.match < this.log.lastIndex() || pr.state === 'probe') this.sendAppend(m.from);
    if (m.context === undefined) return;
    const acks = this.readOnly.recvAck(m.from, m.context);
    if (acks === undefined) return;
    const granted = new Map<NodeId, boolean>();
    for (const id of acks) granted.set(id, true);
    if (jointVote(this.tracker.voters, granted) !== 'won') return;
    for (const req of this.readOnly.advance(m.context)) this.respondToRead(req.from, req.context, req.index);
  }

  private handleReadIndex(m: Message): DropReason | null {
    // The fast path is only sound when the single voter is this leader: a leader that removed
    // itself must not answer reads that the remaining voter could contradict.
    if (this.tracker.isSingleton() && this.tracker.voters.incoming.has(this.id)) {
      this.respondToRead(m.from, m.context ?? '', this.log.committed);
      return null;
    }
    // Until an entry of this term commits, the leader may not know the full commit index.
    if (!this.committedEntryInCurrentTerm()) {
      if (this.pendingReads.length >= readRequestsMax) return 'uncommittedLimit';
      this.pendingReads.push(m);
      return null;
    }
    return this.startRead(m);
  }

  private startRead(m: Message): DropReason | null {
    // Not below what a follower may have committed on a 'persisted' notice: those entries are
    // committed, this leader has just not heard so yet, and the read waits until it has.
    const index = Math.max(this.log.committed, this.persistedNoticeMax);
    if (this.followerReadQuorum && m.from !== this.id && this.isSettledQuorumWith(m.from)) {
      // This leader, now, and the follower that asked, when it takes the answer in a term no
      // lower than its own, are a quorum: neither took part in a later term before the read
      // arrived, so no later leader can have committed anything this index does not cover.
      this.respondToRead(m.from, m.context ?? '', index);
      return null;
    }
    if (this.readOnly.full()) return 'uncommittedLimit';
    const key = this.readOnly.add(index, m.from, m.context ?? '');
    this.readOnly.recvAck(this.id, key);
    this.bcastHeartbeat(key);
    return null;
  }

  private committedEntryInCurrentTerm(): boolean {
    return this.log.termOrUndefined(this.log.committed) === this.term;
  }

  private releasePendingReads(): void {
    if (this.pendingReads.length === 0 || !this.committedEntryInCurrentTerm()) return;
    const reads = this.pendingReads;
    this.pendingReads = [];
    for (const m of reads) this.startRead(m);
  }

  private respondToRead(from: NodeId, context: string, index: number): void {
    if (from === this.id || from === NONE) {
      this.readStates.push({ index, context });
    } else {
      this.send(message({ type: 'readIndexResp', to: from, index, commit: this.log.committed, context }));
    }
  }

  private handleTransferLeader(m: Message): void {
    const target = m.from;
    const pr = this.tracker.progress.get(target);
    if (pr === undefined || pr.learner || !isVoter(this.tracker.config, target)) {
      this.logger.warn(`${this.id} ignores transfer to ${target}: not a voter`);
      return;
    }
    if (this.leadTransferee !== NONE) {
      if (this.leadTransferee === target) return;
      this.abortLeaderTransfer();
    }
    if (target === this.id) return;
    this.startTransfer(target, pr);
  }

  private startTransfer(target: NodeId, pr: Progress): void {
    // The transfer must finish within an election timeout, or it is aborted.
    this.electionElapsed = 0;
    this.leadTransferee = target;
    if (pr.match === this.log.lastIndex()) {
      this.send(message({ type: 'timeoutNow', to: target }));
    } else {
      this.sendAppend(target);
    }
  }

  abortLeaderTransfer(): void {
    this.leadTransferee = NONE;
  }

  /**
   * A leader that is no longer a voter (removed, or demoted to learner) hands leadership to the
   * most up-to-date voter rather than lingering as the leader of a cluster it is not part of.
   */
  private maybeHandOffLeadership(): void {
    if (this.role !== 'leader' || !this.isLearner || this.leadTransferee !== NONE) return;
    if (isJoint(this.tracker.config)) return; // still counted in the outgoing half until the leave commits
    let best: NodeId = NONE;
    let bestMatch = -1;
    for (const id of this.tracker.voterIds()) {
      const pr = this.tracker.progress.get(id);
      if (id === this.id || pr === undefined) continue;
      if (pr.match > bestMatch) {
        best = id;
        bestMatch = pr.match;
      }
    }
    const pr = this.tracker.progress.get(best);
    if (pr === undefined) return;
    this.logger.info(`${this.id} is no longer a voter; handing leadership to ${best}`);
    this.startTransfer(best, pr);
  }

  // ---- sending ----------------------------------------------------------------------------

  /**
   * Sends a request on to the leader in this node's own name (a transport refuses a message
   * whose `from` is not the node at the other end), naming the node it came from in `origin`
   * when that is another: a request relayed twice, by a follower that took a deposed leader for
   * the current one, used to keep its first sender's `from` and be dropped on the way.
   */
  private relayToLeader(m: Message): void {
    const origin = requesterOf(m);
    const relayed: Message = { ...m, from: this.id, to: this.lead, term: 0 };
    if (origin !== NONE && origin !== this.id) relayed.origin = origin;
    else delete relayed.origin;
    this.send(relayed);
  }

  private send(m: Message): void {
    if (m.from === NONE) m.from = this.id;
    if (m.type === 'vote' || m.type === 'voteResp' || m.type === 'preVote' || m.type === 'preVoteResp') {
      // Vote messages carry the term they are about; it was set by the caller.
      assert(m.term !== 0, `${m.type} must carry a term`);
    } else if (m.type === 'prop' || m.type === 'readIndex' || m.type === 'transferLeader') {
      // Forwarded requests are not tied to a term: the leader judges them in its own.
      m.term = 0;
    } else {
      m.term = this.term;
    }
    this.msgs.push(m);
  }

  sendAppend(to: NodeId): void {
    this.maybeSendAppend(to, true);
  }

  /** Sends an append (or a snapshot) to `to` if its progress allows. Returns whether it did. */
  maybeSendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.tracker.progress.get(to);
    if (pr === undefined || pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    let prevTerm: number;
    let entries: Entry[];
    try {
      prevTerm = this.log.term(prevIndex);
      entries = this.log.entries(pr.next, this.appendBytesMax);
    } catch (err) {
      if (err instanceof CompactedError || err instanceof SnapshotUnavailableError) return this.maybeSendSnapshot(to, pr);
      throw err;
    }
    if (entries.length === 0 && !sendIfEmpty) return false;
    this.send(message({ type: 'app', to, index: prevIndex, logTerm: prevTerm, entries, commit: this.log.committed }));
    const last = entries[entries.length - 1];
    pr.sentEntries(entries.length, last === undefined ? prevIndex : last.index);
    return true;
  }

  private maybeSendSnapshot(to: NodeId, pr: Progress): boolean {
    if (!pr.recentActive) return false;
    let snap: Snapshot;
    try {
      snap = this.log.snapshot();
    } catch (err) {
      if (err instanceof SnapshotUnavailableError) return false;
      throw err;
    }
    assert(snap.meta.index > 0, 'a compacted log has a snapshot');
    pr.becomeSnapshot(snap.meta.index);
    this.logger.info(`${this.id} sends snapshot ${snap.meta.index} to ${to}`);
    this.send(message({ type: 'snap', to, snapshot: snap }));
    return true;
  }

  private sendHeartbeat(to: NodeId, context: string | undefined): void {
    const pr = this.tracker.progress.get(to);
    // Never tell a follower to commit past what it is known to hold.
    const commit = Math.min(pr?.match ?? 0, this.log.committed);
    this.send(message({ type: 'heartbeat', to, commit, ...(context !== undefined ? { context } : {}) }));
  }

  bcastAppend(): void {
    for (const id of this.tracker.ids()) if (id !== this.id) this.sendAppend(id);
  }

  /**
   * After the commit index moved. With commitNotice 'proposers', appends go to every follower
   * that has entries to receive, carrying the new commit index, but an empty append (and its
   * answer) only to a follower that forwarded a proposal now committed: it answers its client
   * when it applies the entry. The others learn the commit index from the next append or
   * heartbeat. At one write at a time this nearly halves the messages per write; a follower's
   * state machine may trail the leader's by up to a heartbeat when writes stop, which a
   * linearizable read never sees (its heartbeat round carries the commit index).
   */
  private bcastCommit(): void {
    if (this.commitNotice === 'all') {
      this.bcastAppend();
      return;
    }
    for (const id of this.tracker.ids()) {
      if (id === this.id) continue;
      const awaited = this.commitAwaited.get(id);
      const due = awaited !== undefined && awaited.index <= this.log.committed;
      if (this.maybeSendAppend(id, due) && due) this.commitAwaited.delete(id);
    }
  }

  private bcastHeartbeat(context?: string): void {
    const ctx = context ?? this.readOnly.lastPendingKey();
    for (const id of this.tracker.ids()) if (id !== this.id) this.sendHeartbeat(id, ctx);
  }

  // ---- log --------------------------------------------------------------------------------

  /** Appends entries of the current term to the leader's log. False if over the uncommitted limit. */
  private appendEntries(ents: readonly Entry[]): boolean {
    let last = this.log.lastIndex();
    const stamped = ents.map((e) => ({ ...e, term: this.term, index: ++last }));
    const bytes = payloadBytes(stamped);
    if (this.uncommittedBytes > 0 && bytes > 0 && this.uncommittedBytes + bytes > this.uncommittedBytesMax) return false;
    this.uncommittedBytes += bytes;
    const li = this.log.append(stamped);
    this.tracker.progress.get(this.id)?.maybeUpdate(li);
    this.maybeCommit();
    return true;
  }

  private maybeCommit(): boolean {
    return this.log.maybeCommit(this.tracker.committed(), this.term);
  }

  /** Called as committed entries are applied: they no longer count as uncommitted. */
  reduceUncommittedBytes(ents: readonly Entry[]): void {
    if (this.role !== 'leader') return;
    this.uncommittedBytes = Math.max(0, this.uncommittedBytes - payloadBytes(ents));
  }

  // ---- configuration ----------------------------------------------------------------------

  /** Applies a committed conf change. Invalid changes are ignored identically on every node. */
  applyConfChange(cc: ConfChange): void {
    try {
      const { config, progress } = changeConfig(this.tracker.config, this.tracker.progress, cc, {
        lastIndex: this.log.lastIndex(), inflightMax: this.tracker.inflightMax,
      });
      this.tracker.setConfig(config, progress);
    } catch (err) {
      if (!(err instanceof ConfChangeError)) throw err;
      this.logger.warn(`${this.id} ignored committed conf change: ${err.message}`);
      return;
    }
    this.isLearner = !isVoter(this.tracker.config, this.id);
    this.afterConfigChange();
  }

  private afterConfigChange(): void {
    if (this.role !== 'leader') return;
    if (this.leadTransferee !== NONE && !isVoter(this.tracker.config, this.leadTransferee)) this.abortLeaderTransfer();
    if (this.maybeCommit()) this.bcastCommit();
    else for (const id of this.tracker.ids()) if (id !== this.id) this.maybeSendAppend(id, false);
    this.maybeHandOffLeadership();
  }

  /** After applying up to `index`: a leader in an auto-leave joint config proposes the leave. */
  appliedTo(index: number): void {
    this.log.appliedTo(index);
    const cfg = this.tracker.config;
    if (this.role === 'leader' && isJoint(cfg) && cfg.autoLeave && index >= this.pendingConfIndex) {
      const leave: Entry = { kind: 'conf', term: 0, index: 0, change: { changes: [], leaveJoint: true } };
      this.pendingConfIndex = this.log.lastIndex() + 1;
      if (this.appendEntries([leave])) {
        this.logger.info(`${this.id} proposes leaving the joint configuration`);
        this.bcastAppend();
      }
    }
  }
}
