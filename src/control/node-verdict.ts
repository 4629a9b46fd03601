// The node-health rule: from the evidence the leader holds about one node, its state. Pure: no
// clock, no I/O; node-health.ts gathers the evidence of every node and writes what changes.
// docs/control-plane.md ("Node health") has the same table with the measurements behind the
// defaults.
//
//   healthy ──silent ≥ suspectAfterMs──▶ suspect ──silent ≥ downAfterMs, and no member hears it──▶ down
//      ▲                                  │   ▲            (refused or goodbye: silent ≥ restartGraceMs)   │
//      └────────────heard again───────────┘   └── a member hears it: stays suspect                         │
//      ▲                                          (only the leader is cut off: hand leadership over)       │
//      └─────────────────────────────── back: heard again (ready, in its raised epoch) ◀────────────────────┘
//
// - healthy (record state `ready`): heard within suspectAfterMs, by any means: a Raft message,
//   a transport frame, ping or pong, a committed write of its own (an agent report, a lease
//   renewal, its peer view).
// - suspect: silent past suspectAfterMs. It takes no new tasks and keeps its own.
// - down: silent past downAfterMs, and no member the leader hears says it hears the node (their
//   committed peer views name it unheard). Its epoch is raised and its tasks replaced. Excused
//   silences wait restartGraceMs instead: a refused connection (the machine answers, shoal is not
//   running there: its containers run on and its agent adopts them when it is back) and a goodbye
//   (a graceful stop or an upgrade's restart said so). Both hold until the node is heard again,
//   whatever the link says meanwhile.
// - back: a down node heard again is ready again in its raised epoch; its agent removes the old
//   epoch's containers before anything else. A down node not heard stays down, whatever a new
//   leader's shorter watch says.
// - leaderProblem: silent to the leader past downAfterMs while a member hears it: the leader is
//   the one cut off, not the node (node-health.ts hands leadership to a member that hears everyone).
// - mute: heard (it answers on the leader's connection) but nothing of its own reaches the
//   leader (no Raft message, no write) past downAfterMs: suspect; past twice that, down. It cannot
//   reach the log: its lease runs out and its reports never arrive.

import type { PeerLink } from '../ports/leadership.ts';
import type { NodeState } from '../resources/records.ts';

export interface NodeHealthConfig {
  /** Silence after which a node is suspect. */
  suspectAfterMs: number;
  /** Silence after which a node is down, when no member hears it either. */
  downAfterMs: number;
  /** Silence after which a node whose shoal is known to be restarting (refused, goodbye) is down. At least downAfterMs. */
  restartGraceMs: number;
}

export interface NodeEvidence {
  /** Whether it is a member (voter or learner): a node record of a non-member is down. */
  member: boolean;
  /** Ms since the leader last heard from it by any means, at most how long the leader has been listening. */
  silentMs: number;
  /** The leader's outbound connection to it. */
  link: PeerLink;
  /** It said it is stopping (a graceful stop, an upgrade's restart) and has not been heard since. */
  goodbye: boolean;
  /**
   * Its machine refused the leader's dial to the peer port (shoal not running there) and it has
   * not been heard since. Held until it is heard: the link reads 'silent' while a dial hangs on a
   * restarted shoal that listens but does not answer yet, which is no sign the machine died.
   */
  refused: boolean;
  /** Members the leader hears whose committed peer view does not name this node unheard: they hear it. */
  heardBy: readonly string[];
  /**
   * Ms since something of the node's own last reached the leader: a Raft message (sent on the
   * node's own connection) or a write of its own applied; at most how long the leader's loops
   * have run. Pings and pongs answered on the leader's connection do not count: a node that
   * answers them but cannot send (its own connections cut, its writes failing) is heard, yet
   * mute. Absent: no such evidence (0).
   */
  muteMs?: number;
}

/**
 * How long a node heard but mute may stay so before it is down: twice the down timeout (8 s by
 * default), beyond a stalled disk's few seconds (a follower answers Raft only once its write is
 * durable). Such a node cannot renew its lease or report, so its exclusive tasks die by their
 * fence and nothing it runs is seen; down, they are replaced.
 */
export const muteDownAfterMs = (c: NodeHealthConfig): number => 2 * c.downAfterMs;

export type Transition = 'healthy' | 'suspect' | 'down' | 'back';

export interface NodeJudgement {
  state: NodeState;
  /** The transition it makes from the recorded state (`healthy` for ready → ready). */
  transition: Transition;
  /** Why, in a few words, for the log. */
  reason: string;
  /** Ms until time alone may change the verdict; null when only new evidence can. */
  wakeInMs: number | null;
  /** Silent to the leader past downAfterMs, but a member hears it: the leader is the one cut off. */
  leaderProblem: boolean;
}

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** The state of one node from its recorded state and the evidence. */
export function judgeNode(recorded: NodeState, e: NodeEvidence, c: NodeHealthConfig): NodeJudgement {
  const j = (state: NodeState, reason: string, wakeInMs: number | null, leaderProblem = false): NodeJudgement => ({
    state, reason, wakeInMs: wakeInMs !== null && wakeInMs > 0 ? wakeInMs : null, leaderProblem,
    transition: state === 'ready' ? (recorded === 'down' ? 'back' : 'healthy') : state,
  });
  if (!e.member) return j('down', 'not a member of the cluster', null);
  if (e.silentMs < c.suspectAfterMs) {
    const mute = e.muteMs ?? 0;
    const muteText = `heard, but nothing of its own (a Raft message, a write) reached the leader for ${secs(mute)}`;
    if (mute >= muteDownAfterMs(c)) return j('down', `${muteText}: it cannot reach the leader, so its writes and lease renewals fail`, null);
    if (mute >= c.downAfterMs) return j(recorded === 'down' ? 'down' : 'suspect', muteText, recorded === 'down' ? null : muteDownAfterMs(c) - mute);
    return j('ready', recorded === 'down' ? 'heard again' : 'heard', c.suspectAfterMs - e.silentMs);
  }
  // Only being heard brings a down node back: a new leader's shorter watch does not.
  if (recorded === 'down') return j('down', `silent ${secs(e.silentMs)}`, null);
  if (e.heardBy.length > 0) {
    const problem = e.silentMs >= c.downAfterMs;
    return j('suspect', `silent to the leader ${secs(e.silentMs)}, heard by ${e.heardBy.join(', ')}`, problem ? null : c.downAfterMs - e.silentMs, problem);
  }
  const excuse = e.goodbye ? 'it said it was stopping' : e.refused || e.link === 'refused' ? 'its machine answers but shoal does not (peer port refused)' : null;
  if (excuse !== null) {
    if (e.silentMs >= c.restartGraceMs) return j('down', `silent ${secs(e.silentMs)}: ${excuse}, and it did not come back within ${secs(c.restartGraceMs)}`, null);
    return j('suspect', `silent ${secs(e.silentMs)}: ${excuse}; waiting up to ${secs(c.restartGraceMs)} for it to restart`, c.restartGraceMs - e.silentMs);
  }
  if (e.silentMs >= c.downAfterMs) return j('down', `silent ${secs(e.silentMs)} (link ${e.link}), and no member hears it`, null);
  return j('suspect', `silent ${secs(e.silentMs)} (link ${e.link})`, c.downAfterMs - e.silentMs);
}
