// A node's disk. Writes land in `live` (what the running node reads) at once; they become durable
// only when synced. A synced write also makes every earlier write durable, like an fsync of a
// write-ahead log. A crash keeps the durable image plus some prefix of the unsynced writes after
// it, in order, and the next life starts on a copy of that.

import type { ConfState, Entry, HardState, Snapshot } from '../../src/raft/types.ts';
import { MemoryStorage } from '../../src/raft/storage.ts';
import type { SeededPrng } from '../../src/raft/prng.ts';
import { cloneStorage } from './storage-clone.ts';

/** The state machine saved on its own (its applied index survives a crash). */
export interface Checkpoint {
  index: number;
  data: Uint8Array;
}

export interface WriteBatch {
  snapshot?: Snapshot | undefined;
  entries?: Entry[];
  hardState?: HardState | undefined;
  /** Record a snapshot of the state machine (driver-side compaction). */
  createSnapshot?: { index: number; confState: ConfState; data: Uint8Array };
  /** Discard the log up to this index. */
  compact?: number;
  checkpoint?: Checkpoint;
}

export class SimDisk {
  live = new MemoryStorage();
  liveCheckpoint: Checkpoint | null = null;
  private readonly durable = new MemoryStorage();
  private durableCheckpoint: Checkpoint | null = null;
  private unsynced: WriteBatch[] = [];

  /** Writes the same initial contents to the live and durable images. */
  format(init: (s: MemoryStorage) => void): void {
    init(this.live);
    init(this.durable);
  }

  write(batch: WriteBatch, sync: boolean): void {
    this.liveCheckpoint = applyBatch(this.live, batch, this.liveCheckpoint);
    if (!sync) {
      this.unsynced.push(batch);
      return;
    }
    for (const b of this.unsynced) this.durableCheckpoint = applyBatch(this.durable, b, this.durableCheckpoint);
    this.durableCheckpoint = applyBatch(this.durable, batch, this.durableCheckpoint);
    this.unsynced = [];
  }

  /** The commit index a crash now would come back with, at the least. */
  durableCommit(): number {
    return this.durable.hardStateNow().commit;
  }

  /** Unsynced writes pending; what a crash now could lose. */
  unsyncedWrites(): number {
    return this.unsynced.length;
  }

  /** Loses a random suffix of the unsynced writes and returns how many were lost. */
  crash(prng: SeededPrng): number {
    const kept = prng.nextInt(this.unsynced.length + 1);
    for (const b of this.unsynced.slice(0, kept)) this.durableCheckpoint = applyBatch(this.durable, b, this.durableCheckpoint);
    const lost = this.unsynced.length - kept;
    this.unsynced = [];
    this.live = cloneStorage(this.durable);
    this.liveCheckpoint = this.durableCheckpoint;
    return lost;
  }
}

function applyBatch(s: MemoryStorage, b: WriteBatch, checkpoint: Checkpoint | null): Checkpoint | null {
  if (b.snapshot !== undefined) s.applySnapshot(b.snapshot);
  if (b.entries !== undefined && b.entries.length > 0) s.append(b.entries);
  if (b.hardState !== undefined) s.setHardState(b.hardState);
  if (b.createSnapshot !== undefined) s.createSnapshot(b.createSnapshot.index, b.createSnapshot.confState, b.createSnapshot.data);
  if (b.compact !== undefined) s.compact(b.compact);
  return b.checkpoint ?? checkpoint;
}
