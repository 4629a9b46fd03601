// Process metrics that show what the event loop is waiting on: its delay (a stalled loop delays
// every request and every Raft message at once) and garbage-collection pauses, the main source of
// such stalls under write load (bench/compare-analysis.md).

import { PerformanceObserver, monitorEventLoopDelay, type PerformanceEntry } from 'node:perf_hooks';
import { latencyBuckets, type Registry } from './metrics.ts';

const quantiles = [0.5, 0.99, 1] as const;
const resolutionMs = 10;

/** Registers the metrics on `metrics`; returns the function that stops measuring. */
export function registerRuntimeMetrics(metrics: Registry): () => void {
  // The histogram holds the intervals between 10 ms timer ticks: the delay is what exceeds 10 ms.
  const delay = monitorEventLoopDelay({ resolution: resolutionMs });
  delay.enable();
  metrics.gauge({
    name: 'shoal_event_loop_delay_seconds',
    help: 'Event-loop delay since the previous scrape (quantile 1 is the maximum), sampled every 10 ms.',
    type: 'gauge',
    read: () => {
      const seconds = (ns: number): number => Math.max(0, ns / 1e6 - resolutionMs) / 1000;
      const samples = delay.count === 0 ? [] : quantiles.map((q) => ({ labels: { quantile: String(q) }, value: seconds(q === 1 ? delay.max : delay.percentile(q * 100)) }));
      delay.reset();
      return samples;
    },
  });
  const gcPause = metrics.histogram('shoal_gc_pause_seconds', 'Garbage-collection pauses of this process (all kinds).', latencyBuckets);
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries() as PerformanceEntry[]) gcPause.observe(entry.duration / 1000);
  });
  observer.observe({ entryTypes: ['gc'] });
  return () => {
    observer.disconnect();
    delay.disable();
  };
}
