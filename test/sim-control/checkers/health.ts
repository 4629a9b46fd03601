// Checker: no false "down". A node is declared down (its epoch raised, its tasks replaced) only
// when it may really be lost. Two cases are never lost, from the world's own knowledge at the
// moment the deciding leader's node health decided:
//
// - up but cut off from the leader alone: the node's shoal ran (unfrozen) the whole window, and
//   some other member ran too, reached the node and was reached by the leader the whole window.
//   That member's peer view says it hears the node, so the node is not dead: the leader is the one
//   cut off. The window is the down timeout or the time a member's view takes to say so
//   (unheardAfterMs, one write's spacing), whichever is longer, plus a slack for that write to
//   commit and reach the leader's applied store (a node may lag or stall applying);
// - restarting: its machine answered the leader with a refused peer port, or its shoal said
//   goodbye as it stopped, and the leader had heard nothing from it for less than the restart
//   grace (less a slack: the decision's write is proposed a moment after it reads the evidence).

import { Violation } from './violation.ts';

/** The world's view of one node when a leader's node health decided. */
export interface HealthFact {
  /** How long its shoal has run unfrozen without a break; null: not now (stopped, frozen, machine off). */
  aliveForMs: number | null;
  /**
   * The longest time some other member has without a break run, reached this node and been
   * reached by the deciding leader; null: no such member now.
   */
  relayedForMs: number | null;
  /** The deciding leader's silence from it, as its node health counts it. */
  silenceMs: number;
  /** Why its silence is excused: its machine refuses the peer port, or it said goodbye; null: neither. */
  restarting: 'refused' | 'goodbye' | null;
}

export interface HealthLimits {
  downAfterMs: number;
  restartGraceMs: number;
  /** A member's view threshold plus the least spacing of its writes. */
  viewDelayMs: number;
  slackMs: number;
}

export class HealthChecker {
  constructor(private readonly limits: HealthLimits) {}

  /** Node `nodeId` was declared down by a decision that knew `fact` (undefined: not a node-health decision). */
  observe(index: number, nodeId: string, decider: string, fact: HealthFact | undefined): void {
    if (fact === undefined) return;
    const l = this.limits;
    const what = `${nodeId} declared down (entry ${index}, decided by ${decider})`;
    const windowMs = Math.max(l.downAfterMs, l.viewDelayMs) + l.slackMs;
    if (fact.aliveForMs !== null && fact.relayedForMs !== null && fact.aliveForMs >= windowMs && fact.relayedForMs >= windowMs) {
      throw new Violation('health', `${what}: it was up for ${fact.aliveForMs} ms and a member that the leader reached had reached it for ${fact.relayedForMs} ms (≥ ${windowMs} ms): only the leader was cut off from it`);
    }
    if (fact.restarting !== null && fact.silenceMs < l.restartGraceMs - 1_000) {
      throw new Violation('health', `${what}: it was restarting (${fact.restarting}) and silent only ${fact.silenceMs} ms, below the restart grace of ${l.restartGraceMs} ms`);
    }
  }
}
