// ChangeWake (fsm/change-wake.ts): an agent's pass runs when its collections change, with no timer
// (fake timers here are never advanced unless the test says so), once for the changes of one turn,
// again after a pass if a change came while it ran; the sweep and retryIn stay for the rest.

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ChangeWake } from '../../fsm/index.ts';
import { feeder } from './harness.ts';

const settle = async (): Promise<void> => { for (let i = 0; i < 10; i++) await Promise.resolve(); };

describe('ChangeWake', () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it('runs a pass at start and on each change of its collections, without a timer; not for other collections', async () => {
    const f = feeder();
    const seen: number[] = [];
    const wake = new ChangeWake({ store: f.store, collections: ['followed'], sweepMs: 60_000, run: () => { seen.push(f.store.revision); } });
    wake.start();
    await settle();
    expect(seen).toEqual([0]);
    f.put('other', 'a', { v: 1 });
    await settle();
    expect(seen).toEqual([0]);
    // Two changes in one turn: one pass, after both.
    f.put('followed', 'a', { v: 1 });
    f.put('followed', 'b', { v: 1 });
    await settle();
    expect(seen).toEqual([0, 3]);
    wake.close();
    f.put('followed', 'c', { v: 1 });
    await settle();
    expect(seen).toEqual([0, 3]);
  });

  it('runs once more when a change comes while a pass runs, and never two passes at once', async () => {
    const f = feeder();
    let active = 0;
    let most = 0;
    let release: () => void = () => {};
    const wake = new ChangeWake({
      store: f.store, collections: ['followed'], sweepMs: 60_000,
      run: async () => { active++; most = Math.max(most, active); await new Promise<void>((r) => { release = r; }); active--; },
    });
    wake.start();
    await settle();
    expect(wake.passes).toBe(1);
    f.put('followed', 'a', { v: 1 });
    f.put('followed', 'b', { v: 1 });
    await settle();
    expect(wake.passes).toBe(1);
    release();
    await settle();
    expect(wake.passes).toBe(2);
    release();
    await settle();
    expect(wake.passes).toBe(2);
    expect(most).toBe(1);
    wake.close();
  });

  it('keeps a slow sweep and a retry for what no change announces', async () => {
    const f = feeder();
    const wake = new ChangeWake({ store: f.store, collections: ['followed'], sweepMs: 10_000, run: () => {} });
    wake.start();
    await settle();
    wake.retryIn(500);
    await vi.advanceTimersByTimeAsync(499);
    expect(wake.passes).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(wake.passes).toBe(2);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(wake.passes).toBe(3);
    wake.close();
  });
});
