// Node health: the leader's pass over every node record. It gathers each node's evidence (what
// the leader hears of it, its connection, a goodbye, and the other members' committed peer views),
// judges it with the rule (node-verdict.ts), and writes what changed: ready, suspect, or down
// (which raises the node's epoch, so its tasks are orphaned and replaced). Pure: no clock, no I/O.
//
// The other members' word counts only from members the leader hears itself, and only as a
// committed peer view (src/resources/peer-views.ts): a member without one says nothing. When a
// node is silent to the leader alone (a member hears it), the leader is the one cut off: it hands
// leadership to a voter that hears every member, at most once per `transferCooldownMs` (and the
// new leader's own watch must run a whole down timeout before it judges anyone).

import { putChange, type Change } from '../resources/changes.ts';
import { nodesCollection } from '../resources/collections.ts';
import type { PeerLink } from '../ports/leadership.ts';
import type { NodeRecord, NodeState } from '../resources/records.ts';
import type { ControlState } from '../resources/state.ts';
import { judgeNode, type NodeHealthConfig, type NodeJudgement } from './node-verdict.ts';

export type { NodeHealthConfig } from './node-verdict.ts';

/**
 * Defaults (docs/control-plane.md, "Node health", has the measurements behind them): a node
 * heard within 1.5 s is healthy; silent 4 s with no member hearing it, down; a shoal known to
 * be restarting (its machine refuses the peer port, or it said goodbye) gets 30 s.
 */
export const nodeHealthDefaults: NodeHealthConfig = { suspectAfterMs: 1_500, downAfterMs: 4_000, restartGraceMs: 30_000 };
export const downAfterMsMin = 3_000;
/** A leader hands leadership over for a node only it cannot hear at most this often. */
export const transferCooldownMs = 60_000;

/** What the leader knows first-hand of one node. */
export interface NodeContact {
  /** Ms since the leader last heard from it by any means; undefined: never. */
  heardAgoMs: number | undefined;
  /** How long the leader has been listening for it: silence counts from then at the most. */
  watchingForMs: number;
  link: PeerLink;
  goodbye: boolean;
  /** Its machine refused the leader's dial since it was last heard, whatever the link says now. */
  refused: boolean;
  /**
   * Ms since something of its own reached this leader (a Raft message, a write of its own
   * applied), at most how long the leader's loops have run; absent: not known (node-verdict.ts, `muteMs`).
   */
  muteMs?: number;
}

export interface HealthInput {
  /** This node: always in contact with itself. */
  self: string;
  /** The cluster's members (voters and learners): a node record of a non-member is down. */
  members: ReadonlySet<string>;
  /** The voters: who leadership may be handed to. */
  voters: ReadonlySet<string>;
  contact(id: string): NodeContact;
  /** Each node's committed peer view: the members it does not hear. */
  views: ReadonlyMap<string, ReadonlySet<string>>;
  /** Ms since this node last handed leadership over for node health; undefined: never. */
  lastTransferAgoMs: number | undefined;
}

export interface HealthDecision {
  changes: Change[];
  /** When a node crosses its next threshold, if one is silent. */
  wakeInMs: number | null;
  /** Hand leadership to this voter: a node is silent to this leader alone. */
  transferTo: string | null;
  /** Each node whose state changes, with the judgement (for the log). */
  verdicts: { nodeId: string; from: NodeState; judgement: NodeJudgement }[];
}

export function assessNodes(state: ControlState, input: HealthInput, config: NodeHealthConfig): HealthDecision {
  const changes: Change[] = [];
  const verdicts: HealthDecision['verdicts'] = [];
  let wake: number | null = null;
  let leaderProblem = false;
  const silent = silenceOf(input);
  for (const { value: node, rev } of state.nodes.values()) {
    const c = input.contact(node.id);
    const judgement = node.id === input.self
      ? judgeNode(node.state, { member: input.members.has(node.id), silentMs: 0, link: 'connected', goodbye: false, refused: false, heardBy: [] }, config)
      : judgeNode(node.state, {
        member: input.members.has(node.id), silentMs: silent(node.id), link: c.link, goodbye: c.goodbye, refused: c.refused, heardBy: hearers(node.id, input, silent, config),
        ...(c.muteMs !== undefined ? { muteMs: c.muteMs } : {}),
      }, config);
    if (judgement.state !== node.state) {
      changes.push(putChange(nodesCollection, node.id, transition(node, judgement.state), rev));
      verdicts.push({ nodeId: node.id, from: node.state, judgement });
    }
    if (judgement.leaderProblem) leaderProblem = true;
    if (judgement.wakeInMs !== null && (wake === null || judgement.wakeInMs < wake)) wake = judgement.wakeInMs;
  }
  const transferTo = leaderProblem ? transferTarget(input, silent, config) : null;
  return { changes, wakeInMs: wake, transferTo, verdicts };
}

/** Ms each node has been silent to this leader, at most how long it has been listening. */
function silenceOf(input: HealthInput): (id: string) => number {
  return (id) => {
    if (id === input.self) return 0;
    const c = input.contact(id);
    return Math.min(c.heardAgoMs ?? Number.POSITIVE_INFINITY, c.watchingForMs);
  };
}

/** The members the leader hears whose committed view does not name `id` unheard. */
function hearers(id: string, input: HealthInput, silent: (id: string) => number, config: NodeHealthConfig): string[] {
  const out: string[] = [];
  for (const m of [...input.members].sort()) {
    if (m === id || m === input.self || silent(m) >= config.suspectAfterMs) continue;
    const unheard = input.views.get(m);
    if (unheard !== undefined && !unheard.has(id)) out.push(m);
  }
  return out;
}

/**
 * A voter the leader hears whose committed view names no member unheard, by id; null when there
 * is none, or this leader handed over within the cooldown.
 */
function transferTarget(input: HealthInput, silent: (id: string) => number, config: NodeHealthConfig): string | null {
  if (input.lastTransferAgoMs !== undefined && input.lastTransferAgoMs < transferCooldownMs) return null;
  for (const v of [...input.voters].sort()) {
    if (v === input.self || !input.members.has(v) || silent(v) >= config.suspectAfterMs) continue;
    const unheard = input.views.get(v);
    if (unheard !== undefined && [...input.members].every((m) => m === v || !unheard.has(m))) return v;
  }
  return null;
}

/** Down raises the epoch: tasks placed before are the old epoch's, replaced, and their reports ignored. */
function transition(node: NodeRecord, next: NodeState): NodeRecord {
  return { ...node, state: next, epoch: next === 'down' ? node.epoch + 1 : node.epoch };
}
