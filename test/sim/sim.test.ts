// The deterministic simulation over many seeds: a fixed range, then every regression seed
// outside it (regression-seeds.ts). Each block names its seeds, so a failure reads as
// "seeds 1301..1400" plus the failing seed, checker and message; replay it with
// `npm run sim -- --seed S --verbose`. The last test checks the seeds as a whole exercised every
// kind of fault, so the suite cannot pass by doing nothing. Fresh seeds are `npm run sim:soak`'s.

import { describe, expect, it } from 'vitest';
import { regressionSeeds } from './regression-seeds.ts';
import { runSeed, type Failure } from './run-seed.ts';
import { addStats, emptyStats } from './stats.ts';

const seedsTotal = Number(process.env.SHOAL_SIM_SEEDS ?? 2000);
const seedsPerBlock = 100;
/** A block takes about 7 s alone; generous, since other test files share the two cores. */
const blockTimeoutMs = 300_000;
const totals = emptyStats();

function report(f: Failure): string {
  return [
    `seed ${f.seed}: ${f.checker} in the ${f.phase} phase at tick ${f.tick} (step ${f.step})`,
    `  ${f.message}`,
    ...f.trace.slice(-25).map((l) => `    ${l}`),
    `  replay: npm run sim -- --seed ${f.seed} --verbose`,
  ].join('\n');
}

function runSeeds(seeds: Iterable<number>): void {
  const failures: string[] = [];
  for (const seed of seeds) {
    const r = runSeed(seed);
    addStats(totals, r.stats);
    if (r.failure !== undefined) failures.push(report(r.failure));
  }
  expect(failures, failures.join('\n\n')).toEqual([]);
}

function* range(from: number, to: number): Generator<number> {
  for (let seed = from; seed <= to; seed++) yield seed;
}

describe('raft simulation', () => {
  for (let from = 1; from <= seedsTotal; from += seedsPerBlock) {
    const to = Math.min(seedsTotal, from + seedsPerBlock - 1);
    it(`seeds ${from}..${to} keep every safety property and recover`, () => runSeeds(range(from, to)), blockTimeoutMs);
  }

  const outside = regressionSeeds.map((r) => r.seed).filter((seed) => seed > seedsTotal);
  if (outside.length > 0) {
    it(`regression seeds ${outside.join(', ')} keep every safety property and recover`, () => runSeeds(outside), blockTimeoutMs);
  }

  it('exercised every kind of fault across the seeds', () => {
    expect(totals.elections).toBeGreaterThan(0);
    expect(totals.acked).toBeGreaterThan(0);
    expect(totals.crashes).toBeGreaterThan(0);
    expect(totals.crashesMidReady).toBeGreaterThan(0);
    expect(totals.unsyncedWritesLost).toBeGreaterThan(0);
    expect(totals.partitions).toBeGreaterThan(0);
    expect(totals.messagesLost).toBeGreaterThan(0);
    expect(totals.messagesDuplicated).toBeGreaterThan(0);
    expect(totals.compactions).toBeGreaterThan(0);
    expect(totals.snapshotsSent).toBeGreaterThan(0);
    expect(totals.snapshotsInstalled).toBeGreaterThan(0);
    expect(totals.confChangesApplied).toBeGreaterThan(0);
    expect(totals.nodesAdded).toBeGreaterThan(0);
    expect(totals.nodesRemoved).toBeGreaterThan(0);
    expect(totals.majorityReplacements).toBeGreaterThan(0);
    expect(totals.jointSplits).toBeGreaterThan(0);
    expect(totals.persistedNotices).toBeGreaterThan(0);
    expect(totals.followerCommits).toBeGreaterThan(0);
    expect(totals.followerReads).toBeGreaterThan(0);
    expect(totals.transfersCompleted).toBeGreaterThan(0);
    expect(totals.readsServed).toBeGreaterThan(0);
  });
});
