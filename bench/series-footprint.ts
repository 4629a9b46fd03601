// The heap the series rings take (src/api/series-sampler.ts): a sampler with the defaults (one
// sample per 10 s, 6 h kept) filled to the brim, for a node and for 50 services, measured as the
// heap after a forced GC less the heap before, beside the bytes the rings say they hold.
//
//   node --expose-gc --import tsx bench/series-footprint.ts     (npm run bench:series)
//
// Prints a JSON line; bench/RESULTS.md keeps the figures.

import { Registry } from '../src/base/metrics.ts';
import { SeriesSampler, seriesConfigDefault } from '../src/api/series-sampler.ts';
import type { ControlState } from '../src/resources/state.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc (npm run bench:series)');

function heap(): number {
  for (let i = 0; i < 4; i++) gc?.();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
}

function stateWith(services: number): ControlState {
  const svc = (i: number) => ({ value: { name: `s${i}`, spec: { mode: 'replicated', replicas: 3 }, specVersion: 1, updateStatus: { state: 'none' } }, rev: 1, createRev: 1 });
  return {
    revision: 1, nodes: new Map(), tasks: new Map(), statuses: new Map(),
    services: new Map(Array.from({ length: services }, (_, i) => [`s${i}`, svc(i)])),
  } as unknown as ControlState;
}

async function measure(services: number): Promise<{ services: number; ringBytes: number; heapBytes: number }> {
  const metrics = new Registry();
  metrics.gauge({ name: 'shoal_raft_applied_index', help: 'x', type: 'gauge', read: () => [{ value: 1 }] });
  const state = stateWith(services);
  let now = 0;
  const before = heap();
  const sampler = new SeriesSampler({ metrics, nodeId: 'n1', state: () => state, now: () => now }, seriesConfigDefault);
  // Fill every row: past the ring's size, the allocation must stay the same.
  for (let i = 0; i < seriesConfigDefault.rows + 10; i++) {
    now += seriesConfigDefault.intervalMs;
    await sampler.sampleNow();
  }
  const after = heap();
  const result = { services, ringBytes: sampler.bytes, heapBytes: after - before };
  void sampler.node.size;
  return result;
}

const results = [await measure(0), await measure(seriesConfigDefault.servicesTrackedMax)];
console.log(JSON.stringify({ bench: 'series-footprint', rows: seriesConfigDefault.rows, intervalMs: seriesConfigDefault.intervalMs, results }));
