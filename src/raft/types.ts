// The data that crosses the boundary of the consensus core: log entries, messages, the hard
// state that must survive a crash, configuration states, snapshots and the Ready batch.
//
// Everything here is plain data (no classes) so the driver can encode it with msgpackr and the
// simulator can copy it freely. The core never mutates a value after handing it out.

/** A node is named by a stable random id, never by its address. */
export type NodeId = string;

/** Sentinel for "no node" (no leader known, no vote cast). */
export const NONE: NodeId = '';

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader';

/** A change to the set of voters and learners. */
export interface ConfChangeSingle {
  type: 'addVoter' | 'addLearner' | 'removeNode';
  node: NodeId;
}

/**
 * A membership change. With one or more `changes` it enters a joint configuration (old and new
 * voters must both agree); `leaveJoint: true` with no changes leaves it. When `autoLeave` is true
 * (the default), the leader proposes the leave by itself as soon as the joint change is applied.
 * `context` is opaque to the core (the driver puts addresses and names of new members there).
 */
export interface ConfChange {
  changes: ConfChangeSingle[];
  leaveJoint?: boolean;
  autoLeave?: boolean;
  context?: string;
}

/** The membership a configuration amounts to, as stored with snapshots and hard state. */
export interface ConfState {
  /** Voters of the incoming (or only) configuration. */
  voters: NodeId[];
  /** Voters of the outgoing configuration; empty unless joint. */
  votersOutgoing: NodeId[];
  learners: NodeId[];
  /** Voters of the outgoing config that become learners when the joint config is left. */
  learnersNext: NodeId[];
  /** Whether the joint config is left automatically. Meaningless unless joint. */
  autoLeave: boolean;
}

export interface EntryBase {
  term: number;
  index: number;
}
/** A normal entry. An empty `data` is the no-op a new leader appends at the start of its term. */
export interface NormalEntry extends EntryBase {
  kind: 'normal';
  data: Uint8Array;
}
export interface ConfEntry extends EntryBase {
  kind: 'conf';
  change: ConfChange;
}
export type Entry = NormalEntry | ConfEntry;

/** State the driver must persist before sending any message of the same Ready. */
export interface HardState {
  term: number;
  vote: NodeId;
  commit: number;
}

export interface SnapshotMeta {
  index: number;
  term: number;
  confState: ConfState;
}

export interface Snapshot {
  meta: SnapshotMeta;
  /** The state machine's serialized state at `meta.index`; opaque to the core. */
  data: Uint8Array;
}

export type MessageType =
  // Local messages: never sent over the network.
  | 'hup' // start an election (or pre-election)
  | 'beat' // leader: send heartbeats
  | 'checkQuorum' // leader: step down if a quorum has not been heard from
  | 'unreachable' // driver: a peer could not be reached
  | 'snapStatus' // driver: a snapshot send finished (reject = failed)
  // Network messages.
  | 'prop' // proposal forwarded from a follower to the leader
  | 'app'
  | 'appResp'
  | 'vote'
  | 'voteResp'
  | 'preVote'
  | 'preVoteResp'
  | 'snap'
  | 'heartbeat'
  | 'heartbeatResp'
  | 'transferLeader'
  | 'timeoutNow'
  | 'readIndex'
  | 'readIndexResp'
  | 'persisted'; // leader to a follower that asked (followerCommit): the leader's log is durable up to `index`

export interface Message {
  type: MessageType;
  from: NodeId;
  to: NodeId;
  term: number;
  /** app: term of the entry at `index`; vote/preVote: term of the candidate's last entry. */
  logTerm: number;
  /** app: index preceding `entries`; appResp: index acknowledged or rejected; vote: last index. */
  index: number;
  entries: Entry[];
  commit: number;
  reject: boolean;
  /** appResp with reject: the follower's hint for where to probe next (its last index at or below `index` with term <= `logTerm`). */
  rejectHint: number;
  snapshot?: Snapshot;
  /** heartbeat/readIndex: the read request context, echoed back. */
  context?: string;
  /**
   * prop/readIndex/transferLeader relayed by a follower that is not the node they came from
   * (it took them for the leader's, and the leader had changed): the node whose request it is.
   * `from` is always the node that sent this hop, which is all a transport can authenticate.
   */
  origin?: NodeId;
}

/** A linearizable read that may be served once the applied index reaches `index`. */
export interface ReadState {
  index: number;
  context: string;
}

export interface SoftState {
  leader: NodeId;
  role: Role;
}

/**
 * One batch of work for the driver. The safety contract, in order:
 *
 * 1. Persist `snapshot` (if any), then `entries`, then `hardState` (if any) — as one atomic
 *    write, synced to disk when `mustSync` is true (a new term or vote, new entries or a
 *    snapshot, or a committed membership change among `committedEntries`).
 * 2. Only then send `messages`. (A vote or an append acknowledgement sent before the matching
 *    write is durable can elect two leaders or lose a committed entry after a crash.)
 * 3. Apply `snapshot` (if any) to the state machine, then `committedEntries` in order.
 * 4. Serve `readStates` once the applied index reaches each state's index.
 * 5. Call `advance()` with this Ready. Do not call `ready()` again before that.
 */
export interface Ready {
  softState?: SoftState;
  hardState?: HardState;
  entries: Entry[];
  snapshot?: Snapshot;
  committedEntries: Entry[];
  messages: Message[];
  readStates: ReadState[];
  mustSync: boolean;
}

/** A source of randomness; the driver seeds it. Returns an integer in [0, n). */
export interface Prng {
  nextInt(n: number): number;
}

export interface Logger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
}

export interface Config {
  id: NodeId;
  /** Base election timeout; the effective timeout is drawn from [base, 2*base). Default 10. */
  electionTimeoutTicks?: number;
  /** Heartbeat interval. Default 1. Must be smaller than electionTimeoutTicks. */
  heartbeatIntervalTicks?: number;
  /** Randomness for election timeouts. Required: the core has no other source. */
  prng: Prng;
  /** Index already applied by the state machine at restart. Default 0. */
  applied?: number;
  /** Bytes of entry data per append message (at least one entry is always sent). Default 1 MiB. */
  appendBytesMax?: number;
  /** Append messages in flight to one follower in replicate state. Default 256. */
  appendsInflightMax?: number;
  /** Bytes of proposals appended but not yet committed on the leader; past it, proposals are dropped. Default 64 MiB. */
  uncommittedBytesMax?: number;
  /** Entries handed to the driver per Ready for applying. Default unlimited. */
  committedBytesMax?: number;
  /** Leader steps down if it has not heard from a quorum within an election timeout. Default true. */
  checkQuorum?: boolean;
  /** Run a pre-election before raising the term. Default true. */
  preVote?: boolean;
  /** Refuse proposals on followers instead of forwarding them. Default false. */
  disableProposalForwarding?: boolean;
  /**
   * Who gets an empty append when the leader's commit index moves. 'all': every follower, as in
   * etcd. 'proposers': only followers awaiting the commit of proposals they forwarded; the others
   * learn it from the next append or heartbeat, which saves two messages per follower per commit
   * when writes come one at a time. Default 'all'.
   */
  commitNotice?: 'all' | 'proposers';
  /**
   * A follower that forwards a proposal asks the leader to say when the leader's own log is
   * durable past it ('persisted'). When the leader and that follower are a quorum of a settled
   * configuration (at most three voters, not joint, no change pending), the follower commits by
   * itself once the entries are durable on both, a hop earlier than the leader's commit notice,
   * which the 'persisted' notice replaces. A leader answers the request whatever this says;
   * a follower asks only when it is set. Default false.
   */
  followerCommit?: boolean;
  /**
   * A follower's ReadIndex is confirmed by that follower itself. When the leader and the follower
   * that asked are a quorum of a settled configuration (at most three voters, not joint, no
   * change pending), the leader answers at once with its read index instead of first confirming
   * its leadership with a heartbeat round: the follower taking the answer in a term no lower than
   * its own is the second half of the quorum (docs/raft.md). Two hops instead of four. Default
   * false.
   */
  followerReadQuorum?: boolean;
  logger?: Logger;
}

/** Why a proposal (or read, or transfer) was refused. A typed operating error, not a bug. */
export type DropReason =
  | 'noLeader'
  | 'notLeader'
  | 'transferInProgress'
  | 'confChangePending'
  | 'invalidConfChange'
  | 'uncommittedLimit'
  | 'forwardingDisabled'
  | 'removed';

export class ProposalDroppedError extends Error {
  readonly code = 'proposal_dropped';
  constructor(readonly reason: DropReason, message?: string) {
    super(message ?? `proposal dropped: ${reason}`);
    this.name = 'ProposalDroppedError';
  }
}

/** Progress states of a follower as seen by the leader. */
export type ProgressState = 'probe' | 'replicate' | 'snapshot';

export interface ProgressStatus {
  match: number;
  next: number;
  state: ProgressState;
  recentActive: boolean;
  learner: boolean;
  inflight: number;
  pendingSnapshot: number;
}

export interface Status {
  id: NodeId;
  term: number;
  vote: NodeId;
  commit: number;
  applied: number;
  lastIndex: number;
  firstIndex: number;
  role: Role;
  leader: NodeId;
  leadTransferee: NodeId;
  confState: ConfState;
  /** Present on the leader only. */
  progress?: Record<NodeId, ProgressStatus>;
}
