// Everything a seed decides up front: cluster shape, the core's configuration, how hostile the
// network is, and how often each fault and client action happens. Drawn from its own PRNG stream
// so that the rest of the run can change without reshuffling every scenario.

import { SeededPrng } from '../../src/raft/prng.ts';
import type { NetworkFaults } from './network.ts';

export interface RaftKnobs {
  electionTimeoutTicks: number;
  heartbeatIntervalTicks: number;
  appendBytesMax: number;
  appendsInflightMax: number;
  checkQuorum: boolean;
  preVote: boolean;
  commitNotice: 'all' | 'proposers';
  followerCommit: boolean;
  followerReadQuorum: boolean;
  /** Bytes of committed entries per Ready (exercises paging of applies). */
  committedBytesMax: number;
  /** Bytes of uncommitted proposals a leader holds before refusing more. */
  uncommittedBytesMax: number;
}

/** Probabilities per tick (or per node per tick where it says so). */
export interface FaultRates {
  partition: number;
  /** Share of partitions that are one-way cuts rather than symmetric splits. */
  oneWayShare: number;
  partitionTicksMax: number;
  /**
   * Per tick: cut off a leader that holds uncommitted entries, for up to an election timeout, so
   * entries reach only a minority and later leaders see conflicting tails (Raft Figure 8).
   */
  leaderFlap: number;
  crash: number;
  /** Share of crashes that hit in the middle of handling a Ready. */
  midReadyShare: number;
  downTicksMax: number;
  /** At most this many nodes down at once. */
  downMax: number;
  /** Per node per tick: take a snapshot and compact the log. */
  compact: number;
  /** Per node per tick: save the state machine on its own. */
  checkpoint: number;
  confChange: number;
  transfer: number;
  /** Per node per tick: the node misses a tick (clock drift). */
  tickSkip: number;
  /** Probability that a node handles its Ready later in the step rather than at once. */
  readyDefer: number;
  /**
   * Per tick while the leader is in a joint configuration: cut the voters that are only in the
   * outgoing half off from everyone else, so that the two halves' majorities are apart while
   * the outgoing voters may not yet know the joint config committed. A core that commits or
   * elects on one half's majority alone loses acknowledged writes here.
   */
  jointSplit: number;
}

export interface Workload {
  /** Client proposals per tick (expected). */
  proposeRate: number;
  readRate: number;
  payloadBytesMax: number;
}

export interface Scenario {
  seed: number;
  voters: number;
  learners: number;
  raft: RaftKnobs;
  network: NetworkFaults;
  stepsPerTick: number;
  faults: FaultRates;
  workload: Workload;
  safetyTicks: number;
  /** Bound on the liveness phase: a leader, a commit and convergence must happen within it. */
  livenessTicksMax: number;
}

const pick = <T>(prng: SeededPrng, items: readonly T[]): T => items[prng.nextInt(items.length)] as T;

export function drawScenario(seed: number, prng: SeededPrng, safetyTicks: number): Scenario {
  const voters = pick(prng, [1, 3, 3, 3, 5, 5, 5, 7, 7]);
  const learners = prng.chance(0.3) ? 1 + prng.nextInt(2) : 0;
  const electionTimeoutTicks = pick(prng, [5, 10, 10, 15]);
  const raft: RaftKnobs = {
    electionTimeoutTicks,
    heartbeatIntervalTicks: pick(prng, [1, 1, 2]),
    appendBytesMax: pick(prng, [64, 512, 4096, 1 << 20]),
    appendsInflightMax: pick(prng, [1, 4, 256]),
    checkQuorum: prng.chance(0.8),
    preVote: prng.chance(0.8),
    committedBytesMax: pick(prng, [256, 1 << 30, 1 << 30]),
    uncommittedBytesMax: pick(prng, [2048, 1 << 30, 1 << 30]),
    // From the seed, not the PRNG, so that every other draw of a seed stays as it was.
    commitNotice: seed % 2 === 0 ? 'all' : 'proposers',
    followerCommit: false, // drawn last, below
    followerReadQuorum: false, // likewise
  };
  const stepsPerTick = pick(prng, [2, 4, 6]);
  const network: NetworkFaults = {
    lossRate: pick(prng, [0, 0, 0.01, 0.05, 0.15, 0.3]),
    dupRate: pick(prng, [0, 0.01, 0.05]),
    slowRate: pick(prng, [0, 0.02, 0.1]),
    delayMinSteps: 1,
    delayMaxSteps: 1 + prng.nextInt(stepsPerTick),
    slowMaxSteps: stepsPerTick * pick(prng, [3, 10]),
  };
  const calm = prng.chance(0.15);
  // A storm: leadership churns constantly, so logs diverge in many terms (the Figure 8 cases).
  const storm = !calm && prng.chance(0.35);
  const faults: FaultRates = {
    partition: calm ? 0 : storm ? pick(prng, [0.1, 0.3]) : pick(prng, [0.005, 0.01, 0.02]),
    oneWayShare: pick(prng, [0, 0.3, 0.5]),
    partitionTicksMax: storm ? electionTimeoutTicks : electionTimeoutTicks * pick(prng, [3, 8, 15]),
    leaderFlap: storm ? pick(prng, [0.1, 0.3]) : 0,
    crash: calm ? 0 : storm ? pick(prng, [0.03, 0.06]) : pick(prng, [0.003, 0.01, 0.02]),
    midReadyShare: pick(prng, [0, 0.3, 0.6]),
    downTicksMax: electionTimeoutTicks * (storm ? 2 : pick(prng, [2, 6, 12])),
    downMax: Math.max(1, prng.chance(storm ? 0.5 : 0.2) ? voters : Math.floor((voters - 1) / 2)),
    compact: pick(prng, [0.002, 0.01, 0.03]),
    checkpoint: pick(prng, [0, 0.01]),
    confChange: pick(prng, [0, 0.01, 0.02, 0.04]),
    transfer: pick(prng, [0, 0.005, 0.02]),
    tickSkip: pick(prng, [0, 0, 0.05]),
    readyDefer: pick(prng, [0, 0.3, 0.7]),
    jointSplit: 0,
  };
  const workload: Workload = {
    proposeRate: pick(prng, [0.2, 0.5, 1, 2]),
    readRate: pick(prng, [0, 0.1, 0.3]),
    payloadBytesMax: pick(prng, [8, 64, 600]),
  };
  // Drawn last, so that adding it left every other field of earlier seeds as it was.
  faults.jointSplit = pick(prng, [0, 0.3, 1]);
  raft.followerCommit = prng.chance(0.7);
  raft.followerReadQuorum = prng.chance(0.7);
  return {
    seed, voters, learners, raft, network, stepsPerTick, faults, workload, safetyTicks,
    livenessTicksMax: electionTimeoutTicks * 30,
  };
}
