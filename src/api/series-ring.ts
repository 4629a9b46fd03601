// A fixed ring of samples: one time column and one Float32 column per series, allocated once,
// overwritten oldest first. It is how a node keeps pictures over time without a Prometheus
// server: the default (one sample per 10 s for 6 h) is 2,160 rows. A missing value is NaN in
// the ring and null in the answer. Pure: the sampler (series-sampler.ts) pushes, routes read.

import { assert } from '../base/assert.ts';

export interface SeriesWindow<N extends string> {
  /** Milliseconds between samples, as configured. */
  intervalMs: number;
  /** Wall-clock times of the samples, oldest first. */
  times: number[];
  /** One column per series, aligned with `times`; null where the value was not known. */
  series: Record<N, Array<number | null>>;
}

export class SeriesRing<N extends string> {
  private readonly times: Float64Array;
  private readonly columns: Map<N, Float32Array>;
  /** Index the next sample goes to. */
  private next = 0;
  /** Samples held (at most capacityRows). */
  private held = 0;

  constructor(readonly names: readonly N[], readonly capacityRows: number, readonly intervalMs: number) {
    assert(capacityRows > 0 && Number.isInteger(capacityRows), 'capacityRows must be a positive integer');
    this.times = new Float64Array(capacityRows);
    this.columns = new Map(names.map((n) => [n, new Float32Array(capacityRows).fill(Number.NaN)]));
  }

  /** Bytes of the columns (what the ring adds to the heap, besides a few small objects). */
  get bytes(): number {
    return this.times.byteLength + [...this.columns.values()].reduce((s, c) => s + c.byteLength, 0);
  }

  get size(): number {
    return this.held;
  }

  push(atMs: number, values: Partial<Record<N, number | null>>): void {
    const i = this.next;
    this.times[i] = atMs;
    for (const [name, column] of this.columns) {
      const v = values[name];
      column[i] = v === null || v === undefined || !Number.isFinite(v) ? Number.NaN : v;
    }
    this.next = (i + 1) % this.capacityRows;
    this.held = Math.min(this.held + 1, this.capacityRows);
  }

  /** The samples taken at or after `sinceMs`, oldest first. */
  window(sinceMs: number): SeriesWindow<N> {
    const rows: number[] = [];
    const start = (this.next - this.held + this.capacityRows) % this.capacityRows;
    for (let k = 0; k < this.held; k++) {
      const i = (start + k) % this.capacityRows;
      if ((this.times[i] as number) >= sinceMs) rows.push(i);
    }
    const series = {} as Record<N, Array<number | null>>;
    for (const [name, column] of this.columns) {
      series[name] = rows.map((i) => {
        const v = column[i] as number;
        return Number.isNaN(v) ? null : v;
      });
    }
    return { intervalMs: this.intervalMs, times: rows.map((i) => this.times[i] as number), series };
  }
}
