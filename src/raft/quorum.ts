// Quorum arithmetic over majority and joint configurations. Pure functions of the member sets
// and what each member acknowledged.

import type { NodeId } from './types.ts';

export type VoteResult = 'pending' | 'lost' | 'won';

/** The voters of a (possibly joint) configuration. `outgoing` is empty unless joint. */
export interface JointVoters {
  incoming: ReadonlySet<NodeId>;
  outgoing: ReadonlySet<NodeId>;
}

/**
 * The largest index acknowledged by a majority of `voters`. An empty configuration commits
 * everything (so that a non-joint config's empty outgoing half never holds the joint back).
 */
export function majorityCommitted(voters: ReadonlySet<NodeId>, acked: (id: NodeId) => number): number {
  if (voters.size === 0) return Number.MAX_SAFE_INTEGER;
  const matches: number[] = [];
  for (const id of voters) matches.push(acked(id));
  matches.sort((a, b) => b - a);
  const quorum = Math.floor(voters.size / 2) + 1;
  return matches[quorum - 1] as number;
}

export function majorityVote(voters: ReadonlySet<NodeId>, votes: ReadonlyMap<NodeId, boolean>): VoteResult {
  if (voters.size === 0) return 'won';
  let granted = 0;
  let missing = 0;
  for (const id of voters) {
    const v = votes.get(id);
    if (v === undefined) missing++;
    else if (v) granted++;
  }
  const quorum = Math.floor(voters.size / 2) + 1;
  if (granted >= quorum) return 'won';
  if (granted + missing >= quorum) return 'pending';
  return 'lost';
}

export function jointCommitted(voters: JointVoters, acked: (id: NodeId) => number): number {
  return Math.min(majorityCommitted(voters.incoming, acked), majorityCommitted(voters.outgoing, acked));
}

/** A joint decision needs both halves: a loss in either loses, a win needs wins in both. */
export function jointVote(voters: JointVoters, votes: ReadonlyMap<NodeId, boolean>): VoteResult {
  const a = majorityVote(voters.incoming, votes);
  const b = majorityVote(voters.outgoing, votes);
  if (a === b) return a;
  if (a === 'lost' || b === 'lost') return 'lost';
  return 'pending';
}

/** All voters of both halves, sorted, so that iteration order is deterministic. */
export function jointIds(voters: JointVoters): NodeId[] {
  return [...new Set([...voters.incoming, ...voters.outgoing])].sort();
}
