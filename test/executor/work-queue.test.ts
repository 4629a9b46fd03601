import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { RuntimeError } from '../../src/executor/runtime.ts';
import { TaskWorkQueue, callWithTimeout } from '../../src/executor/work-queue.ts';
import { flush } from './harness.ts';

function never(): Promise<void> {
  return new Promise(() => undefined);
}

describe('callWithTimeout', () => {
  it('rejects with a timeout at the deadline, and tells when the call itself settles', async () => {
    const clock = new ManualClock();
    let settle!: () => void;
    const { result, settled } = callWithTimeout(clock, 'stopping', 1000, () => new Promise<void>((r) => { settle = r; }));
    let err: unknown = null;
    void result.catch((e: unknown) => { err = e; });
    let done = false;
    void settled.then(() => { done = true; });
    clock.advance(999);
    await flush();
    expect(err).toBeNull();
    clock.advance(1);
    await flush();
    expect(err).toBeInstanceOf(RuntimeError);
    expect(err).toMatchObject({ kind: 'timeout', message: 'stopping: no answer within 1000 ms' });
    expect(done).toBe(false);
    settle();
    await flush();
    expect(done).toBe(true);
  });

  it('passes a result or a rejection through', async () => {
    const clock = new ManualClock();
    await expect(callWithTimeout(clock, 'x', 10, () => Promise.resolve(7)).result).resolves.toBe(7);
    await expect(callWithTimeout(clock, 'x', 10, () => Promise.reject(new RuntimeError('failed', 'no'))).result).rejects.toMatchObject({ kind: 'failed' });
    await expect(callWithTimeout(clock, 'x', 10, () => { throw new Error('sync'); }).result).rejects.toThrow('sync');
  });
});

describe('TaskWorkQueue', () => {
  it('one piece of work per key at a time; other keys proceed', async () => {
    const clock = new ManualClock();
    const q = new TaskWorkQueue(clock, 4);
    const released: string[] = [];
    q.run('a', (call) => call('hung', 1000, never), () => released.push('a'));
    q.run('b', async (call) => { await call('quick', 1000, () => Promise.resolve()); }, () => released.push('b'));
    expect(() => q.run('a', () => Promise.resolve(), () => undefined)).toThrow(/busy/);
    await flush();
    expect(released).toEqual(['b']);
    expect(q.isBusy('a')).toBe(true);
    expect(q.isBusy('b')).toBe(false);
  });

  it('a timed-out call ends the work, but the key stays busy until the call settles', async () => {
    const clock = new ManualClock();
    const q = new TaskWorkQueue(clock, 4);
    let settle!: () => void;
    let seen: unknown = null;
    let released = 0;
    q.run('a', async (call) => {
      try {
        await call('stopping', 1000, () => new Promise<void>((r) => { settle = r; }));
      } catch (e) {
        seen = e;
      }
    }, () => { released++; });
    clock.advance(1000);
    await flush();
    expect(seen).toMatchObject({ kind: 'timeout' });
    expect(q.isBusy('a')).toBe(true);
    settle();
    await flush();
    expect(q.isBusy('a')).toBe(false);
    expect(released).toBe(1);
  });

  it('bounds the work at once, and hands what the work threw to the release', async () => {
    const clock = new ManualClock();
    const q = new TaskWorkQueue(clock, 2);
    let thrown: unknown;
    q.run('a', () => never(), () => undefined);
    q.run('b', () => Promise.reject(new Error('bug')), (t) => { thrown = t; });
    expect(q.hasRoom()).toBe(false);
    expect(() => q.run('c', () => Promise.resolve(), () => undefined)).toThrow(/beyond 2/);
    await flush();
    expect((thrown as Error).message).toBe('bug');
    expect(q.hasRoom()).toBe(true);
    expect([...q.busyKeys()]).toEqual(['a']);
  });

  it('whenIdle resolves once no key is busy', async () => {
    const clock = new ManualClock();
    const q = new TaskWorkQueue(clock, 2);
    await q.whenIdle();
    let done!: () => void;
    q.run('a', () => new Promise<void>((r) => { done = r; }), () => undefined);
    let idle = false;
    void q.whenIdle().then(() => { idle = true; });
    await flush();
    expect(idle).toBe(false);
    done();
    await flush();
    expect(idle).toBe(true);
  });
});
