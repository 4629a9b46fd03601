// Bounds how fast one address may guess: after `max` refused join attempts within `windowMs`,
// further attempts from it are refused before the token is even looked at, until the window
// has passed. Tokens carry 256 random bits, so this is about log noise and load more than about
// guessing; it also bounds the refusal events written to the store.

export const joinRefusalsPerWindowMax = 10;
export const joinRefusalWindowMs = 60_000;
/** Addresses tracked at once; the oldest is forgotten beyond this. */
const addressesMax = 10_000;

export class RefusalLimiter {
  private readonly refusals = new Map<string, number[]>();

  constructor(private readonly max = joinRefusalsPerWindowMax, private readonly windowMs = joinRefusalWindowMs) {}

  /** Whether `address` may try now. */
  allows(address: string, nowMs: number): boolean {
    return this.recent(address, nowMs).length < this.max;
  }

  /** Ms until `address` may try again (0: now). */
  retryAfterMs(address: string, nowMs: number): number {
    const recent = this.recent(address, nowMs);
    if (recent.length < this.max) return 0;
    return (recent[recent.length - this.max] ?? nowMs) + this.windowMs - nowMs;
  }

  note(address: string, nowMs: number): void {
    const recent = this.recent(address, nowMs);
    recent.push(nowMs);
    this.refusals.delete(address);
    this.refusals.set(address, recent.slice(-this.max));
    if (this.refusals.size > addressesMax) {
      const oldest = this.refusals.keys().next().value;
      if (oldest !== undefined) this.refusals.delete(oldest);
    }
  }

  private recent(address: string, nowMs: number): number[] {
    return (this.refusals.get(address) ?? []).filter((t) => nowMs - t < this.windowMs);
  }
}
