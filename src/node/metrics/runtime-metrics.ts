// Process metrics. prom-client's defaults (process_* and nodejs_*: CPU, memory, file descriptors,
// heap, garbage-collection pauses by kind) and one of shoal's own: the event-loop delay, which
// shows what the event loop is waiting on (a stalled loop delays every request and every Raft
// message at once; garbage collection is the main source of such stalls under write load,
// bench/compare-analysis.md).
//
// The defaults describe the process, not a node, so they live in one registry per process that
// every node's registry renders along; prom-client's own observers for them are never stopped.

import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { collectDefaultMetrics, Registry as PromRegistry, Summary as PromSummary } from 'prom-client';
import { latencyBuckets, type Registry } from '../../base/metrics.ts';

const quantiles = [0.5, 0.99, 1] as const;
/**
 * How often the event-loop delay is sampled (both shoal's summary and prom-client's lag gauges).
 * Each sampler is a timer that wakes the process: at 10 ms the two cost 0.66 % of a core in an
 * otherwise idle process here, at 50 ms 0.18 % (issue 45's idle-CPU target is 0.5 % for the
 * whole node). A stall of a few milliseconds still shows: the sample that covers it fires late.
 */
export const resolutionMs = 50;

let processRegistry: PromRegistry | undefined;

/** The process-wide registry of prom-client's default metrics, made on first use. */
function processMetrics(): PromRegistry {
  if (processRegistry === undefined) {
    processRegistry = new PromRegistry();
    // The pauses that matter here are of a few milliseconds: the default buckets start at 1 ms.
    collectDefaultMetrics({ register: processRegistry, gcDurationBuckets: latencyBuckets, eventLoopMonitoringPrecision: resolutionMs });
    // Gauges named like counters (promtool's lint refuses them); nodejs_active_handles and the
    // others without _total say the same, by type.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) processRegistry.removeSingleMetric(name);
  }
  return processRegistry;
}

/** Registers the metrics on `metrics`; returns the function that stops measuring. */
export function registerRuntimeMetrics(metrics: Registry): () => void {
  metrics.include(processMetrics());
  const delay = monitorEventLoopDelay({ resolution: resolutionMs });
  delay.enable();
  metrics.prom.registerMetric(new EventLoopDelay(delay));
  return () => {
    delay.disable();
  };
}

/**
 * shoal_event_loop_delay_seconds, a summary: quantiles of the delay since the previous scrape
 * (quantile 1 is the maximum), and the running sum and count of the 10 ms samples. The
 * histogram holds the intervals between 10 ms timer ticks: the delay is what exceeds 10 ms.
 * (prom-client's nodejs_eventloop_lag_p99_seconds reports the intervals themselves.)
 */
class EventLoopDelay extends PromSummary {
  private sum = 0;
  private count = 0;

  constructor(private readonly delay: IntervalHistogram) {
    super({ name: 'shoal_event_loop_delay_seconds', help: 'Event-loop delay: quantiles since the previous scrape (1 is the maximum), sampled every 10 ms.', percentiles: [...quantiles], registers: [] });
  }

  override async get(): ReturnType<PromSummary['get']> {
    const base = await super.get();
    const d = this.delay;
    const seconds = (ns: number): number => Math.max(0, ns / 1e6 - resolutionMs) / 1000;
    const windowed = d.count === 0 ? [] : quantiles.map((q) => ({ labels: { quantile: q }, value: seconds(q === 1 ? d.max : d.percentile(q * 100)) }));
    // The window's mean excess times its samples: the delay added up, near enough for rate().
    if (d.count > 0) {
      this.sum += seconds(d.mean) * d.count;
      this.count += d.count;
    }
    d.reset();
    return {
      ...base,
      values: [
        ...windowed,
        { metricName: 'shoal_event_loop_delay_seconds_sum', labels: {}, value: this.sum },
        { metricName: 'shoal_event_loop_delay_seconds_count', labels: {}, value: this.count },
      ],
    };
  }
}
