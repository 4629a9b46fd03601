// A clock that moves only when told to: the test and simulator implementation of Clock. Timers
// fire in order of due time, ties in the order they were set, so a run is reproducible from its
// inputs. It ships in src/ (not test/) because the control-plane simulator and
// `shoal dev --runtime memory` demos drive the memory runtime with it.

import type { BootClock, Clock, Timer } from './clock.ts';

interface Pending {
  dueMs: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

export class ManualClock implements Clock, BootClock {
  private nowMs: number;
  private seq = 0;
  private pending: Pending[] = [];

  /** `startMs`: the monotonic start; `wallOffsetMs`: what wallNow() adds to now(). */
  constructor(startMs = 0, private readonly wallOffsetMs = 1_700_000_000_000) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  /** The boot clock: the monotonic one here (the simulator skews it per node). */
  bootNow(): number {
    return this.nowMs;
  }

  wallNow(): number {
    return this.wallOffsetMs + this.nowMs;
  }

  setTimer(delayMs: number, fn: () => void): Timer {
    const p: Pending = { dueMs: this.nowMs + Math.max(0, delayMs), seq: this.seq++, fn, cancelled: false };
    this.pending.push(p);
    return { cancel: () => { p.cancelled = true; } };
  }

  /** Timers not yet fired or cancelled. */
  pendingCount(): number {
    return this.pending.filter((p) => !p.cancelled).length;
  }

  /** The due time of the next live timer, or null when none. */
  nextDueMs(): number | null {
    const next = this.nextPending();
    return next === undefined ? null : next.dueMs;
  }

  /**
   * Moves time forward by `ms` (0 fires what is due now), firing every timer due on the way, at
   * its due time, including timers set by the ones that fire. Returns how many fired.
   */
  advance(ms: number): number {
    if (!(ms >= 0)) throw new RangeError(`advance: ms must be at least 0, got ${ms}`);
    const target = this.nowMs + ms;
    let fired = 0;
    for (;;) {
      const next = this.nextPending();
      if (next === undefined || next.dueMs > target) break;
      next.cancelled = true;
      this.nowMs = Math.max(this.nowMs, next.dueMs);
      fired++;
      next.fn();
    }
    this.nowMs = target;
    return fired;
  }

  /** The live timer due first (ties: set first); drops cancelled and fired ones on the way. */
  private nextPending(): Pending | undefined {
    this.pending = this.pending.filter((p) => !p.cancelled);
    let best: Pending | undefined;
    for (const p of this.pending) if (best === undefined || p.dueMs < best.dueMs || (p.dueMs === best.dueMs && p.seq < best.seq)) best = p;
    return best;
  }
}
