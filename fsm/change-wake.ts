// Wakes an agent when the store changes in the collections it follows, instead of a poll
// (issue 45: an idle node wakes only for work). The store calls its listeners synchronously while
// it applies an entry; the agent's pass runs after that, on a microtask, once for all the changes
// of one turn, and once more after a pass if a change came while it ran (nothing is missed). A
// slow sweep (`sweepMs`) stays for what no change announces (a file on disk, a key unlocked, a
// member's address book), and `retryIn` for a failed step.

import type { DocumentStore } from './store.ts';

export interface ChangeWakeOptions {
  store: DocumentStore;
  /** The collections whose changes (and any restore) call `run`. */
  collections: readonly string[];
  /** One pass of the agent; it may be async (a pass is never run twice at once by this wake). */
  run: () => unknown;
  /** A pass this often whatever changed (ms): the agent's inputs that no event announces. */
  sweepMs: number;
}

export class ChangeWake {
  private sweep: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private retryDue = Number.POSITIVE_INFINITY;
  private queued = false;
  private running = false;
  private again = false;
  private closed = false;
  private readonly off: Array<() => void> = [];
  /** Passes run (tests). */
  passes = 0;

  constructor(private readonly o: ChangeWakeOptions) {}

  start(): void {
    const wanted = new Set(this.o.collections);
    this.off.push(
      this.o.store.subscribe((ev) => { if (wanted.has(ev.collection)) this.kick(); }),
      this.o.store.subscribeRestore(() => this.kick()),
    );
    this.sweep = setInterval(() => this.kick(), this.o.sweepMs);
    this.sweep.unref();
    this.kick();
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweep);
    clearTimeout(this.retry);
    for (const off of this.off.splice(0)) off();
  }

  /** A pass soon (on a microtask): after this one if one is running. Bound: a listener as it is. */
  readonly kick = (): void => {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.queued) return;
    this.queued = true;
    void Promise.resolve().then(() => {
      this.queued = false;
      return this.runPasses();
    });
  };

  /** A pass in `ms` (a failed step tried again); the sooner of two requests wins. */
  retryIn(ms: number): void {
    if (this.closed) return;
    const due = Date.now() + ms;
    if (due >= this.retryDue) return;
    clearTimeout(this.retry);
    this.retryDue = due;
    this.retry = setTimeout(() => {
      this.retryDue = Number.POSITIVE_INFINITY;
      this.kick();
    }, ms);
    this.retry.unref();
  }

  private async runPasses(): Promise<void> {
    if (this.closed || this.running) return;
    this.running = true;
    try {
      do {
        this.again = false;
        this.passes++;
        try {
          await this.o.run();
        } catch {
          // The agent logs its own failures; a throw must not stop the wake.
        }
      } while (this.again && !this.closed);
    } finally {
      this.running = false;
    }
  }
}
