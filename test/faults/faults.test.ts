// One fault run on real processes in network namespaces (see run-faults.ts and docs/testing.md):
// every kind of fault at least once under a register workload, then the linearizability check,
// the final-state check on every node and the ack-log check. Needs root, `ip` and `nft`; CI
// installs them (.ci/run), and without them this test fails and says so rather than skipping.
// SHOAL_FAULT_SEED picks another seed; a failing run keeps its directory and prints where.

import { describe, expect, it } from 'vitest';
import { faultKinds } from './nemesis.ts';
import { prerequisiteProblems } from './netns.ts';
import { runFaults, summarize } from './run-faults.ts';

const seed = Number(process.env.SHOAL_FAULT_SEED ?? 1);

describe('fault injection on a three-process cluster in network namespaces', () => {
  it('stays linearizable and loses no acknowledged write under partitions, crashes, pauses, transfers and membership changes', async () => {
    const missing = prerequisiteProblems();
    if (missing.length > 0) throw new Error(`the fault tests cannot run on this machine:\n  ${missing.join('\n  ')}`);
    expect(Number.isInteger(seed), `SHOAL_FAULT_SEED must be an integer, got ${process.env.SHOAL_FAULT_SEED}`).toBe(true);

    // One cycle of the nine fault kinds takes about a minute with these holds.
    const r = await runFaults({
      seed, durationMs: 30_000, holdMs: [1500, 3000], quietMs: [800, 1500], resultsDir: 'test-results', checkerTimeoutMs: 240_000,
    });
    console.log(summarize(r));

    expect(r.problems, summarize(r)).toEqual([]);
    expect(r.checker.verdict).toBe('ok');
    // Not vacuous: the nemesis did every kind of fault, and the clients got work done.
    for (const kind of faultKinds) expect(r.faults[kind], `faults of kind ${kind}`).toBeGreaterThanOrEqual(1);
    const s = r.clients.byOutcome;
    expect(s.read.ok, 'linearizable reads completed').toBeGreaterThanOrEqual(100);
    expect(s.write.ok, 'writes acknowledged').toBeGreaterThanOrEqual(100);
    expect(s.cas.ok, 'successful compare-and-sets').toBeGreaterThanOrEqual(10);
    expect(s.cas.fail, 'compare-and-sets whose compare failed').toBeGreaterThanOrEqual(10);
    expect(r.acks.acked, 'acknowledged ack-log writes').toBeGreaterThanOrEqual(50);
  }, 900_000);
});
