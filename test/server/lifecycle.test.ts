// The component lifecycle (src/server/lifecycle.ts): start in order, stop in reverse, on a normal
// stop and on a failed start alike; a stop that throws neither stops the others nor goes unheard.

import { describe, expect, it } from 'vitest';
import { describeStartTimes, Lifecycle, LifecycleClosedError, startUpLine, type Component, type LifecycleOptions } from '../../src/server/lifecycle.ts';

interface Trace {
  events: string[];
  stopErrors: [string, string][];
}

function traced(opts: Partial<LifecycleOptions> = {}): { lifecycle: Lifecycle; trace: Trace } {
  const trace: Trace = { events: [], stopErrors: [] };
  const lifecycle = new Lifecycle({
    onStopError: (name, err) => trace.stopErrors.push([name, (err as Error).message]),
    afterStop: (name) => trace.events.push(`stopped ${name}`),
    ...opts,
  });
  return { lifecycle, trace };
}

/** A component that notes its start, and its stop unless it has none; `fail` makes either throw. */
function part(name: string, trace: Trace, o: { fail?: 'start' | 'stop'; noStop?: boolean; async?: boolean } = {}): Component<unknown> {
  return {
    name,
    start: async () => {
      if (o.async === true) await new Promise((r) => setTimeout(r, 1));
      trace.events.push(`start ${name}`);
      if (o.fail === 'start') throw new Error(`${name} cannot start`);
      if (o.noStop === true) return undefined;
      return async () => {
        if (o.async === true) await new Promise((r) => setTimeout(r, 1));
        trace.events.push(`stop ${name}`);
        if (o.fail === 'stop') throw new Error(`${name} cannot stop`);
      };
    },
  };
}

describe('Lifecycle', () => {
  it('starts in the declared order and stops in the reverse order, each stop awaited', async () => {
    const { lifecycle, trace } = traced();
    await lifecycle.startAll([part('a', trace, { async: true }), part('b', trace), part('c', trace, { async: true })], null);
    expect(lifecycle.started).toEqual(['a', 'b', 'c']);
    await lifecycle.close();
    expect(trace.events).toEqual(['start a', 'start b', 'start c', 'stop c', 'stopped c', 'stop b', 'stopped b', 'stop a', 'stopped a']);
    expect(lifecycle.started).toEqual([]);
  });

  it('passes the shared context to every start', async () => {
    const { lifecycle } = traced();
    const ctx = { made: [] as string[] };
    const make = (name: string): Component<typeof ctx> => ({ name, start: (c) => { c.made.push(name); } });
    await lifecycle.startAll([make('x'), make('y')], ctx);
    expect(ctx.made).toEqual(['x', 'y']);
  });

  it('a component with nothing to stop is not stopped', async () => {
    const { lifecycle, trace } = traced();
    await lifecycle.startAll([part('a', trace), part('b', trace, { noStop: true }), part('c', trace)], null);
    expect(lifecycle.started).toEqual(['a', 'c']);
    await lifecycle.close();
    expect(trace.events.filter((e) => e.startsWith('stop '))).toEqual(['stop c', 'stop a']);
  });

  it('a failed start stops, in reverse, exactly what had started, then rethrows the original error', async () => {
    for (let failing = 0; failing < 4; failing++) {
      const { lifecycle, trace } = traced();
      const names = ['a', 'b', 'c', 'd'];
      const parts = names.map((n, i) => part(n, trace, i === failing ? { fail: 'start' } : { async: i % 2 === 0 }));
      await expect(lifecycle.startAll(parts, null)).rejects.toThrow(`${names[failing]} cannot start`);
      const started = names.slice(0, failing);
      expect(trace.events).toEqual([
        ...names.slice(0, failing + 1).map((n) => `start ${n}`),
        ...[...started].reverse().flatMap((n) => [`stop ${n}`, `stopped ${n}`]),
      ]);
      expect(lifecycle.started).toEqual([]);
    }
  });

  it('a throw from beforeStart fails that start the same way (the hook tests use to inject failures)', async () => {
    const trace: Trace = { events: [], stopErrors: [] };
    const { lifecycle } = traced({
      afterStop: (name) => trace.events.push(`stopped ${name}`),
      beforeStart: (name) => { if (name === 'c') throw new Error('injected'); },
    });
    await expect(lifecycle.startAll([part('a', trace), part('b', trace), part('c', trace), part('d', trace)], null)).rejects.toThrow('injected');
    expect(trace.events).toEqual(['start a', 'start b', 'stop b', 'stopped b', 'stop a', 'stopped a']);
  });

  it('a stop that throws does not keep the others from stopping; it is reported, and close() rejects with it', async () => {
    const { lifecycle, trace } = traced();
    await lifecycle.startAll([part('a', trace), part('b', trace, { fail: 'stop' }), part('c', trace)], null);
    await expect(lifecycle.close()).rejects.toThrow('b cannot stop');
    expect(trace.events.filter((e) => e.startsWith('stop'))).toEqual(['stop c', 'stopped c', 'stop b', 'stopped b', 'stop a', 'stopped a']);
    expect(trace.stopErrors).toEqual([['b', 'b cannot stop']]);
  });

  it('several stops that throw: all run, each is reported, close() rejects with all of them', async () => {
    const { lifecycle, trace } = traced();
    await lifecycle.startAll([part('a', trace, { fail: 'stop' }), part('b', trace), part('c', trace, { fail: 'stop' })], null);
    const err: unknown = await lifecycle.close().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(AggregateError);
    expect((err as AggregateError).errors.map((e: Error) => e.message)).toEqual(['c cannot stop', 'a cannot stop']);
    expect((err as AggregateError).message).toContain('c, a');
    expect(trace.stopErrors.map(([n]) => n)).toEqual(['c', 'a']);
    expect(trace.events.filter((e) => e.startsWith('stop '))).toEqual(['stop c', 'stop b', 'stop a']);
  });

  it('on a failed start, a stop that throws is reported and the original start error is the one rethrown', async () => {
    const { lifecycle, trace } = traced();
    const parts = [part('a', trace), part('b', trace, { fail: 'stop' }), part('c', trace, { fail: 'start' })];
    await expect(lifecycle.startAll(parts, null)).rejects.toThrow('c cannot start');
    expect(trace.stopErrors).toEqual([['b', 'b cannot stop']]);
    expect(trace.events.filter((e) => e.startsWith('stop '))).toEqual(['stop b', 'stop a']);
  });

  it('close() is idempotent: every call returns the same promise and stops each component once', async () => {
    const { lifecycle, trace } = traced();
    await lifecycle.startAll([part('a', trace, { async: true }), part('b', trace, { async: true })], null);
    const first = lifecycle.close();
    const second = lifecycle.close();
    expect(second).toBe(first);
    await Promise.all([first, second, lifecycle.close()]);
    await lifecycle.close();
    expect(trace.events.filter((e) => e.startsWith('stop '))).toEqual(['stop b', 'stop a']);
  });

  it('refuses to start after close(), and stops at once a component whose start was in flight when close() began', async () => {
    const { lifecycle, trace } = traced();
    await lifecycle.startAll([part('a', trace)], null);
    let release = (): void => {};
    const slow = lifecycle.start('slow', async () => {
      await new Promise<void>((r) => { release = r; });
      trace.events.push('start slow');
      return () => { trace.events.push('stop slow'); };
    });
    await lifecycle.close();
    release();
    await expect(slow).rejects.toBeInstanceOf(LifecycleClosedError);
    await expect(lifecycle.start('late', () => undefined)).rejects.toBeInstanceOf(LifecycleClosedError);
    expect(trace.events).toEqual(['start a', 'stop a', 'stopped a', 'start slow', 'stop slow', 'stopped slow']);
  });
});

describe('start times (the node\'s start-up line)', () => {
  it('records how long each component that started took, in start order, whether it has a stop or not', async () => {
    const { lifecycle, trace } = traced();
    const slow: Component<unknown> = { name: 'slow', start: () => new Promise<void>((r) => setTimeout(r, 40)) };
    await lifecycle.startAll([part('a', trace), slow, part('b', trace, { noStop: true })], null);
    expect(lifecycle.startTimes.map((t) => t.name)).toEqual(['a', 'slow', 'b']);
    const [a, s] = lifecycle.startTimes;
    expect(s?.ms).toBeGreaterThanOrEqual(35);
    expect(a?.ms).toBeLessThan(s?.ms ?? 0);
  });

  it('a start that fails is not recorded', async () => {
    const { lifecycle, trace } = traced();
    await expect(lifecycle.startAll([part('a', trace), part('bad', trace, { fail: 'start' })], null)).rejects.toThrow('bad cannot start');
    expect(lifecycle.startTimes.map((t) => t.name)).toEqual(['a']);
  });

  it('names the slow components, slowest first, and counts the quick ones', () => {
    const times = [{ name: 'peer-http', ms: 0.4 }, { name: 'storage', ms: 41.6 }, { name: 'api', ms: 88.2 }, { name: 'dns', ms: 5 }, { name: 'vip', ms: 1.2 }];
    expect(describeStartTimes(times)).toBe('api 88 ms, storage 42 ms, dns 5 ms, 2 more under 5 ms each');
    expect(describeStartTimes(times.filter((t) => t.ms >= 5))).toBe('api 88 ms, storage 42 ms, dns 5 ms');
    expect(startUpLine(251.2, 262.9, 400.4, times, 380.6)).toBe('400 ms after the process started, 381 ms of CPU (code loaded 251 ms, config 12 ms, components 138 ms: api 88 ms, storage 42 ms, dns 5 ms, 2 more under 5 ms each)');
  });
});
