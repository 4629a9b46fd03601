// The agent's per-task work queue: everything it does to the runtime for one task (pull, create,
// start, stop, remove) runs as one piece of work under the task's key, so two operations on the
// same task never run at once, while different tasks proceed side by side up to a bound.
//
// Every runtime call made from a piece of work has a timeout: the work sees a
// RuntimeError('timeout') and ends, so one hung call does not hold the agent. The key stays
// busy, though, until the hung call itself settles: the runtime may still act on it, and a
// second operation on the same container must not overlap it.

import type { Clock } from './clock.ts';
import { RuntimeError } from './runtime.ts';

/** Runs `f` (one runtime call) with a timeout; `what` names it in the timeout's message. */
export type Call = <T>(what: string, timeoutMs: number, f: () => Promise<T>) => Promise<T>;

/**
 * Calls `f` and rejects with RuntimeError('timeout') if it has not settled within `timeoutMs`.
 * `settled` resolves when `f`'s promise settles, whether before or after the timeout.
 */
export function callWithTimeout<T>(clock: Clock, what: string, timeoutMs: number, f: () => Promise<T>): { result: Promise<T>; settled: Promise<void> } {
  let p: Promise<T>;
  try {
    p = f();
  } catch (err) {
    p = Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
  const settled = p.then(() => undefined, () => undefined);
  const result = new Promise<T>((resolve, reject) => {
    const timer = clock.setTimer(timeoutMs, () => reject(new RuntimeError('timeout', `${what}: no answer within ${timeoutMs} ms`)));
    p.then((v) => {
      timer.cancel();
      resolve(v);
    }, (err: unknown) => {
      timer.cancel();
      reject(err instanceof Error ? err : new Error(String(err)));
    });
  });
  return { result, settled };
}

interface KeyState {
  /** Calls of this key not settled yet (timed-out ones included). */
  outstanding: Set<Promise<void>>;
  workDone: boolean;
  thrown: unknown;
}

export class TaskWorkQueue {
  private readonly keys = new Map<string, KeyState>();
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly clock: Clock, private readonly concurrentMax: number) {
    if (!(concurrentMax >= 1)) throw new RangeError(`concurrentMax must be at least 1, got ${concurrentMax}`);
  }

  isBusy(key: string): boolean {
    return this.keys.has(key);
  }

  busyKeys(): ReadonlySet<string> {
    return new Set(this.keys.keys());
  }

  /** Keys busy, hung calls' included. */
  size(): number {
    return this.keys.size;
  }

  hasRoom(): boolean {
    return this.keys.size < this.concurrentMax;
  }

  /**
   * Runs `work` under `key`; `onReleased` is called once the key is free again (the work ended
   * and every call it made settled), with what the work threw, if it threw. The key must not be
   * busy and there must be room: the caller asks first (a programmer error otherwise).
   */
  run(key: string, work: (call: Call) => Promise<void>, onReleased: (thrown: unknown) => void): void {
    if (this.keys.has(key)) throw new Error(`assertion: work for ${key} while it is busy`);
    if (!this.hasRoom()) throw new Error(`assertion: work for ${key} beyond ${this.concurrentMax} at once`);
    const state: KeyState = { outstanding: new Set(), workDone: false, thrown: undefined };
    this.keys.set(key, state);
    const release = (): void => {
      if (!state.workDone || state.outstanding.size > 0 || this.keys.get(key) !== state) return;
      this.keys.delete(key);
      onReleased(state.thrown);
      if (this.keys.size === 0) for (const w of this.idleWaiters.splice(0)) w();
    };
    const call: Call = (what, timeoutMs, f) => {
      const { result, settled } = callWithTimeout(this.clock, what, timeoutMs, f);
      state.outstanding.add(settled);
      void settled.then(() => {
        state.outstanding.delete(settled);
        release();
      });
      return result;
    };
    void (async () => {
      try {
        await work(call);
      } catch (err) {
        state.thrown = err;
      }
      state.workDone = true;
      release();
    })();
  }

  /** Resolves when no key is busy. */
  whenIdle(): Promise<void> {
    if (this.keys.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
