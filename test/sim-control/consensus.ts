// Consensus, modelled rather than run: one global log of committed entries, each with the term
// of the leader that appended it; a leader per term, elected by the world only among nodes that
// are up and connected to a majority; what each node believes (its term, whether it leads),
// which it learns a little late; and proposals that reach the log late or not at all.
//
// The paths a leader loop's proposal (fenced with the loop's term) can take, as in the real
// driver (src/node/raft-node.ts) and Raft:
//   - its node still leads that term: appended in that term;
//   - its node was deposed and does not know yet: the entry sits in its own log and is lost when
//     it learns; or, at the election that deposed it, the entry had reached the new leader and
//     commits in the old term ahead of the new leader's first entry (`survive`);
//   - its node knows it is a follower when the queued proposal is stepped: forwarded to the
//     new leader and appended in the new term (`forward`), where fencing must refuse it.
// An agent's write goes to whoever leads, when its node can reach the leader.

import { ShoalError } from '../../src/errors.ts';
import type { ProposalResult } from '../../src/node/raft-node.ts';
import type { SeededPrng } from '../../src/raft/prng.ts';
import type { LogEntry, Origin, Proposal } from './log-entry.ts';
import type { ConsensusKnobs } from './scenario.ts';
import type { Session } from './session.ts';
import type { SimNode } from './sim-node.ts';
import type { SimStats } from './stats.ts';

/** What the model needs to know of the world. */
export interface Cluster {
  readonly nodes: readonly SimNode[];
  readonly step: number;
  now(): number;
  /** Up and on the same side of the network. */
  connected(a: SimNode, b: SimNode): boolean;
  log(line: string): void;
}

type Route = 'append' | 'forward' | 'hold' | 'drop' | 'lost';

export class Consensus {
  readonly entries: LogEntry[] = [];
  term = 0;
  leader: SimNode | null = null;
  /** Called for every entry as it is appended (the reference store and the checkers). */
  onAppend: (e: LogEntry) => void = () => {};
  private electionAt: number | null = null;
  private inflight: Proposal[] = [];
  private seq = 0;
  private readonly majority: number;

  constructor(private readonly c: Cluster, private readonly prng: SeededPrng, private readonly knobs: ConsensusKnobs, private readonly stats: SimStats) {
    this.majority = Math.floor(c.nodes.length / 2) + 1;
  }

  get lastIndex(): number {
    return this.entries.length;
  }

  /** Up nodes connected to `n`, itself included. */
  componentSize(n: SimNode): number {
    if (!n.isUp) return 0;
    let size = 0;
    for (const m of this.c.nodes) if (m === n || this.c.connected(n, m)) size++;
    return size;
  }

  hasMajority(n: SimNode): boolean {
    return this.componentSize(n) >= this.majority;
  }

  leaderValid(): boolean {
    const l = this.leader;
    return l !== null && l.isUp && l.role === 'leader' && l.knownTerm === this.term && this.hasMajority(l);
  }

  /** The node can reach the leader of the current term (or is it). */
  reachesLeader(n: SimNode): boolean {
    const l = this.leader;
    return l !== null && this.leaderValid() && n.isUp && (n === l || this.c.connected(n, l));
  }

  // ---- each step ----

  stepLeadership(): void {
    this.checkQuorum();
    if (this.leaderValid()) {
      this.electionAt = null;
    } else {
      if (this.leader !== null) this.c.log(`no leader: ${this.leader.id} (term ${this.term}) lost its majority or stopped`);
      this.leader = null;
      this.electionAt ??= this.c.step + 1 + this.prng.nextInt(this.knobs.electionDelayStepsMax);
      if (this.c.step >= this.electionAt) {
        const candidates = this.c.nodes.filter((n) => n.isUp && this.hasMajority(n));
        if (candidates.length > 0) this.elect(candidates[this.prng.nextInt(candidates.length)] as SimNode);
        else this.electionAt = null;
      }
    }
    this.spreadTerm();
  }

  /** A leadership change while the leader lives (a transfer, a missed heartbeat): a new term. */
  forceElection(): void {
    const l = this.leader;
    if (l === null || !this.leaderValid()) return;
    const candidates = this.c.nodes.filter((n) => n === l || (n.isUp && this.c.connected(n, l)));
    this.c.log(`leadership change requested (leader ${l.id}, term ${this.term})`);
    this.elect(candidates[this.prng.nextInt(candidates.length)] as SimNode);
  }

  /**
   * The leader hands leadership to `to` (node health: a node that only the leader cannot hear), as
   * a transfer does: only if `to` is up, reached by the leader and part of a majority; false if not.
   */
  transferTo(from: SimNode, to: SimNode): boolean {
    const l = this.leader;
    if (l !== from || !this.leaderValid() || to === l || !to.isUp || !this.c.connected(l, to) || !this.hasMajority(to)) return false;
    this.c.log(`leadership transfer from ${l.id} to ${to.id} (term ${this.term})`);
    this.elect(to);
    return true;
  }

  /** Proposals whose time has come: appended, forwarded, held or lost. */
  stepDeliveries(): void {
    const keep: Proposal[] = [];
    for (const p of this.inflight) {
      if (p.deliverStep > this.c.step) {
        keep.push(p);
        continue;
      }
      const route = this.route(p);
      if (route === 'hold') {
        keep.push(p);
      } else if (route === 'append') {
        this.append(this.term, p.data, p.origin, p);
      } else if (route === 'forward') {
        this.stats.forwarded++;
        this.c.log(`forwarded: ${describeOrigin(p.origin)} (fenced t${p.fenceTerm}) appended in term ${this.term}`);
        this.append(this.term, p.data, p.origin, p);
      } else {
        if (route === 'lost') this.stats.lost++;
        p.settle({ err: new ShoalError('proposal_dropped', 'the proposal was lost with a change of leader') });
      }
    }
    this.inflight = keep;
  }

  // ---- proposals ----

  /**
   * A node's proposal, as RaftNode.propose: refused at once (thrown) when it is fenced with a
   * term the node does not lead; resolves with the result once its entry is applied on the node.
   */
  propose(n: SimNode, session: Session, data: Uint8Array, fenceTerm: number | null, origin: Origin): Promise<ProposalResult> {
    if (fenceTerm !== null && (fenceTerm !== n.knownTerm || n.role !== 'leader')) {
      throw new ShoalError('stale_term', `decided in term ${fenceTerm}, but ${n.id} is ${n.role} in term ${n.knownTerm}`);
    }
    if (n.role !== 'leader' && !this.reachesLeader(n)) return Promise.reject(new ShoalError('no_leader', `${n.id} knows no leader`));
    return new Promise<ProposalResult>((resolve, reject) => {
      let settled = false;
      const timer = session.clock.setTimer(this.knobs.proposalTimeoutMs, () => settle({ err: new ShoalError('timeout', 'the proposal was not applied in time; its outcome is unknown') }));
      const settle = (o: { ok: ProposalResult } | { err: Error }): void => {
        if (settled) return;
        settled = true;
        timer.cancel();
        if ('ok' in o) resolve(o.ok);
        else reject(o.err);
      };
      const step = this.c.step;
      this.inflight.push({
        seq: ++this.seq, node: n.id, session, data, fenceTerm, origin, inOwnLog: false, settle,
        deliverStep: step + this.prng.nextInt(this.knobs.proposeDelayStepsMax + 1),
        expireStep: step + 1 + this.prng.nextInt(this.knobs.holdStepsMax),
      });
    });
  }

  /** Proposals on their way to the log (queued, forwarded or held), oldest first. */
  get pending(): readonly Proposal[] {
    return this.inflight;
  }

  /** What of `session`'s proposals is still open: queued or held ones, and the last index it had appended. */
  pendingOf(session: Session): { queued: number; lastAppended: number } {
    let lastAppended = 0;
    for (const e of this.entries) if (e.proposal?.session === session) lastAppended = e.index;
    return { queued: this.inflight.filter((p) => p.session === session).length, lastAppended };
  }

  /** A client's write through the leader (the operator); null when there is no leader. */
  appendClient(data: Uint8Array, origin: Origin): LogEntry | null {
    if (!this.leaderValid()) return null;
    return this.append(this.term, data, origin, null);
  }

  // ---- internals ----

  private route(p: Proposal): Route {
    const n = this.c.nodes.find((x) => x.id === p.node) as SimNode;
    const expired = this.c.step >= p.expireStep;
    // Shoal on that node died: what it had queued died with it.
    if (!n.isUp || n.session !== p.session) return 'lost';
    if (p.fenceTerm !== null) {
      if (this.leaderValid() && this.leader === n && this.term === p.fenceTerm) return 'append';
      if (n.role === 'leader' && n.knownTerm === p.fenceTerm) {
        // A deposed leader that does not know it: the entry goes to its own log.
        p.inOwnLog = true;
        return expired ? 'lost' : 'hold';
      }
      // It knows it was deposed. An entry already in its own log is truncated; one still queued
      // is forwarded to the new leader.
      if (p.inOwnLog) return 'lost';
      if (this.reachesLeader(n)) return this.prng.chance(this.knobs.forward) ? 'forward' : 'drop';
      return expired ? 'lost' : 'hold';
    }
    if (this.reachesLeader(n)) return 'append';
    return expired ? 'lost' : 'hold';
  }

  private append(term: number, data: Uint8Array | null, origin: Origin, proposal: Proposal | null): LogEntry {
    const e: LogEntry = { index: this.entries.length + 1, term, logTimeMs: this.c.now(), data, origin, proposal, result: null };
    this.entries.push(e);
    this.onAppend(e);
    return e;
  }

  private elect(n: SimNode): void {
    const old = this.term;
    // Entries the old leader had appended and replicated before it lost office reach the new
    // leader's log and commit in their own term, ahead of the new leader's first entry.
    if (this.knobs.survive > 0) {
      const survivors = new Set<Proposal>();
      for (const p of this.inflight) {
        if (p.fenceTerm !== old || !this.prng.chance(this.knobs.survive)) continue;
        survivors.add(p);
        this.stats.survived++;
        this.c.log(`survived: ${describeOrigin(p.origin)} commits in term ${old} before the new leader's first entry`);
        this.append(old, p.data, p.origin, p);
      }
      if (survivors.size > 0) this.inflight = this.inflight.filter((p) => !survivors.has(p));
    }
    this.term++;
    this.leader = n;
    this.electionAt = null;
    n.knownTerm = this.term;
    n.role = 'leader';
    n.learnAt = null;
    n.isolatedSteps = 0;
    this.stats.elections++;
    this.c.log(`ELECTED ${n.id} leader of term ${this.term}`);
    this.append(this.term, null, { kind: 'empty' }, null);
  }

  /** Nodes connected to the leader hear of its term, after a delay; a stale leader then steps down. */
  private spreadTerm(): void {
    for (const n of this.c.nodes) {
      if (!n.isUp || n === this.leader) continue;
      const behind = n.knownTerm < this.term || n.role === 'leader';
      if (!behind || !this.reachesLeader(n)) continue;
      n.learnAt ??= this.c.step + this.prng.nextInt(this.knobs.learnDelayStepsMax + 1);
      if (this.c.step < n.learnAt) continue;
      if (n.role === 'leader') this.c.log(`${n.id} learns of term ${this.term}: no longer leader of term ${n.knownTerm}`);
      n.knownTerm = this.term;
      n.role = 'follower';
      n.learnAt = null;
    }
  }

  /** A leader cut off from a majority for checkQuorumSteps steps down (when the seed runs CheckQuorum). */
  private checkQuorum(): void {
    for (const n of this.c.nodes) {
      if (!n.isUp || n.role !== 'leader') continue;
      if (this.hasMajority(n)) {
        n.isolatedSteps = 0;
        continue;
      }
      n.isolatedSteps++;
      if (this.knobs.checkQuorumSteps !== null && n.isolatedSteps >= this.knobs.checkQuorumSteps) {
        n.role = 'follower';
        this.c.log(`${n.id} steps down (CheckQuorum: no majority for ${n.isolatedSteps} steps)`);
      }
    }
  }
}

export function describeOrigin(o: Origin): string {
  switch (o.kind) {
    case 'empty': return 'empty';
    case 'operator': return `operator ${o.what}`;
    case 'agent': return `agent ${o.node}`;
    case 'loop': return `loop ${o.node}/t${o.term} ${o.key}`;
  }
}
