// Time as the executor sees it: a monotonic clock for backoffs, rate limits and timeouts, a wall
// clock for the timestamps a runtime stamps on containers (display only), and timers. Injected
// everywhere in src/executor/, so tests and the control-plane simulator drive time by hand
// (manual-clock.ts) and a run is a function of its inputs.

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
