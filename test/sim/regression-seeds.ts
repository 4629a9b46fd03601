// Seeds that once failed, each with what it found. The default test run (sim.test.ts) runs every
// one of them on top of its fixed range, so a fix that comes undone fails `npm test` even when
// the seed lies outside that range. Add a seed here when you fix what it found.

export interface RegressionSeed {
  seed: number;
  /** What failed, and where the fix and its reduced test live. */
  found: string;
}

export const regressionSeeds: readonly RegressionSeed[] = [
  { seed: 74, found: 'liveness: a restart past a removal still counted the removed voter (core-restart-membership)' },
  { seed: 75, found: 'the same as 74' },
  { seed: 96, found: 'the same as 74' },
  { seed: 266, found: 'the same as 74' },
  { seed: 317, found: 'the same as 74' },
  { seed: 505, found: 'the same as 74' },
  { seed: 685, found: 'the same as 74' },
  { seed: 1086, found: 'read-linearizability: a leader that removed itself served reads alone (core-removed-leader-read)' },
  { seed: 2677, found: 'liveness: the Ready committing a conf change was not synced (core-conf-commit-sync)' },
  { seed: 5035, found: 'liveness: removing the leader of two voters (paper-6-membership; docs/raft.md)' },
  { seed: 701291, found: 'liveness: refused vote requests restarted the election timer of the one node that could win (core-stale-candidate)' },
  { seed: 2054434, found: 'liveness: a removed node\'s hand-over campaign lost a message and never ended (core-hand-off-retry)' },
  { seed: 2057168, found: 'liveness: the same, and a removed node named a leader that had stepped down (core-hand-off-retry)' },
];
