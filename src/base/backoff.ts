// Capped exponential backoff, the one formula every retry in shoal uses: minMs after the first
// failure, doubled after each further one, at most maxMs. The function is pure and deterministic
// (a simulated run replays); `Backoff` adds optional jitter from an injected random source, so
// the nodes of a cluster that lost a peer at the same moment do not dial it in lockstep while a
// test can still fix the draw.

/** The wait after `failures` consecutive failures (1 = the first): minMs, doubled each time, at most maxMs. 0 for none. */
export function backoffDelayMs(failures: number, minMs: number, maxMs: number): number {
  if (failures <= 0) return 0;
  // 2 ** 40 already exceeds any sane maxMs; the cap keeps the power finite on a peer down for days.
  return Math.min(maxMs, minMs * 2 ** Math.min(failures - 1, 40));
}

export interface BackoffOptions {
  minMs: number;
  maxMs: number;
  /** Each delay is scaled by a factor drawn from [1 - ratio, 1 + ratio); 0 for none. */
  jitterRatio?: number;
}

/** A failure counter with its delays: `next()` counts one failure and returns the wait before the next try. */
export class Backoff {
  private failures = 0;

  constructor(
    private readonly options: BackoffOptions,
    /** Returns a number in [0, 1) (the transport passes the global source); injected, so this file stays pure. */
    private readonly random: () => number,
  ) {}

  /** The delay before the next attempt; each call counts one failed attempt. */
  next(): number {
    this.failures++;
    const base = backoffDelayMs(this.failures, this.options.minMs, this.options.maxMs);
    const ratio = this.options.jitterRatio ?? 0;
    return ratio === 0 ? base : Math.round(base * (1 + ratio * (2 * this.random() - 1)));
  }

  /** Failures counted since the last reset. */
  get count(): number {
    return this.failures;
  }

  /** After an attempt that worked: the next failure starts from the shortest delay again. */
  reset(): void {
    this.failures = 0;
  }
}
