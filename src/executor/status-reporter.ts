// Batched, rate-limited writes of the agent's task reports. Reports are coalesced per task (the
// newest wins, a report equal to the last one written is not written again), written at most
// once per `intervalMinMs`, at most `batchMax` per write, and retried with backoff when the
// write fails (no leader, a timeout). A write refused because the node's epoch was raised
// (`stale_epoch`) is dropped, with every report of that epoch: the leader has declared the node
// down and replaced those tasks, and the agent will see the new epoch in its store.

import type { TaskStatus } from '../resources/records.ts';
import { backoffDelayMs } from '../base/backoff.ts';
import type { Clock, Timer } from './clock.ts';
import { sameStatus } from './task-report.ts';

export interface StatusWriter {
  /** One transaction that compares the node record's epoch; may reject (see isStaleEpoch). */
  reportTaskStatus(statuses: TaskStatus[]): Promise<void>;
}

/** The writer's refusal because the node's epoch was raised: `err.code === 'stale_epoch'`. */
export function isStaleEpoch(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'stale_epoch';
}

export interface StatusReporterLimits {
  /** At most one write per this many ms. */
  intervalMinMs: number;
  /** Reports per write. */
  batchMax: number;
  /** The backoff after a failed write: from min, doubled per failure, at most max. */
  backoffMinMs: number;
  backoffMaxMs: number;
}

export const statusReporterDefaults: StatusReporterLimits = { intervalMinMs: 200, batchMax: 100, backoffMinMs: 200, backoffMaxMs: 5_000 };

export interface StatusReporterOptions {
  writer: StatusWriter;
  clock: Clock;
  log: { info(msg: string): void; warn(msg: string): void };
  limits?: Partial<StatusReporterLimits>;
  /** Told of the reports the writer accepted. */
  onWritten?: (statuses: TaskStatus[]) => void;
}

export class StatusReporter {
  private readonly limits: StatusReporterLimits;
  /** Waiting to be written, by task id, in the order first submitted. */
  private readonly pending = new Map<string, TaskStatus>();
  /** Being written now. */
  private inFlight = new Map<string, TaskStatus>();
  /** The last report written per task (kept for the tasks the agent still has; see retain). */
  private readonly written = new Map<string, TaskStatus>();
  private timer: Timer | null = null;
  private nextAllowedMs = -Infinity;
  private failures = 0;
  private closed = false;
  private flushing: Promise<void> | null = null;

  constructor(private readonly opts: StatusReporterOptions) {
    this.limits = { ...statusReporterDefaults, ...opts.limits };
  }

  /** Queues a report unless it says nothing new. */
  submit(s: TaskStatus): void {
    if (this.closed) return;
    const last = this.pending.get(s.taskId) ?? this.inFlight.get(s.taskId) ?? this.written.get(s.taskId);
    if (last !== undefined && sameStatus(last, s)) return;
    this.pending.delete(s.taskId);
    this.pending.set(s.taskId, s);
    this.schedule();
  }

  /** Forgets what was written for tasks not in `taskIds` (tasks the node no longer has). */
  retain(taskIds: ReadonlySet<string>): void {
    for (const id of this.written.keys()) if (!taskIds.has(id)) this.written.delete(id);
  }

  /** The newest report of each task this reporter holds: pending, being written, or written. */
  latest(): Map<string, TaskStatus> {
    const m = new Map(this.written);
    for (const [id, s] of this.inFlight) m.set(id, s);
    for (const [id, s] of this.pending) m.set(id, s);
    return m;
  }

  pendingCount(): number {
    return this.pending.size + this.inFlight.size;
  }

  /** Stops writing; waits for a write in flight. Reports still pending are dropped (the next agent reports again). Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    this.timer = null;
    if (this.flushing !== null) await this.flushing;
  }

  private schedule(): void {
    if (this.closed || this.timer !== null || this.flushing !== null || this.pending.size === 0) return;
    this.timer = this.opts.clock.setTimer(Math.max(0, this.nextAllowedMs - this.opts.clock.now()), () => {
      this.timer = null;
      this.flushing = this.flush().finally(() => {
        this.flushing = null;
        this.schedule();
      });
    });
  }

  private takeBatch(): TaskStatus[] {
    // One epoch per write: the writer compares it with the node record's in one transaction.
    let epoch = Infinity;
    for (const s of this.pending.values()) epoch = Math.min(epoch, s.nodeEpoch);
    const batch: TaskStatus[] = [];
    for (const s of this.pending.values()) {
      if (batch.length >= this.limits.batchMax) break;
      if (s.nodeEpoch === epoch) batch.push(s);
    }
    for (const s of batch) {
      this.pending.delete(s.taskId);
      this.inFlight.set(s.taskId, s);
    }
    return batch;
  }

  private async flush(): Promise<void> {
    const batch = this.takeBatch();
    if (batch.length === 0) return;
    const now = this.opts.clock.now();
    try {
      await this.opts.writer.reportTaskStatus(batch);
      this.failures = 0;
      this.nextAllowedMs = now + this.limits.intervalMinMs;
      for (const s of batch) this.written.set(s.taskId, s);
      this.opts.onWritten?.(batch);
    } catch (err) {
      this.handleFailure(batch, err, now);
    } finally {
      this.inFlight = new Map();
    }
  }

  private handleFailure(batch: TaskStatus[], err: unknown, now: number): void {
    const epoch = batch[0]?.nodeEpoch ?? 0;
    if (isStaleEpoch(err)) {
      let dropped = batch.length;
      for (const [id, s] of this.pending) {
        if (s.nodeEpoch <= epoch) {
          this.pending.delete(id);
          dropped++;
        }
      }
      this.nextAllowedMs = now + this.limits.intervalMinMs;
      this.opts.log.info(`agent: ${dropped} task reports of epoch ${epoch} dropped: the node's epoch was raised`);
      return;
    }
    this.failures++;
    this.nextAllowedMs = now + backoffDelayMs(this.failures, this.limits.backoffMinMs, this.limits.backoffMaxMs);
    // A newer report submitted while this one was in flight wins.
    for (const s of batch) if (!this.pending.has(s.taskId)) this.pending.set(s.taskId, s);
    if (this.failures === 1) this.opts.log.warn(`agent: writing ${batch.length} task reports failed (${errorText(err)}); retrying with backoff`);
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
