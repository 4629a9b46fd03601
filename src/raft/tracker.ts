// The leader's view of the cluster: the membership configuration, each member's progress and
// the votes of the current election. Quorum questions are answered here, by the config.

import { assert } from '../base/assert.ts';
import { Progress } from './progress.ts';
import { jointCommitted, jointIds, jointVote, type JointVoters, type VoteResult } from './quorum.ts';
import type { ConfState, NodeId } from './types.ts';

export interface TrackerConfig {
  voters: { incoming: Set<NodeId>; outgoing: Set<NodeId> };
  /** Learners; disjoint from both halves of `voters`. */
  learners: Set<NodeId>;
  /** Outgoing voters that become learners when the joint config is left; disjoint from `learners`. */
  learnersNext: Set<NodeId>;
  autoLeave: boolean;
}

export function configFromConfState(cs: ConfState): TrackerConfig {
  return {
    voters: { incoming: new Set(cs.voters), outgoing: new Set(cs.votersOutgoing) },
    learners: new Set(cs.learners),
    learnersNext: new Set(cs.learnersNext),
    autoLeave: cs.votersOutgoing.length > 0 && cs.autoLeave,
  };
}

export function confStateOf(cfg: TrackerConfig): ConfState {
  return {
    voters: [...cfg.voters.incoming].sort(),
    votersOutgoing: [...cfg.voters.outgoing].sort(),
    learners: [...cfg.learners].sort(),
    learnersNext: [...cfg.learnersNext].sort(),
    autoLeave: cfg.autoLeave,
  };
}

export function cloneConfig(cfg: TrackerConfig): TrackerConfig {
  return {
    voters: { incoming: new Set(cfg.voters.incoming), outgoing: new Set(cfg.voters.outgoing) },
    learners: new Set(cfg.learners),
    learnersNext: new Set(cfg.learnersNext),
    autoLeave: cfg.autoLeave,
  };
}

export function isJoint(cfg: TrackerConfig): boolean {
  return cfg.voters.outgoing.size > 0;
}

export function isVoter(cfg: TrackerConfig, id: NodeId): boolean {
  return cfg.voters.incoming.has(id) || cfg.voters.outgoing.has(id);
}

/** Checks the invariants of a configuration; returns a description of the first violation. */
export function configProblem(cfg: TrackerConfig, progress: ReadonlyMap<NodeId, Progress>): string | null {
  for (const id of cfg.learners) {
    if (isVoter(cfg, id)) return `${id} is both a learner and a voter`;
    if (cfg.learnersNext.has(id)) return `${id} is in learners and learnersNext`;
  }
  for (const id of cfg.learnersNext) {
    if (!cfg.voters.outgoing.has(id)) return `${id} is in learnersNext but not an outgoing voter`;
  }
  const members = [...cfg.voters.incoming, ...cfg.voters.outgoing, ...cfg.learners, ...cfg.learnersNext];
  for (const id of members) if (!progress.has(id)) return `${id} has no progress`;
  for (const id of progress.keys()) if (!members.includes(id)) return `progress for non-member ${id}`;
  if (!isJoint(cfg) && cfg.autoLeave) return 'autoLeave set outside a joint config';
  return null;
}

export class ProgressTracker {
  config: TrackerConfig;
  progress: Map<NodeId, Progress>;
  private votes = new Map<NodeId, boolean>();

  constructor(readonly inflightMax: number) {
    this.config = configFromConfState({ voters: [], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false });
    this.progress = new Map();
  }

  get voters(): JointVoters {
    return this.config.voters;
  }

  // Sorted member lists, recomputed on every config change: iteration order must be deterministic.
  private sortedIds: NodeId[] = [];
  private sortedVoterIds: NodeId[] = [];

  /** Every member, voters and learners, in a deterministic order. Do not mutate. */
  ids(): readonly NodeId[] {
    return this.sortedIds;
  }

  voterIds(): readonly NodeId[] {
    return this.sortedVoterIds;
  }

  isSingleton(): boolean {
    return this.config.voters.incoming.size === 1 && this.config.voters.outgoing.size === 0;
  }

  confState(): ConfState {
    return confStateOf(this.config);
  }

  /** The highest index replicated on a quorum (of both halves when joint). */
  committed(): number {
    return jointCommitted(this.config.voters, (id) => this.progress.get(id)?.match ?? 0);
  }

  /** Whether a quorum was heard from recently (the leader counts itself as active). */
  quorumActive(self: NodeId): boolean {
    const active = new Map<NodeId, boolean>();
    for (const [id, pr] of this.progress) {
      if (pr.learner) continue;
      active.set(id, id === self || pr.recentActive);
    }
    return jointVote(this.config.voters, active) === 'won';
  }

  resetVotes(): void {
    this.votes = new Map();
  }

  recordVote(id: NodeId, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): { granted: number; rejected: number; result: VoteResult } {
    let granted = 0;
    let rejected = 0;
    for (const id of this.voterIds()) {
      const v = this.votes.get(id);
      if (v === true) granted++;
      else if (v === false) rejected++;
    }
    return { granted, rejected, result: jointVote(this.config.voters, this.votes) };
  }

  setConfig(config: TrackerConfig, progress: Map<NodeId, Progress>): void {
    const problem = configProblem(config, progress);
    assert(problem === null, `invalid configuration: ${problem}`);
    this.config = config;
    this.progress = progress;
    this.sortedIds = [...progress.keys()].sort();
    this.sortedVoterIds = jointIds(config.voters);
  }
}
