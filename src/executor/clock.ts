// Time as the executor sees it: a monotonic clock for backoffs, rate limits and timeouts, a wall
// clock for the timestamps a runtime stamps on containers (display only), and timers. Injected
// everywhere in src/executor/, so tests and the control-plane simulator drive time by hand
// (manual-clock.ts) and a run is a function of its inputs.

import { readFileSync } from 'node:fs';

export interface Timer {
  /** Idempotent; a timer that already fired is left alone. */
  cancel(): void;
}

export interface Clock {
  /** Monotonic milliseconds (never goes back; no relation to the wall clock). */
  now(): number;
  /** Wall-clock milliseconds since the Unix epoch, for timestamps people read. */
  wallNow(): number;
  /** Calls `fn` once, `delayMs` (at least 0) from now. */
  setTimer(delayMs: number, fn: () => void): Timer;
}

/** The process's clocks: performance.now(), Date.now() and setTimeout. */
export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimer(delayMs, fn) {
    const handle = setTimeout(fn, Math.max(0, delayMs));
    // A pending backoff or resync must not keep a process alive that is otherwise done.
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
};

/**
 * The clock an exclusive task's lease is measured on (docs/control-plane.md, "Exclusive
 * services"): milliseconds on CLOCK_BOOTTIME, which keeps counting while the machine is
 * suspended. A lease must run out in real time even if the machine slept through it; a clock
 * that stops during suspend (CLOCK_MONOTONIC, which is what `performance.now()` and
 * `process.hrtime` read on Linux) would let a machine that wakes up after an hour believe its
 * ten-second lease still holds.
 *
 * Node has no API for CLOCK_BOOTTIME; `/proc/uptime` is that clock (the kernel prints it from
 * ktime_get_boottime), in hundredths of a second, so the lease and the in-container fence (the
 * fence script reads the same file) measure on the very same clock. Injected, so tests and the
 * control-plane simulator give each node its own clock, at its own rate.
 */
export interface BootClock {
  /** Milliseconds since boot, counting time suspended (10 ms resolution on Linux). */
  bootNow(): number;
}

/** Reads `/proc/uptime`; throws where there is none (shoal's agent runs on Linux). */
export function readUptimeMs(text: string): number {
  const m = /^(\d+)\.(\d{2})\s/.exec(text);
  if (m === null) throw new Error(`/proc/uptime does not read as uptime: ${JSON.stringify(text.slice(0, 40))}`);
  return Number(m[1]) * 1000 + Number(m[2]) * 10;
}

/** The machine's CLOCK_BOOTTIME, through /proc/uptime. */
export const procBootClock: BootClock = {
  bootNow: () => readUptimeMs(readFileSync('/proc/uptime', 'utf8')),
};
