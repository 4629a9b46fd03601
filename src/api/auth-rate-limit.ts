// A token bucket per remote address for failed authentications: a client that keeps presenting
// bad credentials (guessing tokens, a forged principal header, a certificate of another CA) is
// answered 429 too_many_requests with Retry-After once its bucket is empty, until it refills.
// The table is bounded: past `addressesMax` the address seen least recently is forgotten. The
// join route bounds refused join tokens with the same limiter (join-routes.ts).

export interface AuthFailureLimits {
  /** Failures an address may have in a burst before it is refused. */
  burst: number;
  /** Failures forgiven per second once the burst is spent. */
  refillPerSecond: number;
  /** Addresses remembered at most (the oldest are dropped first). */
  addressesMax: number;
}

export const authFailureLimitsDefault: AuthFailureLimits = { burst: 20, refillPerSecond: 1, addressesMax: 10_000 };

interface Bucket {
  tokens: number;
  atMs: number;
}

export class AuthFailureLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly limits: AuthFailureLimits = authFailureLimitsDefault, private readonly nowMs: () => number = Date.now) {}

  /** Seconds until `address` may try again, or 0 when it may try now. */
  retryAfterSeconds(address: string): number {
    const b = this.refilled(address);
    if (b === undefined || b.tokens >= 1) return 0;
    return Math.max(1, Math.ceil((1 - b.tokens) / this.limits.refillPerSecond));
  }

  /** Counts one failed authentication from `address`. */
  fail(address: string): void {
    const b = this.refilled(address) ?? { tokens: this.limits.burst, atMs: this.nowMs() };
    b.tokens = Math.max(0, b.tokens - 1);
    // Re-inserted: the Map's order is then the order of last failure, oldest first.
    this.buckets.delete(address);
    this.buckets.set(address, b);
    while (this.buckets.size > this.limits.addressesMax) {
      const oldest = this.buckets.keys().next().value;
      if (oldest === undefined) break;
      this.buckets.delete(oldest);
    }
  }

  private refilled(address: string): Bucket | undefined {
    const b = this.buckets.get(address);
    if (b === undefined) return undefined;
    const now = this.nowMs();
    b.tokens = Math.min(this.limits.burst, b.tokens + ((now - b.atMs) / 1000) * this.limits.refillPerSecond);
    b.atMs = now;
    if (b.tokens >= this.limits.burst) this.buckets.delete(address);
    return b;
  }
}
