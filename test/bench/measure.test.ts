// How the benchmark counts: each point is measured in rounds (A B B A) and counted together, so
// merging the rounds must give the figures one long round would have given; and a leader kill's
// write gap is measured within the load's window only.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LatencyHistogram } from '../../bench/lib/histogram.ts';
import { longestGap } from '../../bench/lib/failover.ts';
import { pointOf, type PointRound } from '../../bench/lib/throughput.ts';

function histogramOf(micros: readonly number[]): LatencyHistogram {
  const h = new LatencyHistogram();
  for (const m of micros) h.recordMicros(m);
  return h;
}

function round(over: Partial<PointRound> & { latencies: number[] }): PointRound {
  return {
    system: 'shoal', ok: over.latencies.length, failed: 0, failures: new Map(), seconds: 5, latency: histogramOf(over.latencies),
    serverCpuMs: 0, accepted: over.latencies.length, capacityMs: 10_000, busyMs: 0, ourMs: 0, leaderChanged: false, ...over,
  };
}

describe('LatencyHistogram.merge', () => {
  it('gives the quantiles, count, mean and max of all the recordings together', () => {
    const a = [120, 900, 1_500, 2_000, 40_000];
    const b = [80, 300, 3_100, 3_200, 7_000, 150_000];
    const merged = histogramOf(a);
    merged.merge(histogramOf(b));
    const whole = histogramOf([...a, ...b]);
    expect(merged.count).toBe(11);
    for (const q of [0.01, 0.5, 0.9, 0.99, 1]) expect(merged.quantileMs(q)).toBe(whole.quantileMs(q));
    expect(merged.meanMs).toBeCloseTo(whole.meanMs, 9);
    expect(merged.maxMs).toBe(150);
  });
});

describe('pointOf', () => {
  const spec = { op: 'write', clients: 1, to: 'leader' } as const;

  it('divides the successes of all rounds by their total time, and merges their latencies', () => {
    const slow = round({ latencies: Array.from({ length: 100 }, () => 4_000) });
    const fast = round({ latencies: Array.from({ length: 300 }, () => 1_000) });
    const p = pointOf(spec, [slow, fast]);
    expect(p.perSecond).toBe(40); // 400 requests in 10 s, not the mean of 20 and 60
    expect(p.p50Ms).toBeCloseTo(1, 1); // bucket midpoints: within 0.8 %
    expect(p.p99Ms).toBeCloseTo(4, 1);
    expect(p.system).toBe('shoal');
  });

  it('charges server CPU to every accepted request, warm-up included, and sums failures by reason', () => {
    const a = round({ latencies: [1_000], accepted: 10, serverCpuMs: 20, failed: 2, failures: new Map([['HTTP 503 no_leader', 2]]) });
    const b = round({ latencies: [1_000], accepted: 30, serverCpuMs: 60, failed: 1, failures: new Map([['HTTP 503 no_leader', 1]]), leaderChanged: true });
    const p = pointOf(spec, [a, b]);
    expect(p.serverCpuMicrosPerReq).toBe(2_000);
    expect(p.failed).toBe(3);
    expect(p.failures).toEqual([['HTTP 503 no_leader', 3]]);
    expect(p.leaderChanged).toBe(true);
  });

  it('counts the rest of the machine over all rounds', () => {
    const a = round({ latencies: [1_000], capacityMs: 10_000, busyMs: 6_000, ourMs: 5_000 });
    const b = round({ latencies: [1_000], capacityMs: 10_000, busyMs: 4_000, ourMs: 4_000 });
    expect(pointOf(spec, [a, b]).otherCpuPercent).toBeCloseTo(5, 9);
  });

  it('refuses an empty list of rounds', () => {
    expect(() => pointOf(spec, [])).toThrow(/no rounds/);
  });
});

describe('longestGap (leader kills)', () => {
  it('finds the longest stretch without a write, including up to the start and the end', () => {
    expect(longestGap([10, 20, 150, 160], 0, 170)).toEqual({ ms: 130, from: 20 });
    expect(longestGap([10, 20], 0, 300)).toEqual({ ms: 280, from: 20 });
    expect(longestGap([], 0, 50)).toEqual({ ms: 50, from: 0 });
  });

  it('leaves out writes that completed after the load stopped', () => {
    // The load ran 0-100; a straggler answered at 240. The gap is not 20-240.
    expect(longestGap([5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 99, 240], 0, 100)).toEqual({ ms: 10, from: 20 });
  });
});

describe('npm run bench options', () => {
  const compare = fileURLToPath(new URL('../../bench/compare.ts', import.meta.url));
  const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

  it('refuses a number of rounds that is not a whole number of 1 or more, before starting anything', () => {
    for (const bad of ['0', '0.4', '2.5', 'x']) {
      const r = spawnSync(tsx, [compare, '--rounds', bad], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, `--rounds ${bad}`).toBe(2);
      expect(r.stderr).toContain(`--rounds: expected a whole number of 1 or more, got '${bad}'`);
      expect(r.stdout + r.stderr).not.toContain('starting');
    }
  });
});
