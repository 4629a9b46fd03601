// Fixtures made on one day must behave the same on every later day. A fixture that holds
// something measured against the calendar (idempotency records, certificates, tokens, leases)
// runs its test with the wall clock set back to when the fixture was made: `Date` alone is
// faked and keeps ticking with real time, so timers, `performance.now()` and the I/O the test
// waits on are untouched. docs/testing.md ("Fixtures that age") says when to use it.
import { afterEach, vi } from 'vitest';

/** A minute after the fixture was made: inside every window the fixture holds. */
const settleMs = 60_000;

/**
 * Sets `Date` to `madeAtMs` plus a minute for the rest of the current test file's test, and
 * back to the real clock after it. Call it at the start of a test, before anything reads the clock.
 */
export function atFixtureTime(madeAtMs: number): void {
  if (!Number.isFinite(madeAtMs) || madeAtMs <= 0) throw new Error(`atFixtureTime: ${madeAtMs} is not a time a fixture was made at`);
  vi.useFakeTimers({ toFake: ['Date'], now: madeAtMs + settleMs, shouldAdvanceTime: true });
}

afterEach(() => {
  vi.useRealTimers();
});
