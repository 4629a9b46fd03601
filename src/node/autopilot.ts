// Autopilot: the leader promotes a node that joined with a voter token from learner to voter
// once it has caught up and stayed healthy for a stabilisation time, one node at a time, and
// never when the promotion would leave the cluster tolerating fewer failed voters than before.
// The decision is a pure function (autopilotDecision) so its rules are tested with tables; the
// class around it only gathers its input on the leader, on a timer, and acts.

import { promoteRefusal } from '../api/cluster-routes.ts';
import type { DocumentStore } from '../../fsm/index.ts';
import type { Logger } from '../log.ts';
import { joinIntentsCollection } from '../security/tokens.ts';
import type { RaftNode } from './raft-node.ts';

export const autopilotStabilizationMsDefault = 10_000;
export const autopilotIntervalMs = 1_000;

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
    .sort(([a, sa], [b, sb]) => sa - sb || a.localeCompare(b));
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

export interface AutopilotOptions {
  node: RaftNode;
  store: DocumentStore;
  log: Logger;
  stabilizationMs?: number;
}

/** Runs autopilotDecision every second while this node leads, and promotes what it says. */
export class Autopilot {
  private timer: NodeJS.Timeout | undefined;
  private healthySince = new Map<string, number>();
  private busy = false;

  constructor(private readonly o: AutopilotOptions) {}

  start(): void {
    this.timer ??= setInterval(() => { void this.maybePromote(); }, autopilotIntervalMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
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
