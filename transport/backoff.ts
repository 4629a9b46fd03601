// Capped, jittered exponential backoff for reconnects. Jitter keeps the nodes of a cluster that
// lost a peer at the same moment from dialling it in lockstep.

export interface BackoffOptions {
  minMs: number;
  maxMs: number;
  /** Each delay is scaled by a factor drawn from [1 - ratio, 1 + ratio). */
  jitterRatio: number;
}

export class Backoff {
  private attempt = 0;

  constructor(
    private readonly options: BackoffOptions,
    /** Returns a number in [0, 1); injected so tests are deterministic. */
    private readonly random: () => number = Math.random,
  ) {}

  /** The delay before the next attempt; each call counts one failed attempt. */
  next(): number {
    const { minMs, maxMs, jitterRatio } = this.options;
    // Cap the exponent so 2 ** attempt never overflows on a peer that is down for days.
    const base = Math.min(maxMs, minMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    const factor = 1 + jitterRatio * (2 * this.random() - 1);
    return Math.round(base * factor);
  }

  /** After a connection that worked: the next failure starts from the shortest delay again. */
  reset(): void {
    this.attempt = 0;
  }
}
