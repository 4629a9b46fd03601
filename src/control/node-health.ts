// Node health: the leader's view of each node from the last time it heard from it (any Raft
// message counts). ready -> suspect after `suspectAfterMs` of silence (it takes no new tasks,
// keeps its own) -> down after `downAfterMs` (its epoch is raised and its tasks are replaced
// elsewhere). A node heard from again is ready again, with its raised epoch: its agent removes
// the containers of the old epoch. A new leader knows nothing of when its predecessor last heard
// from a node, so silence is counted from the start of its own loops at the earliest: nobody is
// declared down before a whole `downAfterMs` of this leader's own observation.

import { putChange, type Change } from '../resources/changes.ts';
import { nodesCollection } from '../resources/collections.ts';
import type { NodeRecord, NodeState } from '../resources/records.ts';
import type { ControlState } from '../resources/state.ts';

export interface NodeHealthConfig {
  /** Silence after which a node is suspect (default 5 s). */
  suspectAfterMs: number;
  /** Silence after which a node is down (default 15 s, at least 3 s). */
  downAfterMs: number;
}

export const nodeHealthDefaults: NodeHealthConfig = { suspectAfterMs: 5_000, downAfterMs: 15_000 };
export const downAfterMsMin = 3_000;

export interface HealthInput {
  /** This node: always in contact with itself. */
  self: string;
  /** The cluster's members (voters and learners): a node record of a non-member is down. */
  members: ReadonlySet<string>;
  /** Ms since this node last heard from `id`, or undefined if never (since it started). */
  silentForMs: (id: string) => number | undefined;
  /** Ms since this leader's loops started. */
  loopsRunningForMs: number;
}

export interface HealthDecision {
  changes: Change[];
  /** When a node crosses its next threshold, if one is silent. */
  wakeInMs: number | null;
}

export function assessNodes(state: ControlState, input: HealthInput, config: NodeHealthConfig): HealthDecision {
  const changes: Change[] = [];
  let wake: number | null = null;
  for (const { value: node, rev } of state.nodes.values()) {
    const silent = silenceOf(node, input);
    const next = stateFor(silent, config, input.members.has(node.id));
    if (next !== node.state) changes.push(putChange(nodesCollection, node.id, transition(node, next), rev));
    const untilNext = next === 'ready' ? config.suspectAfterMs - silent : next === 'suspect' ? config.downAfterMs - silent : null;
    if (untilNext !== null && untilNext > 0 && (wake === null || untilNext < wake)) wake = untilNext;
  }
  return { changes, wakeInMs: wake };
}

function silenceOf(node: NodeRecord, input: HealthInput): number {
  if (node.id === input.self) return 0;
  return Math.min(input.silentForMs(node.id) ?? Number.POSITIVE_INFINITY, input.loopsRunningForMs);
}

function stateFor(silentMs: number, config: NodeHealthConfig, member: boolean): NodeState {
  if (!member || silentMs >= config.downAfterMs) return 'down';
  return silentMs >= config.suspectAfterMs ? 'suspect' : 'ready';
}

/** Down raises the epoch: tasks placed before are the old epoch's, replaced, and their reports ignored. */
function transition(node: NodeRecord, next: NodeState): NodeRecord {
  return { ...node, state: next, epoch: next === 'down' ? node.epoch + 1 : node.epoch };
}
