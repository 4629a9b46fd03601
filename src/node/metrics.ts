// A small Prometheus registry: counters, gauges read at scrape time, and histograms with fixed
// buckets. Enough for /metrics without a dependency.

export class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(readonly name: string, readonly help: string, readonly buckets: readonly number[]) {
    this.counts = new Array<number>(buckets.length).fill(0);
  }

  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (v <= (this.buckets[i] as number)) this.counts[i] = (this.counts[i] as number) + 1;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{le="${b}"} ${this.counts[i]}`));
    lines.push(`${this.name}_bucket{le="+Inf"} ${this.count}`, `${this.name}_sum ${this.sum}`, `${this.name}_count ${this.count}`);
    return lines.join('\n');
  }
}

/** Latency buckets in seconds, from 100 µs to 10 s. */
export const latencyBuckets = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface Sample {
  labels?: Record<string, string>;
  value: number;
}

export interface GaugeSpec {
  name: string;
  help: string;
  type: 'gauge' | 'counter';
  read: () => Sample[];
}

export class Registry {
  private readonly gauges: GaugeSpec[] = [];
  private readonly histograms: Histogram[] = [];

  gauge(spec: GaugeSpec): void {
    this.gauges.push(spec);
  }

  histogram(name: string, help: string, buckets: readonly number[] = latencyBuckets): Histogram {
    return this.add(new Histogram(name, help, buckets));
  }

  add(h: Histogram): Histogram {
    this.histograms.push(h);
    return h;
  }

  render(): string {
    const out: string[] = [];
    for (const g of this.gauges) {
      out.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} ${g.type}`);
      for (const s of g.read()) out.push(`${g.name}${labels(s.labels)} ${s.value}`);
    }
    for (const h of this.histograms) out.push(h.render());
    return `${out.join('\n')}\n`;
  }
}

function labels(l: Record<string, string> | undefined): string {
  if (!l) return '';
  const parts = Object.entries(l).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`);
  return parts.length > 0 ? `{${parts.join(',')}}` : '';
}
