import { describe, expect, it } from 'vitest';
import { Registry } from '../../src/node/metrics.ts';
import { registerRuntimeMetrics } from '../../src/node/runtime-metrics.ts';

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in\n${text}`);
  return Number(line.split(' ')[1]);
}

describe('runtime metrics', () => {
  it('report an event-loop stall and garbage-collection pauses', async () => {
    const metrics = new Registry();
    const stop = registerRuntimeMetrics(metrics);
    try {
      await new Promise((r) => setTimeout(r, 50));
      metrics.render(); // start a fresh window (its first 10 ms sample only sets the baseline)
      await new Promise((r) => setTimeout(r, 30));
      // Hold the loop for 120 ms, and make garbage while doing it.
      const until = performance.now() + 120;
      let junk: unknown[] = [];
      while (performance.now() < until) junk = junk.length > 100_000 ? [] : [...junk, { n: junk.length }];
      await new Promise((r) => setTimeout(r, 50));
      const text = metrics.render();
      expect(text).toContain('# TYPE shoal_event_loop_delay_seconds gauge');
      expect(value(text, 'shoal_event_loop_delay_seconds{quantile="1"}')).toBeGreaterThanOrEqual(0.09);
      expect(value(text, 'shoal_gc_pause_seconds_count')).toBeGreaterThan(0);
      // The window restarts at each scrape: the stall is not reported twice.
      await new Promise((r) => setTimeout(r, 60));
      expect(value(metrics.render(), 'shoal_event_loop_delay_seconds{quantile="1"}')).toBeLessThan(0.09);
    } finally {
      stop();
    }
  });
});
