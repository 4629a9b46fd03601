import { describe, expect, it } from 'vitest';
import { Registry } from '../../src/base/metrics.ts';
import { registerRuntimeMetrics, resolutionMs } from '../../src/node/metrics/runtime-metrics.ts';

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in\n${text}`);
  return Number(line.split(' ')[1]);
}

/** The sum of a family's samples whose series starts with `prefix` (e.g. every kind of a histogram's _count). */
function total(text: string, prefix: string): number {
  return text.split('\n').filter((l) => l.startsWith(prefix)).reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

describe('runtime metrics', () => {
  it('report an event-loop stall and garbage-collection pauses', async () => {
    const metrics = new Registry();
    const stop = registerRuntimeMetrics(metrics);
    try {
      await new Promise((r) => setTimeout(r, 2 * resolutionMs));
      await metrics.render(); // start a fresh window (its first sample only sets the baseline)
      await new Promise((r) => setTimeout(r, resolutionMs));
      // Hold the loop for 200 ms, and make garbage while doing it: the sample that covers it comes
      // at least 200 ms less one sampling interval late.
      const stallMs = 200;
      const until = performance.now() + stallMs;
      let junk: unknown[] = [];
      while (performance.now() < until) junk = junk.length > 100_000 ? [] : [...junk, { n: junk.length }];
      await new Promise((r) => setTimeout(r, 2 * resolutionMs));
      const text = await metrics.render();
      expect(text).toContain('# TYPE shoal_event_loop_delay_seconds summary');
      expect(value(text, 'shoal_event_loop_delay_seconds_count')).toBeGreaterThan(0);
      const seen = (stallMs - resolutionMs - 20) / 1000;
      expect(value(text, 'shoal_event_loop_delay_seconds{quantile="1"}')).toBeGreaterThanOrEqual(seen);
      // prom-client's garbage-collection histogram, by kind, with shoal's finer buckets.
      expect(total(text, 'nodejs_gc_duration_seconds_count{')).toBeGreaterThan(0);
      expect(text).toContain('nodejs_gc_duration_seconds_bucket{le="0.0005"');
      // The process's default metrics come along.
      expect(text).toContain('# TYPE process_cpu_seconds_total counter');
      expect(text).toContain('# TYPE nodejs_heap_size_used_bytes gauge');
      // The window restarts at each scrape: the stall is not reported twice.
      await new Promise((r) => setTimeout(r, 3 * resolutionMs));
      expect(value(await metrics.render(), 'shoal_event_loop_delay_seconds{quantile="1"}')).toBeLessThan(seen);
    } finally {
      stop();
    }
  });
});
