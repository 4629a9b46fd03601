// One machine's clocks in the simulator: its monotonic clock and its boot clock (CLOCK_BOOTTIME)
// run at the machine's own rate against simulated real time (crystal drift, NTP slewing); while
// the machine is suspended its monotonic clock stops and its boot clock goes on; and while the
// machine, or only its shoal process (SIGSTOP), is frozen, nothing of shoal runs: its timers and
// the answers it awaits are held and run, in order, once it thaws.

import type { BootClock, Clock, Timer } from '../../src/executor/clock.ts';
import type { ManualClock } from '../../src/executor/manual-clock.ts';

export class NodeClock implements Clock, BootClock {
  private pausedTotal = 0;
  private pausedAt: number | null = null;
  private held: (() => void)[] | null = null;

  constructor(private readonly base: ManualClock, readonly rate: number) {}

  now(): number {
    return this.rate * ((this.pausedAt ?? this.base.now()) - this.pausedTotal);
  }

  bootNow(): number {
    return this.rate * this.base.now();
  }

  wallNow(): number {
    return this.base.wallNow();
  }

  get frozen(): boolean {
    return this.held !== null;
  }

  get suspended(): boolean {
    return this.pausedAt !== null;
  }

  /** A timer on this machine's monotonic clock: it fires late by the time the machine slept. */
  setTimer(delayMs: number, fn: () => void): Timer {
    const due = this.now() + Math.max(0, delayMs);
    let cancelled = false;
    let inner: Timer | null = null;
    const arm = (): void => {
      // Whole milliseconds of real time (rounded up): the simulation's clock and the times it stamps stay integers.
      inner = this.base.setTimer(Math.ceil(Math.max(0, due - this.now()) / this.rate), fire);
    };
    const fire = (): void => {
      if (cancelled) return;
      if (this.now() < due) arm();
      else this.run(fn);
    };
    arm();
    return { cancel: () => { cancelled = true; inner?.cancel(); } };
  }

  /** Runs `fn` now, or once the process thaws. */
  run(fn: () => void): void {
    if (this.held !== null) this.held.push(fn);
    else fn();
  }

  /** SIGSTOP of shoal: its clocks go on, it does nothing. */
  freeze(): void {
    this.held ??= [];
  }

  /** The machine suspends: shoal and its containers freeze, and the monotonic clock stops. */
  suspend(): void {
    this.freeze();
    this.pausedAt ??= this.base.now();
  }

  thaw(): void {
    if (this.pausedAt !== null) this.pausedTotal += this.base.now() - this.pausedAt;
    this.pausedAt = null;
    const queue = this.held ?? [];
    this.held = null;
    for (const fn of queue) fn();
  }
}
