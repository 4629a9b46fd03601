// A garbage collection once a node goes quiet after a burst of writes (issue 45; docs/operations.md,
// "Memory after a burst").
//
// V8 collects when allocation asks it to. A node that has just applied a burst (a bulk load, a
// restore, a stack of services) then goes idle allocates almost nothing, so what the burst left
// behind (its encoded entries, messages, snapshot slices, TLS and HTTP buffers: about 80 MiB of
// array buffers and 20 MiB of heap per node after 100,000 documents, bench/RESULTS.md "Memory
// after 100,000 documents") stays, and so do the pages under it, until the next burst. This
// collects once when the node has been quiet for a while and its heap and buffers have grown by
// `growthBytes` since the last collection (quiet: its event loop busy under a tenth of the time
// since the previous look): one full collection (tens to a couple of hundred ms
// on a large heap) per burst, none while the node is busy or idle as usual.
//
// Node has no API for a collection without `--expose-gc`; `exposedGc` sets that V8 flag and takes
// `gc` from a new context, as V8's flag makes it available there.

import { performance } from 'node:perf_hooks';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';

export interface IdleCollectorOptions {
  /** The share of time the event loop was busy since the previous call (0 to 1): performance.eventLoopUtilization. */
  utilization(): number;
  /** Heap used + array buffers, in bytes. */
  memory(): number;
  /** One full collection. */
  collect(): void;
  /** How often it looks (default 5 s). */
  everyMs?: number;
  /** Quiet: the event loop busy less than this share of the time since the previous look (default 0.1; an idle node is at 0.01-0.03). */
  quietBelow?: number;
  /** Growth since the last collection (or the lowest figure seen) that makes one worth it (default 32 MiB). */
  growthBytes?: number;
  log: { info(msg: string): void };
  now?: () => number;
}

export const idleCollectorDefaults = { everyMs: 5_000, growthBytes: 32 * 2 ** 20, quietBelow: 0.1 };

export class IdleCollector {
  private timer: NodeJS.Timeout | undefined;
  private baseline: number;
  private collections = 0;

  constructor(private readonly o: IdleCollectorOptions) {
    o.utilization();
    this.baseline = o.memory();
  }

  start(): void {
    this.timer = setInterval(() => this.look(), this.o.everyMs ?? idleCollectorDefaults.everyMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** How many collections it made (metrics, tests). */
  get count(): number {
    return this.collections;
  }

  /** One look: collects when the node was quiet since the last look and memory grew by growthBytes. */
  look(): void {
    // Not the store's revision: an idle cluster still commits now and then (reports, events, leases).
    const busy = this.o.utilization() >= (this.o.quietBelow ?? idleCollectorDefaults.quietBelow);
    const before = this.o.memory();
    // The lowest figure seen is the baseline: memory the node gave back by itself counts as collected.
    this.baseline = Math.min(this.baseline, before);
    if (busy || before - this.baseline < (this.o.growthBytes ?? idleCollectorDefaults.growthBytes)) return;
    const now = this.o.now ?? Date.now;
    const started = now();
    this.o.collect();
    const after = this.o.memory();
    this.baseline = after;
    this.collections++;
    const mib = (b: number): string => (b / 2 ** 20).toFixed(1);
    this.o.log.info(`memory: collected after a burst of work (${mib(before)} MiB of heap and buffers before, ${mib(after)} after, ${now() - started} ms)`);
  }
}

let gcFn: (() => void) | undefined;

/** V8's full collection: `globalThis.gc` when node runs with --expose-gc, else taken as the header says (once). */
export function exposedGc(): () => void {
  if (gcFn !== undefined) return gcFn;
  const g = (globalThis as { gc?: () => void }).gc;
  if (typeof g === 'function') return (gcFn = g);
  setFlagsFromString('--expose-gc');
  gcFn = runInNewContext('gc') as () => void;
  return gcFn;
}

/** The share of time this process's event loop was busy since the previous call of the function returned (the first: since it was made). */
export function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const since = performance.eventLoopUtilization(now, last);
    last = now;
    return since.utilization;
  };
}

/** Heap used + array buffers of this process. */
export function heapAndBuffers(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
