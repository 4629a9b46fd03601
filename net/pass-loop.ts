// The level-triggered loop the node's network agents share (mesh-agent.ts, overlay-agent.ts, firewall-loop.ts): a
// store change, a resync timer or a retry only marks the loop dirty; one pass at a time re-reads
// everything and converges, and a change during a pass runs one more. A failed pass is logged
// once per distinct problem and tried again after `retryMs` (doubling up to `retryMsMax`).

import { backoffDelayMs } from '../src/base/backoff.ts';

export interface PassLoopOptions {
  /** Names the agent in its log lines ("mesh", "overlay", "firewall"). */
  name: string;
  pass: () => Promise<void>;
  /** The wait before trying again after a failed pass or a held-back one. */
  retryMs: number;
  /** Failed passes in a row double the wait up to this (src/base/backoff.ts); default retryMs, a fixed wait. */
  retryMsMax?: number;
  /** A mark waits this long before its pass, so that a burst of changes is converged once; default 0. */
  coalesceMs?: number;
  log: { warn(msg: string): void };
}

export class PassLoop {
  private dirty = false;
  private running: Promise<void> | null = null;
  private closedFlag = false;
  private retry: NodeJS.Timeout | undefined;
  private coalescing: NodeJS.Timeout | undefined;
  private lastProblem = '';
  private failures = 0;

  constructor(private readonly o: PassLoopOptions) {}

  get closed(): boolean {
    return this.closedFlag;
  }

  /**
   * Asks for a pass: after `coalesceMs` (at once with `now`) if none runs, else right after the
   * one running.
   */
  mark(now = false): void {
    if (this.closedFlag) return;
    const delayMs = now ? 0 : this.o.coalesceMs ?? 0;
    if (delayMs === 0 || this.running !== null) {
      this.markDirty();
      return;
    }
    if (this.coalescing !== undefined) return;
    this.coalescing = setTimeout(() => {
      this.coalescing = undefined;
      this.markDirty();
    }, delayMs);
    this.coalescing.unref();
  }

  /** Asks for another pass in `retryMs`: something was held back (no quorum, a busy resource). */
  retryLater(ms = this.o.retryMs): void {
    clearTimeout(this.retry);
    this.retry = setTimeout(() => this.mark(true), ms);
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
    clearTimeout(this.coalescing);
    await this.running;
  }

  private markDirty(): void {
    this.dirty = true;
    if (this.running !== null) return;
    this.running = (async () => {
      while (this.dirty && !this.closedFlag) {
        this.dirty = false;
        await this.o.pass().then(() => this.succeeded(), (err: unknown) => this.failed(err));
      }
    })().finally(() => { this.running = null; });
  }

  private succeeded(): void {
    this.lastProblem = '';
    this.failures = 0;
  }

  private failed(err: unknown): void {
    this.failures++;
    const ms = backoffDelayMs(this.failures, this.o.retryMs, this.o.retryMsMax ?? this.o.retryMs);
    const msg = err instanceof Error ? err.message : String(err);
    if (msg !== this.lastProblem) this.o.log.warn(`${this.o.name}: ${msg}; retrying in ${ms} ms`);
    this.lastProblem = msg;
    this.retryLater(ms);
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
