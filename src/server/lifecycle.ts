// Components that start in a declared order and stop in the reverse order, on a normal stop and
// when a later start fails alike: a failed start stops, in reverse, exactly what had started, then
// rethrows its own error. The node's composition root (server.ts) declares its parts with it;
// nothing here knows what a node is.

import { performance } from 'node:perf_hooks';

/** Stops what a start started. */
export type Stop = () => void | Promise<void>;

/** One part: `start` does what the part needs and returns how to stop it (nothing: nothing to stop). */
export interface Component<C> {
  /** Names it in errors, logs and tests. */
  readonly name: string;
  start(ctx: C): void | Stop | Promise<void | Stop>;
}

/** Watchers of a lifecycle; tests use them to fail a given start and to see the stop order. */
export interface LifecycleHooks {
  /** Called before each component starts; a throw (or rejection) fails that component's start. */
  beforeStart?(name: string): void | Promise<void>;
  /** Called after each component's stop has run, whether or not it threw. */
  afterStop?(name: string): void;
}

export interface LifecycleOptions extends LifecycleHooks {
  /** Told of each stop that threw; the stops after it still run. */
  onStopError(name: string, err: unknown): void;
}

/** Thrown by a start after close() began: the component is stopped again at once. */
export class LifecycleClosedError extends Error {
  constructor(name: string) {
    super(`cannot start ${name}: the lifecycle is closed`);
    this.name = 'LifecycleClosedError';
  }
}

/** How long one component's start took (ms, wall clock), for the node's start-up line. */
export interface StartTime {
  readonly name: string;
  readonly ms: number;
}

export class Lifecycle {
  /** Stops of the components started and not yet stopped, in start order. */
  private readonly stops: { name: string; stop: Stop }[] = [];
  /** Every successful start's duration, in start order. */
  private readonly times: StartTime[] = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly opts: LifecycleOptions) {}

  /** The components started and not yet stopped, in start order. */
  get started(): string[] {
    return this.stops.map((s) => s.name);
  }

  /** How long each component that started took to start, in start order. */
  get startTimes(): readonly StartTime[] {
    return this.times;
  }

  /** Starts each component in order; on a failure, see start(). */
  async startAll<C>(components: readonly Component<C>[], ctx: C): Promise<void> {
    for (const c of components) await this.start(c.name, () => c.start(ctx));
  }

  /**
   * Starts one component and records its stop. When the start throws, every component started
   * before it is stopped, in reverse, and the start's own error is rethrown (a stop that fails
   * meanwhile is reported through onStopError). The lifecycle is closed from then on.
   */
  async start(name: string, start: () => void | Stop | Promise<void | Stop>): Promise<void> {
    if (this.closing !== undefined) throw new LifecycleClosedError(name);
    let stop: void | Stop;
    const began = performance.now();
    try {
      await this.opts.beforeStart?.(name);
      stop = await start();
    } catch (err) {
      await this.close().catch(() => undefined);
      throw err;
    }
    if (this.closing !== undefined) {
      // close() ran while this start was in flight: it did not see this component.
      if (typeof stop === 'function') await this.runStop({ name, stop });
      throw new LifecycleClosedError(name);
    }
    this.times.push({ name, ms: performance.now() - began });
    if (typeof stop === 'function') this.stops.push({ name, stop });
  }

  /**
   * Stops every started component in the reverse order of their starts, each awaited before the
   * next. A stop that throws is reported and the rest still run; the returned promise then
   * rejects, once all have run, with that error (or an AggregateError of several). Idempotent:
   * every call returns the same promise.
   */
  close(): Promise<void> {
    this.closing ??= this.stopAll();
    return this.closing;
  }

  private async stopAll(): Promise<void> {
    const failed: { name: string; err: unknown }[] = [];
    for (let s = this.stops.pop(); s !== undefined; s = this.stops.pop()) {
      const outcome = await this.runStop(s);
      if (outcome !== undefined) failed.push(outcome);
    }
    if (failed.length === 1) throw failed[0]?.err;
    if (failed.length > 1) throw new AggregateError(failed.map((f) => f.err), `stopping failed for ${failed.map((f) => f.name).join(', ')}`);
  }

  private async runStop(s: { name: string; stop: Stop }): Promise<{ name: string; err: unknown } | undefined> {
    try {
      await s.stop();
      return undefined;
    } catch (err) {
      this.opts.onStopError(s.name, err);
      return { name: s.name, err };
    } finally {
      this.opts.afterStop?.(s.name);
    }
  }
}

/**
 * The components whose start took at least `minMs`, slowest first, as "storage 90 ms, api 65 ms"
 * (with how many quicker ones were left out), for the node's start-up line.
 */
export function describeStartTimes(times: readonly StartTime[], minMs = 5): string {
  const slow = times.filter((t) => t.ms >= minMs).sort((a, b) => b.ms - a.ms);
  const parts = slow.map((t) => `${t.name} ${Math.round(t.ms)} ms`);
  const quick = times.length - slow.length;
  if (quick > 0) parts.push(`${quick} more under ${minMs} ms each`);
  return parts.join(', ');
}

/**
 * Where the start-up went (docs/operations.md, "Start-up time"): ms from the process's start to
 * its code loaded, to its components starting (the config read, a drill hold waited out) and to
 * the API answering, with the slowest components; and the CPU the process used to then (every
 * thread: on a busy machine the wall-clock figures wait on others, this one does not).
 */
export function startUpLine(codeMs: number, componentsMs: number, servingMs: number, times: readonly StartTime[], cpuMs: number): string {
  return `${Math.round(servingMs)} ms after the process started, ${Math.round(cpuMs)} ms of CPU (code loaded ${Math.round(codeMs)} ms, `
    + `config ${Math.round(componentsMs - codeMs)} ms, components ${Math.round(servingMs - componentsMs)} ms: ${describeStartTimes(times)})`;
}
