// The node's Prometheus registry: prom-client underneath (naming checks, label escaping, the text
// format), behind the small API the rest of the code registers through:
//
//   registry.gauge({name, help, type, read})   a metric read at scrape time from state its owner
//                                              keeps (a counter when type is 'counter')
//   registry.histogram(name, help, buckets)    a histogram to observe into
//   registry.counter(name, help, labelNames)   a counter to increment
//   registry.add(metric)                       a Histogram or Counter made elsewhere (RaftNode's)
//   await registry.render()                    the text format, for GET /metrics
//
// New code may also use prom-client directly: `registry.prom` is the prom-client Registry.

import { Counter as PromCounter, Gauge as PromGauge, Histogram as PromHistogram, Registry as PromRegistry } from 'prom-client';

/** Latency buckets in seconds, from 100 µs to 10 s. */
export const latencyBuckets = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export type Labels = Record<string, string>;

/** A histogram that can be made before the registry it is rendered by (RaftNode makes its own). */
export class Histogram {
  readonly metric: PromHistogram;
  /** Observations so far (prom-client's own count is only readable asynchronously). */
  count = 0;

  constructor(readonly name: string, readonly help: string, readonly buckets: readonly number[] = latencyBuckets, labelNames: readonly string[] = []) {
    this.metric = new PromHistogram({ name, help, buckets: [...buckets], labelNames, registers: [] });
  }

  observe(v: number, labels?: Labels): void {
    this.count++;
    if (labels === undefined) this.metric.observe(v);
    else this.metric.observe(labels, v);
  }

  /** This histogram alone in the text format (tests). */
  async render(): Promise<string> {
    const alone = new PromRegistry();
    alone.registerMetric(this.metric);
    return alone.metrics();
  }
}

/** A counter that can be made before the registry it is rendered by. The name ends in _total. */
export class Counter {
  readonly metric: PromCounter;

  constructor(readonly name: string, readonly help: string, labelNames: readonly string[] = []) {
    if (!name.endsWith('_total')) throw new Error(`counter ${name}: a counter's name ends in _total`);
    this.metric = new PromCounter({ name, help, labelNames, registers: [] });
  }

  inc(labels?: Labels, by = 1): void {
    if (labels === undefined) this.metric.inc(by);
    else this.metric.inc(labels, by);
  }
}

export interface Sample {
  labels?: Labels;
  value: number;
}

export interface GaugeSpec {
  name: string;
  help: string;
  /** 'counter': the value only ever grows (its owner counts), and the name ends in _total. */
  type: 'gauge' | 'counter';
  read: () => Sample[];
  /** The label names the samples use; when absent, those of the samples are accepted as they come. */
  labelNames?: readonly string[];
}

// Read-at-scrape metrics: real prom-client metrics (their name, help and type are prom-client's),
// whose values come from the owner's state when scraped. get() is what the registry renders;
// replacing its values, rather than set()ting them in a collect() callback, accepts the labels
// the samples carry without declaring them first (prom-client refuses undeclared label names).

class ReadGauge extends PromGauge {
  constructor(private readonly spec: GaugeSpec) {
    super({ name: spec.name, help: spec.help, labelNames: spec.labelNames ?? [], registers: [] });
  }

  override async get(): ReturnType<PromGauge['get']> {
    return { ...(await super.get()), values: samples(this.spec) };
  }
}

/** Rendered with # TYPE counter. */
class ReadCounter extends PromCounter {
  constructor(private readonly spec: GaugeSpec) {
    super({ name: spec.name, help: spec.help, labelNames: spec.labelNames ?? [], registers: [] });
  }

  override async get(): ReturnType<PromCounter['get']> {
    return { ...(await super.get()), values: samples(this.spec) };
  }
}

function samples(spec: GaugeSpec): { labels: Labels; value: number }[] {
  return spec.read().map((s) => ({ labels: s.labels ?? {}, value: s.value }));
}

export class Registry {
  /** The prom-client registry underneath; register prom-client metrics on it directly. */
  readonly prom = new PromRegistry();
  /** Registries rendered after this one (the process's default metrics, shared by every node of the process). */
  private readonly also: PromRegistry[] = [];

  /**
   * A metric whose values are read at scrape time. Its owner keeps the state (a count, a map),
   * so nothing is duplicated on the hot path; a 'counter' must only ever grow.
   */
  gauge(spec: GaugeSpec): void {
    if (spec.type === 'counter' && !spec.name.endsWith('_total')) throw new Error(`counter ${spec.name}: a counter's name ends in _total`);
    this.prom.registerMetric(spec.type === 'counter' ? new ReadCounter(spec) : new ReadGauge(spec));
  }

  histogram(name: string, help: string, buckets: readonly number[] = latencyBuckets, labelNames: readonly string[] = []): Histogram {
    return this.add(new Histogram(name, help, buckets, labelNames));
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
  }

  add<M extends Histogram | Counter>(m: M): M {
    this.prom.registerMetric(m.metric);
    return m;
  }

  /** Renders `other` too, after this registry's own metrics (it must not repeat a name). */
  include(other: PromRegistry): void {
    if (!this.also.includes(other)) this.also.push(other);
  }

  get contentType(): string {
    return this.prom.contentType;
  }

  /** Everything in the Prometheus text format (version 0.0.4). */
  async render(): Promise<string> {
    const parts = await Promise.all([this.prom, ...this.also].map((r) => r.metrics()));
    return parts.filter((p) => p.trim() !== '').join('\n');
  }
}
