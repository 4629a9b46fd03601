// One incarnation of shoal on a node: the clock, runtime and log its agent and leader loops see.
// kill() is kill -9: from then on none of its timers fire, no call it made to the runtime or the
// log ever answers it, and its event subscriptions end, while the runtime (a separate daemon)
// keeps its containers and finishes what it was asked to do. A restart is a new Session.
// While the machine's NodeClock is frozen (SIGSTOP, suspend) the answers it awaits are held too.

import type { AgentLog } from '../../src/executor/agent.ts';
import type { Clock, Timer } from '../../src/executor/clock.ts';
import type { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import type { NodeClock } from './node-clock.ts';
import type { ContainerInfo, ContainerSpec, Labels, LogOptions, Runtime, RuntimeError, RuntimeEvent } from '../../src/executor/runtime.ts';

export class Session {
  private dead = false;
  private readonly unsubscribes = new Set<() => void>();
  readonly clock: Clock;
  readonly runtime: Runtime;
  readonly log: AgentLog;

  constructor(private readonly base: NodeClock, rt: MemoryRuntime, readonly incarnation: number, write: (line: string) => void) {
    this.clock = this.clockView(base);
    this.runtime = this.runtimeView(rt);
    this.log = {
      debug: () => {},
      info: (m) => { if (!this.dead) write(m); },
      warn: (m) => { if (!this.dead) write(`WARN ${m}`); },
      error: (m) => { if (!this.dead) write(`ERROR ${m}`); },
    };
  }

  get alive(): boolean {
    return !this.dead;
  }

  kill(): void {
    this.dead = true;
    for (const u of this.unsubscribes) u();
    this.unsubscribes.clear();
  }

  /** `p`, answered only while this incarnation lives: after kill() it never settles. */
  guard<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      p.then((v) => this.base.run(() => { if (!this.dead) resolve(v); }), (err: unknown) => this.base.run(() => { if (!this.dead) reject(err); }));
    });
  }

  private clockView(base: NodeClock): Clock {
    return {
      now: () => base.now(),
      wallNow: () => base.wallNow(),
      setTimer: (ms: number, fn: () => void): Timer => base.setTimer(ms, () => { if (!this.dead) fn(); }),
    };
  }

  private runtimeView(rt: MemoryRuntime): Runtime {
    const g = <T>(p: Promise<T>): Promise<T> => this.guard(p);
    return {
      kind: rt.kind,
      ping: () => g(rt.ping()),
      list: (labels: Labels): Promise<ContainerInfo[]> => g(rt.list(labels)),
      ensureImage: (image: string, timeoutMs: number) => g(rt.ensureImage(image, timeoutMs)),
      imagePresent: (image: string) => g(rt.imagePresent(image)),
      listImages: () => g(rt.listImages()),
      removeImage: (ref: string) => g(rt.removeImage(ref)),
      logs: (id: string, opts: LogOptions) => g(rt.logs(id, opts)),
      create: (spec: ContainerSpec) => g(rt.create(spec)),
      start: (id: string) => g(rt.start(id)),
      stop: (id: string, opts: { signal: string; graceMs: number }) => g(rt.stop(id, opts)),
      kill: (id: string, signal: string) => g(rt.kill(id, signal)),
      remove: (id: string) => g(rt.remove(id)),
      inspect: (id: string) => g(rt.inspect(id)),
      events: (labels: Labels, onEvent: (e: RuntimeEvent) => void, onError: (err: RuntimeError) => void) => {
        const off = rt.events(labels, (e) => this.base.run(() => { if (!this.dead) onEvent(e); }), (err) => this.base.run(() => { if (!this.dead) onError(err); }));
        const unsubscribe = (): void => {
          this.unsubscribes.delete(unsubscribe);
          off();
        };
        this.unsubscribes.add(unsubscribe);
        return unsubscribe;
      },
      // The runtime outlives the incarnation: closing the view leaves the daemon alone.
      close: () => Promise.resolve(),
    };
  }
}
