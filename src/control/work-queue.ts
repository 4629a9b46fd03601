// The leader loops' work queue, after client-go's workqueue: a key is either dirty (to be
// reconciled) or not, however many events named it meanwhile (coalescing); a key can be asked for
// again after a delay (a restart backoff, an update's monitor) or after a failure, with backoff;
// one key is handed out at a time, so two passes over the same key never overlap.

import { backoffDelayMs } from '../base/backoff.ts';

export interface QueueClock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realClock: QueueClock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Failure backoff: 50 ms doubling to 5 s. */
export const retryDelayMsMin = 50;
export const retryDelayMsMax = 5_000;

export class WorkQueue {
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; handle: unknown }>();
  private readonly failures = new Map<string, number>();
  private wake: (() => void) | undefined;
  private closed = false;

  constructor(private readonly clock: QueueClock = realClock, private readonly now: () => number = () => performance.now()) {}

  add(key: string): void {
    if (this.closed) return;
    this.dirty.add(key);
    this.wake?.();
  }

  /** Marks `key` dirty in `ms` (at the earliest of several such calls). */
  addAfter(key: string, ms: number): void {
    if (this.closed) return;
    if (ms <= 0) return this.add(key);
    const at = this.now() + ms;
    const existing = this.timers.get(key);
    if (existing !== undefined && existing.at <= at) return;
    if (existing !== undefined) this.clock.clearTimeout(existing.handle);
    const handle = this.clock.setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, handle });
  }

  /** A pass over `key` failed: again after a growing delay. */
  retry(key: string): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const ms = backoffDelayMs(n, retryDelayMsMin, retryDelayMsMax);
    this.addAfter(key, ms);
    return ms;
  }

  /** A pass over `key` succeeded: its failure count starts again. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** The next dirty key (in the order they became dirty), waiting for one; undefined once closed. */
  async next(): Promise<string | undefined> {
    while (!this.closed) {
      const first = this.dirty.values().next();
      if (!first.done) {
        this.dirty.delete(first.value);
        return first.value;
      }
      await new Promise<void>((resolve) => { this.wake = resolve; });
      this.wake = undefined;
    }
    return undefined;
  }

  get size(): number {
    return this.dirty.size;
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers.values()) this.clock.clearTimeout(t.handle);
    this.timers.clear();
    this.wake?.();
  }
}
