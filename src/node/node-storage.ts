// The storage port of the node: the log the core reads, plus the writes the driver makes.
// DiskStorage (src/storage/) implements it durably; MemoryNodeStorage is the in-memory seam.

import { MemoryStorage, type LogStorage } from '../raft/storage.ts';
import type { ConfState, Entry, HardState, Snapshot } from '../raft/types.ts';

export interface PersistBatch {
  hardState?: HardState;
  entries: Entry[];
  snapshot?: Snapshot;
}

export interface NodeStorage {
  /** What the consensus core reads; always equal to what is durable. */
  readonly log: LogStorage;
  /** Persists one Ready's worth of state as one atomic write; synced when `sync`. */
  save(batch: PersistBatch, opts: { sync: boolean }): Promise<void>;
  /** Records a snapshot of the applied state at `index`. */
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<void>;
  /** Drops log entries up to and including `index` (at most the snapshot's index). */
  compact(index: number): Promise<void>;
  /**
   * Optional (durable storage): rewrites the log and the snapshot files without anything the
   * snapshot covers (src/storage/disk-storage.ts). The snapshot must be at `through` or later.
   */
  purge?(through: number): Promise<{ snapshot: number; segments: string[]; snapshots: string[] }>;
  close(): Promise<void>;
}

export class MemoryNodeStorage implements NodeStorage {
  readonly log: MemoryStorage;

  constructor(log = new MemoryStorage()) {
    this.log = log;
  }

  async save(batch: PersistBatch): Promise<void> {
    if (batch.snapshot) this.log.applySnapshot(batch.snapshot);
    this.log.append(batch.entries);
    if (batch.hardState) this.log.setHardState(batch.hardState);
  }

  async createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<void> {
    this.log.createSnapshot(index, confState, data);
  }

  async compact(index: number): Promise<void> {
    this.log.compact(index);
  }

  async close(): Promise<void> {}
}
