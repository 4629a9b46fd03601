// Virtual time for the driver simulator: every timer and clock the node driver reads
// (setTimeout, setInterval, setImmediate, Date, performance.now) is replaced by a fake clock
// (@sinonjs/fake-timers), so time moves only when the simulator advances it, and timers due at
// the same virtual instant fire in the order they were set. Promise jobs and queueMicrotask stay
// real: they run in a fixed order, and every one pending drains before the next timer fires.
//
// The driver's other source of chance is crypto.randomBytes (its incarnation id and the core's
// PRNG seed, both drawn in the constructor and in the synchronous part of start()): withEntropy
// swaps it for seeded bytes for exactly that span.

import { withGlobal, type Clock } from '@sinonjs/fake-timers';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import type { SeededPrng } from '../../src/raft/prng.ts';

const faked = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date', 'performance'] as const;

/** Installs the fake clock at virtual time 0; uninstall() it when the run ends (also on failure). */
export function installVirtualTime(): Clock {
  // loopLimit: a run fires far more timers than the default 1,000 per tick call allows.
  return withGlobal(globalThis).install({ now: 0, toFake: [...faked], loopLimit: 10_000_000, shouldClearNativeTimers: false });
}

const require = createRequire(import.meta.url);
const crypto = require('node:crypto') as { randomBytes: (size: number) => Buffer };

/** Runs `fn` with crypto.randomBytes drawing from `prng` (for ESM importers too), then restores it. */
export function withEntropy<T>(prng: SeededPrng, fn: () => T): T {
  const real = crypto.randomBytes;
  crypto.randomBytes = (size: number): Buffer => Buffer.from(Array.from({ length: size }, () => prng.nextInt(256)));
  syncBuiltinESMExports();
  try {
    return fn();
  } finally {
    crypto.randomBytes = real;
    syncBuiltinESMExports();
  }
}
