// The level-triggered loop the node's network agents share (mesh-agent.ts, overlay-agent.ts): a
// store change, a resync timer or a retry only marks the loop dirty; one pass at a time re-reads
// everything and converges, and a change during a pass runs one more. A failed pass is logged
// once per distinct problem and tried again after `retryMs`.

export interface PassLoopOptions {
  /** Names the agent in its log lines ("mesh", "overlay"). */
  name: string;
  pass: () => Promise<void>;
  retryMs: number;
  log: { warn(msg: string): void };
}

export class PassLoop {
  private dirty = false;
  private running: Promise<void> | null = null;
  private closedFlag = false;
  private retry: NodeJS.Timeout | undefined;
  private lastProblem = '';

  constructor(private readonly o: PassLoopOptions) {}

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Asks for a pass: now if none runs, else right after the one running. */
  mark(): void {
    if (this.closedFlag) return;
    this.dirty = true;
    if (this.running !== null) return;
    this.running = (async () => {
      while (this.dirty && !this.closedFlag) {
        this.dirty = false;
        await this.o.pass().then(() => { this.lastProblem = ''; }, (err: unknown) => this.failed(err));
      }
    })().finally(() => { this.running = null; });
  }

  /** Asks for another pass in `retryMs`: something was held back (no quorum, a busy resource). */
  retryLater(): void {
    clearTimeout(this.retry);
    this.retry = setTimeout(() => this.mark(), this.o.retryMs);
    this.retry.unref();
  }

  /** Waits until no pass runs (tests). */
  async idle(): Promise<void> {
    while (this.running !== null) await this.running;
  }

  /** No pass starts any more; resolves once the running one has ended. Idempotent. */
  async close(): Promise<void> {
    this.closedFlag = true;
    clearTimeout(this.retry);
    await this.running;
  }

  private failed(err: unknown): void {
    const msg = err instanceof Error ? err.message : String(err);
    if (msg !== this.lastProblem) this.o.log.warn(`${this.o.name}: ${msg}; retrying every ${this.o.retryMs} ms`);
    this.lastProblem = msg;
    this.retryLater();
  }
}

/**
 * A read barrier for one pass (this node has applied what the leader had committed), given up
 * after `timeoutMs`: true when taken, false without one (no quorum), never throws.
 */
export async function readBarrierWithin(caughtUp: () => Promise<void>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('timeout')), timeoutMs); });
  try {
    await Promise.race([caughtUp(), timeout]);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
