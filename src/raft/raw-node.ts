// The public face of the consensus core: methods that check their arguments and turn calls into
// messages for the state machine, and the Ready/advance handshake with the driver.

import { assert } from '../base/assert.ts';
import { isLocalMessage, message, Raft } from './raft.ts';
import type { LogStorage } from './storage.ts';
import {
  NONE, ProposalDroppedError,
  type ConfChange, type ConfState, type Config, type HardState, type Message, type NodeId, type Ready,
  type SoftState, type Status,
} from './types.ts';

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

export class RawNode {
  private readonly raft: Raft;
  private prevSoft: SoftState;
  private prevHard: HardState;
  /** The Ready handed out and not yet advanced. */
  private outstanding: Ready | undefined = undefined;

  constructor(config: Config, storage: LogStorage) {
    this.raft = new Raft(config, storage);
    this.prevSoft = this.raft.softState();
    this.prevHard = this.raft.hardState();
  }

  get id(): NodeId {
    return this.raft.id;
  }

  /** Advances the logical clock by one tick (elections, heartbeats, quorum checks). */
  tick(): void {
    this.raft.tick();
  }

  /** Starts an election now (a pre-election first when PreVote is on). */
  campaign(): void {
    this.raft.step(message({ type: 'hup', from: this.raft.id }));
  }

  /** Feeds a message received from a peer. Local message types are refused. */
  step(m: Message): void {
    if (isLocalMessage(m.type)) throw new TypeError(`step: '${m.type}' is a local message and cannot come from a peer`);
    if (m.from === NONE) throw new TypeError(`step: message '${m.type}' has no sender`);
    this.raft.step(m);
  }

  /**
   * Proposes data to be appended to the log. On a follower the proposal is forwarded to the
   * leader and may be lost; the caller learns of success only by seeing it applied.
   * @throws ProposalDroppedError when refused here (no leader, transfer in progress, limits).
   */
  propose(data: Uint8Array): void {
    this.proposeBatch([data]);
  }

  /**
   * Proposes several entries as one proposal: they are appended together and travel in the same
   * appends, and are refused together.
   * @throws ProposalDroppedError when refused here (no leader, transfer in progress, limits).
   */
  proposeBatch(data: readonly Uint8Array[]): void {
    if (data.length === 0) throw new TypeError('proposeBatch: no entries');
    const entries = data.map((d) => ({ kind: 'normal' as const, term: 0, index: 0, data: d }));
    this.stepOrThrow(message({ type: 'prop', from: this.raft.id, entries }));
  }

  /** Proposes a membership change. Only one may be pending at a time. */
  proposeConfChange(cc: ConfChange): void {
    if (!Array.isArray(cc.changes)) throw new TypeError('proposeConfChange: changes must be an array');
    if (cc.changes.length === 0 && cc.leaveJoint !== true) throw new TypeError('proposeConfChange: no changes (set leaveJoint to leave a joint config)');
    for (const c of cc.changes) {
      if (typeof c.node !== 'string' || c.node === NONE) throw new TypeError('proposeConfChange: every change must name a node');
    }
    this.stepOrThrow(message({ type: 'prop', from: this.raft.id, entries: [{ kind: 'conf', term: 0, index: 0, change: cc }] }));
  }

  /**
   * Requests a linearizable read. A ReadState with the same context appears in a later Ready once
   * leadership is confirmed; serve the read when the applied index reaches its index. The context
   * must be unique among this node's outstanding reads.
   */
  readIndex(context: string): void {
    this.stepOrThrow(message({ type: 'readIndex', from: this.raft.id, context }));
  }

  /** Asks the leader to hand leadership to `to` (which must be a voter). */
  transferLeadership(to: NodeId): void {
    if (to === NONE) throw new TypeError('transferLeadership: no target');
    this.stepOrThrow(message({ type: 'transferLeader', from: to, to: this.raft.id }));
  }

  /**
   * The driver could not reach `id`: a leader stops pipelining to it until it answers again.
   * `connectionLost`: the connection to `id` closed, rather than one message being dropped (a
   * full queue); only then does a follower take its leader for gone and campaign early.
   */
  reportUnreachable(id: NodeId, connectionLost = true): void {
    this.raft.step(message({ type: 'unreachable', from: id, reject: !connectionLost }));
  }

  /** The driver finished (ok) or gave up (failed) sending a snapshot to `id`. */
  reportSnapshot(id: NodeId, ok: boolean): void {
    this.raft.step(message({ type: 'snapStatus', from: id, reject: !ok }));
  }

  private stepOrThrow(m: Message): void {
    const dropped = this.raft.step(m);
    if (dropped !== null) throw new ProposalDroppedError(dropped);
  }

  hasReady(): boolean {
    const r = this.raft;
    return (
      r.msgs.length > 0 ||
      r.readStates.length > 0 ||
      r.log.unstableEntries().length > 0 ||
      r.log.hasPendingSnapshot() ||
      r.log.hasNextCommittedEntries() ||
      !sameHardState(r.hardState(), this.prevHard) ||
      r.lead !== this.prevSoft.leader || r.role !== this.prevSoft.role
    );
  }

  /** The next batch of work. Call advance() with it before calling ready() again. */
  ready(): Ready {
    assert(this.outstanding === undefined, 'ready() called again before advance()');
    const r = this.raft;
    const entries = r.log.unstableEntries().slice();
    const snapshot = r.log.unstable.snapshot;
    const hardState = r.hardState();
    const soft = r.softState();
    const committedEntries = r.log.nextCommittedEntries();
    const rd: Ready = {
      entries,
      committedEntries,
      messages: r.msgs,
      readStates: r.readStates,
      // A membership change takes effect when applied, and a restart re-derives the membership
      // from the durable commit index: losing that commit in a crash would bring the node back
      // in the old configuration, whose removed members may be gone for good.
      mustSync: entries.length > 0 || snapshot !== undefined ||
        hardState.term !== this.prevHard.term || hardState.vote !== this.prevHard.vote ||
        committedEntries.some((e) => e.kind === 'conf'),
    };
    if (!sameHardState(hardState, this.prevHard)) rd.hardState = hardState;
    if (soft.leader !== this.prevSoft.leader || soft.role !== this.prevSoft.role) rd.softState = soft;
    if (snapshot !== undefined) rd.snapshot = snapshot;
    r.msgs = [];
    r.readStates = [];
    this.outstanding = rd;
    return rd;
  }

  /**
   * The driver persisted, sent and applied `rd`. Conf change entries among its committed
   * entries take effect here, in log order.
   */
  advance(rd: Ready): void {
    assert(this.outstanding === rd, 'advance() must be given the Ready returned by the last ready()');
    this.outstanding = undefined;
    const r = this.raft;
    if (rd.hardState) this.prevHard = rd.hardState;
    if (rd.softState) this.prevSoft = rd.softState;
    if (rd.snapshot) {
      r.log.stableSnapTo(rd.snapshot.meta.index);
      if (rd.snapshot.meta.index > r.log.applied) r.log.appliedTo(rd.snapshot.meta.index);
    }
    const last = rd.entries[rd.entries.length - 1];
    if (last) r.log.stableTo(last.index, last.term);
    if (last || rd.snapshot) r.persisted();
    for (const e of rd.committedEntries) {
      if (e.kind === 'conf') {
        r.log.appliedTo(e.index);
        r.applyConfChange(e.change);
      }
    }
    const lastApplied = rd.committedEntries[rd.committedEntries.length - 1];
    if (lastApplied) {
      r.reduceUncommittedBytes(rd.committedEntries);
      r.appliedTo(lastApplied.index);
    }
  }

  /**
   * Whether a membership change is in flight: one proposed and not yet applied (a new leader
   * counts its whole log as such until it applied it), or a joint configuration not yet left.
   * A change proposed meanwhile is refused with `confChangePending`.
   */
  confChangeInFlight(): boolean {
    return this.raft.confChangeInFlight();
  }

  /** The membership as of the applied index. */
  confState(): ConfState {
    return this.raft.tracker.confState();
  }

  status(): Status {
    const r = this.raft;
    const st: Status = {
      id: r.id, term: r.term, vote: r.vote, commit: r.log.committed, applied: r.log.applied,
      lastIndex: r.log.lastIndex(), firstIndex: r.log.firstIndex(), role: r.role, leader: r.lead,
      leadTransferee: r.leadTransferee, confState: r.tracker.confState(),
    };
    if (r.role === 'leader') {
      st.progress = {};
      for (const [id, pr] of r.tracker.progress) st.progress[id] = pr.status();
    }
    return st;
  }
}
