import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from '../../src/base/backoff.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { decideLocalRestart, restartDelayMs } from '../../src/executor/restart-backoff.ts';
import type { RestartPolicy } from '../../src/resources/spec/service-spec.ts';

describe('ManualClock', () => {
  it('fires timers in due order, ties in the order set, at their due time, including ones set while firing', () => {
    const clock = new ManualClock(0, 1000);
    const fired: string[] = [];
    clock.setTimer(20, () => fired.push(`b@${clock.now()}`));
    clock.setTimer(10, () => {
      fired.push(`a@${clock.now()}`);
      clock.setTimer(5, () => fired.push(`c@${clock.now()}`));
    });
    clock.setTimer(20, () => fired.push(`d@${clock.now()}`));
    const t = clock.setTimer(15, () => fired.push('cancelled'));
    t.cancel();
    expect(clock.nextDueMs()).toBe(10);
    expect(clock.advance(100)).toBe(4);
    expect(fired).toEqual(['a@10', 'c@15', 'b@20', 'd@20']);
    expect(clock.now()).toBe(100);
    expect(clock.wallNow()).toBe(1100);
    expect(clock.pendingCount()).toBe(0);
  });

  it('advance(0) fires what is due now; a negative advance is refused', () => {
    const clock = new ManualClock();
    let n = 0;
    clock.setTimer(0, () => n++);
    clock.advance(0);
    expect(n).toBe(1);
    expect(() => clock.advance(-1)).toThrow(RangeError);
  });
});

describe('backoffDelayMs', () => {
  it('doubles from min up to max', () => {
    expect([0, 1, 2, 3, 4, 5, 100].map((f) => backoffDelayMs(f, 100, 1000))).toEqual([0, 100, 200, 400, 800, 1000, 1000]);
  });
});

describe('decideLocalRestart', () => {
  const policy: RestartPolicy = { condition: 'always', delayMs: 1000, maxDelayMs: 3000, maxAttempts: null };

  it('waits delayMs after the exit is first seen, then restarts, doubling up to maxDelayMs', () => {
    expect(decideLocalRestart(policy, 0, 1, undefined, 500)).toEqual({ kind: 'wait', untilMs: 1500, state: { count: 0, notBeforeMs: 1500 } });
    expect(decideLocalRestart(policy, 0, 1, { count: 0, notBeforeMs: 1500 }, 1499)).toMatchObject({ kind: 'wait', untilMs: 1500 });
    expect(decideLocalRestart(policy, 0, 1, { count: 0, notBeforeMs: 1500 }, 1500)).toEqual({ kind: 'restart', state: { count: 1, notBeforeMs: null } });
    expect([0, 1, 2, 3].map((c) => restartDelayMs(policy, c))).toEqual([1000, 2000, 3000, 3000]);
    expect(decideLocalRestart({ ...policy, delayMs: 0 }, 0, 1, undefined, 10)).toMatchObject({ kind: 'restart' });
  });

  it('follows the condition', () => {
    expect(decideLocalRestart({ ...policy, condition: 'never' }, 0, 1, undefined, 0)).toMatchObject({ kind: 'no' });
    expect(decideLocalRestart({ ...policy, condition: 'on-failure' }, 0, 0, undefined, 0)).toMatchObject({ kind: 'no' });
    expect(decideLocalRestart({ ...policy, condition: 'on-failure' }, 0, 2, undefined, 0)).toMatchObject({ kind: 'wait' });
    expect(decideLocalRestart(policy, 0, 0, undefined, 0)).toMatchObject({ kind: 'wait' });
  });

  it('counts the task\'s attempt and its local restarts against maxAttempts', () => {
    const p = { ...policy, maxAttempts: 3 };
    expect(decideLocalRestart(p, 0, 1, { count: 1, notBeforeMs: 0 }, 0)).toMatchObject({ kind: 'restart' });
    expect(decideLocalRestart(p, 0, 1, { count: 2, notBeforeMs: 0 }, 0)).toMatchObject({ kind: 'no', why: '3 failed attempts, the policy allows 3' });
    expect(decideLocalRestart(p, 2, 1, undefined, 0)).toMatchObject({ kind: 'no' });
  });
});
