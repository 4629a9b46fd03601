// Seeds that once found a bug in the code under the driver simulator, with what they found.
// The vitest run adds those beyond its range. A seed stays meaningful only while the scenario
// draws (scenario.ts) and the world stay as they were when it was found: after changing them,
// check that the seed still fails without its fix, or find a new one.

const doubleApply = 'a follower that installed a snapshot re-proposed a write the snapshot already held (its proposal '
  + 'book saw an applied entry of a newer term): the write applied twice, undoing a later one, and a read went back '
  + '(linearizability). Fixed in ProposalBook.snapshotInstalled (src/node/proposals.ts); seeds 1..1,500 without the fix: '
  + 'these four fail.';

export const regressionSeeds: { seed: number; found: string }[] = [709, 742, 814, 920].map((seed) => ({ seed, found: doubleApply }));
