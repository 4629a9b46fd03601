// A durable write that does not complete within diskStallMs marks the node's disk stalled: the
// node refuses requests (disk_stalled) until the write completes, and its pending proposals and
// reads fail at once rather than at their timeout. docs/architecture.md, "A stalled disk".

import { ShoalError } from '../errors.ts';
import type { Logger } from '../log.ts';

/** What the watch needs of the driver. */
export interface DiskStallHost {
  /** Whether the node is running (a stall noticed while stopping changes nothing). */
  running(): boolean;
  isLeader(): boolean;
  /** The disk stalled: every request pending on the node fails with `err`. */
  stalled(err: ShoalError): void;
}

export class DiskStallWatch {
  /** Since when the durable write in progress has been running past stallMs, if it has. */
  private stalledSince: number | undefined;

  constructor(
    /** diskStallMs; 0 disables the check. */
    private readonly stallMs: number,
    private readonly host: DiskStallHost,
    private readonly log: Logger,
  ) {}

  get stalled(): boolean {
    return this.stalledSince !== undefined;
  }

  /** The error requests get while the disk is stalled; undefined while it is not. */
  error(): ShoalError | undefined {
    if (this.stalledSince === undefined) return undefined;
    const s = ((performance.now() - this.stalledSince) / 1000 + this.stallMs / 1000).toFixed(1);
    return new ShoalError('disk_stalled', `this node's disk has not completed a write for ${s} s; it takes no requests until the disk recovers (check the disk, dmesg, and free space)`, { stalledForSeconds: Number(s) });
  }

  /**
   * Awaits a durable write, marking the disk stalled when it takes longer than stallMs. The
   * write is still awaited: nothing after it may run before it is durable. A leader sends no
   * heartbeat meanwhile (they leave from the Ready loop), so the followers elect another leader
   * after an election timeout, which hashicorp/raft's separate heartbeat goroutine did not (its
   * issue 503).
   */
  async watch(writing: Promise<void>): Promise<void> {
    const stallMs = this.stallMs;
    if (stallMs <= 0) return writing;
    const timer = setTimeout(() => this.onStall(), stallMs);
    try {
      await writing;
    } finally {
      clearTimeout(timer);
      if (this.stalledSince !== undefined) {
        this.log.warn(`the disk completed the stalled write after ${((performance.now() - this.stalledSince) / 1000 + stallMs / 1000).toFixed(1)} s; serving again`);
        this.stalledSince = undefined;
      }
    }
  }

  /** Pending requests fail: their outcome is unknown (an append may have reached a follower). */
  private onStall(): void {
    if (!this.host.running()) return;
    this.stalledSince = performance.now();
    const err = this.error() ?? new ShoalError('disk_stalled', 'the disk stalled');
    this.log.error(`the disk has not completed a write for ${this.stallMs} ms: refusing requests until it does${this.host.isLeader() ? '; as leader, no heartbeat leaves until then, so the followers will elect another leader' : ''}`);
    this.host.stalled(new ShoalError('disk_stalled', `${err.message}; the outcome of this request is unknown: retry on another node (with the same Idempotency-Key for a write)`));
  }
}
