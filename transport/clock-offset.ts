// How far a peer's wall clock is from this node's, from the pongs that answer this node's pings
// (socket-util.ts: a pong carries the peer's Date.now() when it answered). The peer answered
// about half a round trip before the pong arrived, so
//
//   offset ≈ remoteWall − (localWallAtPong − rtt / 2)
//
// positive: the peer's clock is ahead of this node's. The error is at most half the round trip
// (under a millisecond on a LAN), far below what the leader's clock rule cares about (seconds).
// A median of the last few samples drops one pong delayed by a stall; a stepped clock (NTP
// setting a Raspberry Pi's clock after boot) shows in the estimate within a few pings.

/** Samples the estimate is the median of. */
export const clockSamplesMax = 5;

export interface ClockOffset {
  /** The peer's wall clock minus this node's, ms. */
  offsetMs: number;
  /** When the newest sample was taken (performance.now()). */
  sampledAt: number;
}

export class ClockOffsetEstimate {
  private readonly samples: number[] = [];
  private sampledAt = 0;

  /** Takes one pong's reading. */
  add(remoteWallMs: number, localWallMs: number, rttMs: number, nowMonoMs: number): void {
    const offset = remoteWallMs - (localWallMs - rttMs / 2);
    if (!Number.isFinite(offset)) return;
    this.samples.push(offset);
    if (this.samples.length > clockSamplesMax) this.samples.shift();
    this.sampledAt = nowMonoMs;
  }

  /** The median of the kept samples with the newest one's time, or undefined before any. */
  current(): ClockOffset | undefined {
    if (this.samples.length === 0) return undefined;
    const sorted = [...this.samples].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    const offsetMs = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
    return { offsetMs, sampledAt: this.sampledAt };
  }
}
