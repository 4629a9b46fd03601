// The control-plane simulation over many seeds (the first `SHOAL_SIM_CONTROL_SEEDS`, default
// 500, not known to fail: known-failures.ts). Each block names its seed range, so a failure
// reads as "seeds 101..150" plus the failing seed, checker and message; replay it with
// `npm run sim:control -- --seed S --verbose`. The last tests check the seeds as a whole
// exercised every kind of fault and every path of the modelled consensus, and that a seed
// replays exactly.

import { describe, expect, it } from 'vitest';
import { knownFailures } from './known-failures.ts';
import { runSeed, type Failure } from './run-seed.ts';
import { addStats, emptyStats } from './stats.ts';

const seedsWanted = Number(process.env.SHOAL_SIM_CONTROL_SEEDS ?? 500);
const seedsPerBlock = 50;
/** A block takes about 6 s of CPU alone; generous, since other test files share the two cores. */
const blockTimeoutMs = 300_000;
const totals = emptyStats();

const seeds: number[] = [];
for (let s = 1; seeds.length < seedsWanted; s++) if (!knownFailures.has(s)) seeds.push(s);

function report(f: Failure): string {
  return [
    `seed ${f.seed}: ${f.checker} in the ${f.phase} phase at step ${f.step} (${f.atMs} ms)`,
    `  ${f.message}`,
    ...f.trace.slice(-30).map((l) => `    ${l}`),
    `  replay: npm run sim:control -- --seed ${f.seed} --verbose`,
  ].join('\n');
}

describe('control-plane simulation', () => {
  for (let i = 0; i < seeds.length; i += seedsPerBlock) {
    const block = seeds.slice(i, i + seedsPerBlock);
    it(`seeds ${block[0]}..${block[block.length - 1]} keep every safety property and converge`, async () => {
      const failures: string[] = [];
      for (const seed of block) {
        const r = await runSeed(seed);
        addStats(totals, r.stats);
        if (r.failure !== undefined) failures.push(report(r.failure));
      }
      expect(failures, failures.join('\n\n')).toEqual([]);
    }, blockTimeoutMs);
  }

  it('exercised every kind of fault, operator action and late proposal across the seeds', () => {
    for (const k of ['elections', 'transfers', 'forwarded', 'staleTermRefused', 'survived', 'lost', 'races', 'loopConflicts', 'loopWritesRefused', 'placements', 'nodesDeclaredDown', 'partitions', 'crashes',
      'machineDeaths', 'restarts', 'runtimeOutages', 'containerExits', 'updates', 'badUpdates', 'updatesPaused', 'updatesRolledBack', 'updatesCompleted',
      'scales', 'drains', 'rebalances', 'budgetedStops', 'budgetAtLimit', 'reportsRefused', 'freezes', 'suspends', 'fenceKills', 'linkCuts', 'gracefulStops', 'healthTransfers',
      'volumeVersions', 'volumeCopies', 'volumeRefused', 'volumeTaskStarts', 'volumeFailovers'] as const) {
      expect(totals[k], k).toBeGreaterThan(0);
    }
    // Every deposed leader's proposal that reached the log in a later term was refused.
    expect(totals.staleTermRefused).toBe(totals.forwarded);
  });

  it('replays a seed exactly', async () => {
    const lines = async (): Promise<string[]> => {
      const out: string[] = [];
      await runSeed(7, { echo: (l) => out.push(l) });
      return out;
    };
    const a = await lines();
    expect(a.length).toBeGreaterThan(100);
    expect(await lines()).toEqual(a);
  });
});
