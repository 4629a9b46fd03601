// The storage seam of the drills' disk stall: a NodeStorage that passes everything to the real one,
// except that while a stall is on, every write first waits until it ends, as on a disk whose
// writes hang. The node's own stall detection (RaftNode diskStallMs) then sees what it would see
// on a dying disk: it refuses requests, and a leader sends no heartbeat, so the others elect.

import type { ConfState } from '../../raft/types.ts';
import type { NodeStorage, PersistBatch } from '../node-storage.ts';

export class DrillStorage implements NodeStorage {
  private stalledUntilMs = 0;

  constructor(private readonly inner: NodeStorage) {}

  get log(): NodeStorage['log'] {
    return this.inner.log;
  }

  /** Every write from now waits until `ms` from now (a later stall extends it). */
  stall(ms: number): void {
    this.stalledUntilMs = Math.max(this.stalledUntilMs, Date.now() + ms);
  }

  async save(batch: PersistBatch, opts: { sync: boolean }): Promise<void> {
    await this.waitStall();
    return this.inner.save(batch, opts);
  }

  async createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<void> {
    await this.waitStall();
    return this.inner.createSnapshot(index, confState, data);
  }

  async compact(index: number): Promise<void> {
    await this.waitStall();
    return this.inner.compact(index);
  }

  async purge(through: number): Promise<{ snapshot: number; segments: string[]; snapshots: string[] }> {
    await this.waitStall();
    if (this.inner.purge === undefined) return { snapshot: through, segments: [], snapshots: [] };
    return this.inner.purge(through);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async waitStall(): Promise<void> {
    // Loop: a stall extended while waiting is waited for too.
    for (let left = this.stalledUntilMs - Date.now(); left > 0; left = this.stalledUntilMs - Date.now()) {
      await new Promise((r) => setTimeout(r, left));
    }
  }
}
