// Dead member cleanup, the rule (Consul autopilot's CleanupDeadServers with MinQuorum): the leader
// removes a member it has not heard from for `removeAfterMs`, one at a time, and a voter only
// when the voters left stay at or above the floor `minQuorum` and the healthy ones still make a
// quorum. A pure function, tested with tables; src/node/autopilot.ts gathers its input and acts.

import { compareText } from '../base/order.ts';

export interface DeadMemberInput {
  /** How long a member must have been silent before it is removed; 0 turns cleanup off. */
  removeAfterMs: number;
  /** The fewest voters the cluster may keep: a voter is never removed below it. */
  minQuorum: number;
  /** The leader (never removed by itself). */
  self: string;
  voters: readonly string[];
  learners: readonly string[];
  /** Voters the leader has heard from lately (itself included). */
  healthyVoters: readonly string[];
  /**
   * How long the leader has not heard from each member. A leader counts no further back than its
   * own start of leading: it knows nothing of what the previous leader heard.
   */
  downForMs: ReadonlyMap<string, number>;
}

/** A dead member left in place, and why (the autopilot logs it once). */
export interface HeldMember {
  id: string;
  downForMs: number;
  reason: string;
}

export interface DeadMemberDecision {
  remove: { id: string; role: 'voter' | 'learner'; downForMs: number } | null;
  held: HeldMember[];
}

/** The votes that make a quorum of `voters`. */
export const quorumOf = (voters: number): number => Math.floor(voters / 2) + 1;

export function deadMemberDecision(input: DeadMemberInput): DeadMemberDecision {
  const held: HeldMember[] = [];
  if (input.removeAfterMs <= 0) return { remove: null, held };
  const voters = new Set(input.voters);
  const dead = [...input.voters, ...input.learners]
    .filter((id) => id !== input.self)
    .map((id) => ({ id, downForMs: input.downForMs.get(id) ?? 0 }))
    .filter((m) => m.downForMs >= input.removeAfterMs)
    .sort((a, b) => b.downForMs - a.downForMs || compareText(a.id, b.id));
  for (const m of dead) {
    if (!voters.has(m.id)) return { remove: { ...m, role: 'learner' }, held };
    const reason = voterRemovalRefusal(input, m.id);
    if (reason === undefined) return { remove: { ...m, role: 'voter' }, held };
    held.push({ ...m, reason });
  }
  return { remove: null, held };
}

/**
 * Why voter `id` must stay, or undefined when it may go. The healthy voters must be a quorum of
 * the voters now, or the removal cannot commit; a quorum of n voters is one of n - 1 too, so the
 * cluster after the removal has a quorum as well.
 */
function voterRemovalRefusal(input: DeadMemberInput, id: string): string | undefined {
  const left = input.voters.length - 1;
  if (left < input.minQuorum) {
    return `removing it would leave ${left} voter${left === 1 ? '' : 's'}, below autopilot.minQuorum (${input.minQuorum})`;
  }
  const healthy = input.healthyVoters.filter((v) => v !== id).length;
  if (healthy < quorumOf(input.voters.length)) {
    return `only ${healthy} of ${input.voters.length} voters are healthy, no quorum: removing a voter now could lose the quorum`;
  }
  return undefined;
}
