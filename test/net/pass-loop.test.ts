// The loop the node's network agents share: marks coalesce, a pass runs at most once at a time,
// a change during a pass runs one more, and failed passes are retried with a growing wait.

import { afterEach, describe, expect, it, vi } from 'vitest';
import { PassLoop } from '../../net/pass-loop.ts';

afterEach(() => { vi.useRealTimers(); });

describe('PassLoop', () => {
  it('runs one pass for a burst of marks within coalesceMs, and one more for a mark during a pass', async () => {
    vi.useFakeTimers();
    let passes = 0;
    let release: () => void = () => undefined;
    const loop = new PassLoop({
      name: 't', retryMs: 100, coalesceMs: 50, log: { warn: () => undefined },
      pass: () => { passes++; return new Promise<void>((r) => { release = r; }); },
    });
    loop.mark();
    loop.mark();
    await vi.advanceTimersByTimeAsync(49);
    expect(passes).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(passes).toBe(1);
    loop.mark();
    loop.mark();
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(passes).toBe(2);
    release();
    await loop.close();
    expect(passes).toBe(2);
  });

  it('retries a failing pass after retryMs, doubling up to retryMsMax, and logs each distinct problem once', async () => {
    vi.useFakeTimers();
    const at: number[] = [];
    const warnings: string[] = [];
    let fail = 4;
    const loop = new PassLoop({
      name: 'fw', retryMs: 100, retryMsMax: 300, log: { warn: (m) => warnings.push(m) },
      pass: async () => { at.push(Date.now()); if (fail-- > 0) throw new Error('busy'); },
    });
    const t0 = Date.now();
    loop.mark(true);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(at.map((t) => t - t0)).toEqual([0, 100, 300, 600, 900]);
    expect(warnings).toEqual(['fw: busy; retrying in 100 ms']);
    await loop.close();
  });
});
