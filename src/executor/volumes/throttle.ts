// A stream bounded in bandwidth (replicate.maxBandwidth, docs/volumes.md): the bytes pass through
// unchanged, held back so that, from the first byte on, no more than `bytesPerSecond` have passed
// after any time t than t allows (plus one chunk). The clock and the wait are ports, for tests.

import { Transform } from 'node:stream';

export interface ThrottleClock {
  /** Monotonic milliseconds. */
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: ThrottleClock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** A pass-through stream that lets at most `bytesPerSecond` through (on average since its first byte). */
export function throttle(bytesPerSecond: number, clock: ThrottleClock = realClock): Transform {
  if (!Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0) throw new RangeError(`a bandwidth is a positive number of bytes per second, not ${bytesPerSecond}`);
  let started: number | null = null;
  let passed = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      const now = clock.now();
      started ??= now;
      // The time by which the bytes before this chunk were allowed through.
      const due = started + (passed / bytesPerSecond) * 1000;
      passed += chunk.length;
      const wait = due - now;
      if (wait <= 0) {
        cb(null, chunk);
        return;
      }
      clock.sleep(wait).then(() => cb(null, chunk), (err: unknown) => cb(err as Error));
    },
  });
}
