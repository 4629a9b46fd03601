// Autopilot: the leader promotes a node that joined with a voter token from learner to voter
// once it has caught up and stayed healthy for a stabilisation time, one node at a time, and
// never when the promotion would leave the cluster tolerating fewer failed voters than before.
// When configured (autopilot.deadMemberRemoveAfterMs), it also removes a member it has not heard
// from for that long, above a floor of voters (src/node/dead-members.ts).
// The decisions are pure functions (autopilotDecision, deadMemberDecision) so their rules are
// tested with tables; the class around them only gathers their input on the leader, on a timer,
// and acts.

import { promoteRefusal } from '../resources/membership-refusals.ts';
import type { DocumentStore, JsonObject } from '../../fsm/index.ts';
import type { Logger } from '../log.ts';
import { caHolderWarning } from '../security/ca-holders.ts';
import { joinIntentsCollection } from '../security/tokens.ts';
import { deadMemberDecision, type HeldMember } from './dead-members.ts';
import type { RaftNode } from './raft-node.ts';
import { compareText } from '../base/order.ts';

export const autopilotStabilizationMsDefault = 10_000;
export const autopilotMinQuorumDefault = 3;
export const autopilotIntervalMs = 1_000;

/**
 * What tells the autopilot when to run its rounds at all (issue 45: an idle node wakes only for
 * work): the node's events, and its membership. Without it (tests), rounds run every second always.
 */
export interface AutopilotWake {
  on(event: 'leaderChange' | 'applied', listener: () => void): unknown;
  off(event: 'leaderChange' | 'applied', listener: () => void): unknown;
  readonly isLeader: boolean;
  confState(): { learners: readonly string[]; learnersNext: readonly string[]; votersOutgoing: readonly string[] };
}

/** How many voters may fail with the rest still a quorum: healthy voters minus the quorum size. */
export function failureTolerance(voters: number, healthyVoters: number): number {
  return healthyVoters - (Math.floor(voters / 2) + 1);
}

export interface AutopilotInput {
  nowMs: number;
  stabilizationMs: number;
  voters: readonly string[];
  /** Voters the leader has heard from lately (itself included). */
  healthyVoters: readonly string[];
  /** Learners that joined with a voter token, and whether each is caught up and active now. */
  candidates: ReadonlyArray<{ id: string; healthy: boolean }>;
  /** Since when each candidate has been healthy without a break (kept by the caller). */
  healthySince: ReadonlyMap<string, number>;
}

export interface AutopilotDecision {
  /** The learner to promote now, if any. */
  promote: string | null;
  /** The new healthy-since map: a candidate that is not healthy starts over. */
  healthySince: Map<string, number>;
}

export function autopilotDecision(input: AutopilotInput): AutopilotDecision {
  const healthySince = new Map<string, number>();
  for (const c of input.candidates) {
    if (c.healthy) healthySince.set(c.id, input.healthySince.get(c.id) ?? input.nowMs);
  }
  const ready = [...healthySince.entries()]
    .filter(([, since]) => input.nowMs - since >= input.stabilizationMs)
    .sort(([a, sa], [b, sb]) => sa - sb || compareText(a, b));
  const first = ready[0];
  if (first === undefined || !promotionKeepsTolerance(input.voters.length, input.healthyVoters.length)) return { promote: null, healthySince };
  return { promote: first[0], healthySince };
}

/**
 * A new voter raises the quorum when the voter count becomes even. Should it fail right after its
 * promotion, the healthy voters must still tolerate as much as before (or, degraded already,
 * still make a quorum): so three voters with one down do not take a fourth. A single voter has no
 * tolerance to lose, and growing through two voters is the only way to three.
 */
export function promotionKeepsTolerance(voters: number, healthyVoters: number): boolean {
  if (voters <= 1) return true;
  const before = failureTolerance(voters, healthyVoters);
  const ifNewOneFails = failureTolerance(voters + 1, healthyVoters);
  return ifNewOneFails >= Math.min(before, 0);
}

/** What the autopilot reads and does on the node (a narrow port, so tests can fake it). */
export type AutopilotNode = Pick<RaftNode, 'id' | 'isLeader' | 'currentTerm' | 'status' | 'membership' | 'silentForMs' | 'changeMembership'>;

export interface AutopilotOptions {
  node: AutopilotNode;
  store: DocumentStore;
  log: Logger;
  stabilizationMs?: number;
  /** Remove a member silent this long (0 or absent: never). */
  deadMemberRemoveAfterMs?: number;
  /** The fewest voters dead member cleanup leaves (default 3). */
  minQuorum?: number;
  /** Rounds only while this node leads and has something to watch (a learner; dead member cleanup on); absent: always. */
  wake?: AutopilotWake;
  /** Records a cluster event (the EventLog's recordEvent). */
  record?: (type: string, subject: string, details: JsonObject) => void;
}

/**
 * Runs a round every second while this node leads and a learner waits or dead member cleanup is
 * on: removes a dead member, else promotes a learner. A follower, or a leader with only voters and
 * no cleanup, has no timer; a change of leader or an applied membership change starts it again.
 */
export class Autopilot {
  private timer: NodeJS.Timeout | undefined;
  private healthySince = new Map<string, number>();
  private busy = false;
  /** The term this node leads in, and since when (monotonic ms) each member has been one while it leads. */
  private leadingTerm: number | undefined;
  private readonly memberSince = new Map<string, number>();
  /** Dead members left in place, with the reason last logged for each. */
  private readonly heldLogged = new Map<string, string>();

  constructor(private readonly o: AutopilotOptions) {}

  private readonly onNodeEvent = (): void => { if (this.timer === undefined && this.needsRounds()) this.startTimer(); };

  start(): void {
    this.o.wake?.on('leaderChange', this.onNodeEvent);
    this.o.wake?.on('applied', this.onNodeEvent);
    if (this.needsRounds()) this.startTimer();
  }

  close(): void {
    this.o.wake?.off('leaderChange', this.onNodeEvent);
    this.o.wake?.off('applied', this.onNodeEvent);
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private startTimer(): void {
    this.timer ??= setInterval(() => { void this.round(); }, autopilotIntervalMs);
    this.timer.unref();
  }

  /** Whether rounds have anything to watch now (always, without a wake). */
  private needsRounds(): boolean {
    const w = this.o.wake;
    if (w === undefined) return true;
    if (!w.isLeader) return false;
    if ((this.o.deadMemberRemoveAfterMs ?? 0) > 0) return true;
    const cs = w.confState();
    return cs.learners.length > 0 || cs.learnersNext.length > 0 || cs.votersOutgoing.length > 0;
  }

  private async round(): Promise<void> {
    if (!this.needsRounds()) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.healthySince.clear();
      return;
    }
    if (await this.maybeRemoveDead() !== null) return;
    await this.maybePromote();
  }

  /**
   * One round of dead member cleanup; returns the removed node id, if any (tests call it with
   * their clock). `nowMs` is on the clock of RaftNode.silentForMs (performance.now()).
   */
  async maybeRemoveDead(nowMs = performance.now()): Promise<string | null> {
    const { node } = this.o;
    const removeAfterMs = this.o.deadMemberRemoveAfterMs ?? 0;
    if (removeAfterMs <= 0) return null;
    if (!node.isLeader || this.leadingTerm !== node.currentTerm) {
      this.leadingTerm = node.isLeader ? node.currentTerm : undefined;
      this.memberSince.clear();
      this.heldLogged.clear();
      if (!node.isLeader) return null;
    }
    if (this.busy) return null;
    const st = node.status();
    const cs = st.confState;
    if (cs.votersOutgoing.length > 0 || cs.learnersNext.length > 0) return null;
    const downForMs = this.downFor([...cs.voters, ...cs.learners].filter((id) => id !== node.id), nowMs);
    const d = deadMemberDecision({
      removeAfterMs, minQuorum: this.o.minQuorum ?? autopilotMinQuorumDefault, self: node.id, voters: cs.voters, learners: cs.learners,
      healthyVoters: cs.voters.filter((id) => id === node.id || st.progress?.[id]?.recentActive === true), downForMs,
    });
    this.logHeld(d.held);
    if (d.remove === null) return null;
    this.busy = true;
    try {
      await this.removeDead(d.remove, removeAfterMs);
      return d.remove.id;
    } catch (err) {
      this.o.log.warn(`autopilot: removing dead member ${d.remove.id} failed (${(err as Error).message}); trying again later`);
      return null;
    } finally {
      this.busy = false;
    }
  }

  /**
   * How long the leader has not heard from each member: its silence, but counted no further back
   * than when this node started leading (it knows nothing of what the previous leader heard) or
   * the member joined (a node added before its machine started has never spoken).
   */
  private downFor(members: readonly string[], nowMs: number): Map<string, number> {
    for (const id of [...this.memberSince.keys()]) if (!members.includes(id)) this.memberSince.delete(id);
    const downForMs = new Map<string, number>();
    for (const id of members) {
      const since = this.memberSince.get(id) ?? nowMs;
      this.memberSince.set(id, since);
      downForMs.set(id, Math.min(this.o.node.silentForMs(id) ?? Infinity, nowMs - since));
    }
    return downForMs;
  }

  private async removeDead(m: { id: string; role: 'voter' | 'learner'; downForMs: number }, removeAfterMs: number): Promise<void> {
    const { node, log } = this.o;
    const name = node.membership.get(m.id)?.name ?? m.id;
    // Read before the removal: the record outlives it, but say it with the removal's log line.
    const warning = caHolderWarning(this.o.store, m.id, name);
    try {
      await node.changeMembership({ changes: [{ type: 'removeNode', node: m.id }] });
    } catch (err) {
      // The change may have committed all the same (a timeout, or leadership lost after the
      // commit): only a member still in the configuration is tried again.
      const cs = node.status().confState;
      if (cs.voters.includes(m.id) || cs.learners.includes(m.id)) throw err;
    }
    this.heldLogged.delete(m.id);
    const downS = Math.round(m.downForMs / 1000);
    log.warn(`autopilot: removed dead ${m.role} ${name} (${m.id}): not heard from for ${downS} s (autopilot.deadMemberRemoveAfterMs ${removeAfterMs / 1000} s); its certificate is refused from now on, and the machine comes back only with a new data directory and a join token`, { member: m.id });
    if (warning !== undefined) log.warn(`autopilot: ${warning}`, { member: m.id });
    this.o.record?.('member.auto_removed', m.id, { name, role: m.role, downMs: Math.round(m.downForMs), removeAfterMs, caKeyHolder: warning !== undefined });
  }

  /** Says once (per leadership, and again when the reason changes) why a dead member stays. */
  private logHeld(held: readonly HeldMember[]): void {
    const now = new Set(held.map((h) => h.id));
    for (const id of [...this.heldLogged.keys()]) if (!now.has(id)) this.heldLogged.delete(id);
    for (const h of held) {
      if (this.heldLogged.get(h.id) === h.reason) continue;
      this.heldLogged.set(h.id, h.reason);
      const name = this.o.node.membership.get(h.id)?.name ?? h.id;
      this.o.log.warn(`autopilot: not removing dead voter ${name} (${h.id}), not heard from for ${Math.round(h.downForMs / 1000)} s: ${h.reason}`, { member: h.id });
    }
  }

  /** One round; returns the promoted node id, if any (tests call it directly). */
  async maybePromote(nowMs = Date.now()): Promise<string | null> {
    const { node, store } = this.o;
    if (this.busy || !node.isLeader) {
      if (!node.isLeader) this.healthySince.clear();
      return null;
    }
    const st = node.status();
    const cs = st.confState;
    // Mid-change (a joint configuration): wait until it is over.
    if (cs.votersOutgoing.length > 0 || cs.learnersNext.length > 0) return null;
    const candidates = cs.learners
      .filter((id) => store.get(joinIntentsCollection, id) !== undefined)
      .flatMap((id) => {
        const m = node.membership.get(id);
        return m === undefined ? [] : [{ id, healthy: promoteRefusal(st, m) === undefined }];
      });
    const healthyVoters = cs.voters.filter((id) => id === node.id || st.progress?.[id]?.recentActive === true);
    const d = autopilotDecision({
      nowMs, stabilizationMs: this.o.stabilizationMs ?? autopilotStabilizationMsDefault, voters: cs.voters, healthyVoters, candidates, healthySince: this.healthySince,
    });
    this.healthySince = d.healthySince;
    if (d.promote === null) return null;
    this.busy = true;
    try {
      await node.changeMembership({ changes: [{ type: 'addVoter', node: d.promote }] });
      this.o.log.info(`autopilot: promoted ${node.membership.get(d.promote)?.name ?? d.promote} (${d.promote}) to voter: caught up and healthy for ${(this.o.stabilizationMs ?? autopilotStabilizationMsDefault) / 1000} s`);
      this.healthySince.delete(d.promote);
      return d.promote;
    } catch (err) {
      this.o.log.warn(`autopilot: promoting ${d.promote} failed (${(err as Error).message}); trying again later`);
      return null;
    } finally {
      this.busy = false;
    }
  }
}
