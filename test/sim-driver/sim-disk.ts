// A simulated disk behind the driver's NodeStorage port, modelled on DiskStorage
// (src/storage/disk-storage.ts): one write queue; a save appends one write-ahead-log record and
// syncs it when asked; createSnapshot checks its index in the queue, writes the file outside it,
// then queues a synced record that points at it; compact waits for snapshots being created and
// appends an unsynced record. The log the core reads (`log`) changes only when a write completes,
// after a delay the seed draws, so the driver's writes overlap its sends and applies as they do
// on a real disk.
//
// A crash keeps every record up to the last completed sync plus a prefix of the later ones
// (written, maybe not synced: the kernel may have flushed some), and fails every write pending or
// to come. A restart replays what was kept on top of the bootstrap image.

import { MemoryStorage } from '../../src/raft/storage.ts';
import type { ConfState, Snapshot } from '../../src/raft/types.ts';
import type { NodeStorage, PersistBatch } from '../../src/node/node-storage.ts';
import type { SeededPrng } from '../../src/raft/prng.ts';
import { cloneStorage } from '../sim/storage-clone.ts';

export type WalRecord =
  | { kind: 'save'; batch: PersistBatch }
  | { kind: 'snapshot'; index: number; confState: ConfState; data: Uint8Array }
  | { kind: 'compact'; index: number };

/** How long each write takes, in virtual ms (the nemesis changes it). */
export interface DiskSpeed {
  /** Uniform in [0, writeMs) for an ordinary write. */
  writeMs: number;
  /** Probability that a write takes slowMs instead (a slow fsync, a stall). */
  slowRate: number;
  slowMs: number;
}

export const normalDisk: DiskSpeed = { writeMs: 3, slowRate: 0.02, slowMs: 40 };

export class DiskCrashed extends Error {
  constructor(id: string) {
    super(`simulated crash: the disk of ${id} is gone`);
    this.name = 'DiskCrashed';
  }
}

export class SimDisk implements NodeStorage {
  readonly log: MemoryStorage;
  /** Records since the bootstrap image, in write order; those below `synced` survive any crash. */
  private readonly wal: WalRecord[];
  private synced: number;
  private tail: Promise<unknown> = Promise.resolve();
  private snapshotsCreating = new Set<Promise<void>>();
  private crashed = false;
  speed: DiskSpeed = normalDisk;
  /** Saves called and not yet completed (the simulator counts what the driver does meanwhile). */
  savesPending = 0;

  constructor(private readonly id: string, private readonly base: MemoryStorage, kept: WalRecord[], private readonly prng: SeededPrng) {
    this.log = cloneStorage(base);
    for (const r of kept) replay(this.log, r);
    this.wal = [...kept];
    this.synced = kept.length;
  }

  /**
   * The records a crash now leaves on the disk; this disk fails every write from here on. A
   * `lying` disk (the checkers' own test) may lose synced records too.
   */
  crash(lying = false): WalRecord[] {
    this.crashed = true;
    // A lying disk acknowledged syncs without making them durable: it keeps any prefix.
    const keep = lying ? this.prng.nextInt(this.synced + 1) : this.synced + this.prng.nextInt(this.wal.length - this.synced + 1);
    return this.wal.slice(0, keep);
  }

  /** A clean stop: every record written stays (the process exited; the kernel flushes). */
  closeClean(): WalRecord[] {
    this.crashed = true;
    return [...this.wal];
  }

  /** A new life of this disk after a crash that kept `kept`. */
  reopen(kept: WalRecord[], prng: SeededPrng): SimDisk {
    return new SimDisk(this.id, this.base, kept, prng);
  }

  save(batch: PersistBatch, opts: { sync: boolean }): Promise<void> {
    this.savesPending++;
    return this.enqueue(async () => {
      const rec: WalRecord = { kind: 'save', batch: { ...batch, entries: [...batch.entries] } };
      await this.write(rec, opts.sync);
      replay(this.log, rec);
    }).finally(() => { this.savesPending--; });
  }

  async createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<void> {
    const creating = this.createSnapshotOutOfLine(index, confState, data);
    const settled = creating.then(() => undefined, () => undefined);
    this.snapshotsCreating.add(settled);
    try {
      await creating;
    } finally {
      this.snapshotsCreating.delete(settled);
    }
  }

  private async createSnapshotOutOfLine(index: number, confState: ConfState, data: Uint8Array): Promise<void> {
    const fresh = await this.enqueue(async () => {
      if (index <= this.log.snapshot().meta.index) return false;
      if (index > this.log.lastIndex()) throw new Error(`createSnapshot ${index} beyond last index ${this.log.lastIndex()}`);
      return true;
    });
    if (!fresh) return;
    await this.sleep(this.drawMs()); // the file, written and synced outside the queue
    await this.enqueue(async () => {
      if (index <= this.log.snapshot().meta.index) return;
      const rec: WalRecord = { kind: 'snapshot', index, confState, data };
      await this.write(rec, true);
      replay(this.log, rec);
    });
  }

  async compact(index: number): Promise<void> {
    if (this.snapshotsCreating.size > 0) await Promise.all([...this.snapshotsCreating]);
    await this.enqueue(async () => {
      if (index <= this.log.firstIndex() - 1) return;
      const snapIndex = this.log.snapshot().meta.index;
      if (index > snapIndex) throw new Error(`compact ${index} past the snapshot at ${snapIndex}`);
      const rec: WalRecord = { kind: 'compact', index };
      await this.write(rec, false);
      replay(this.log, rec);
    });
  }

  async close(): Promise<void> {}

  /** Appends the record (a crash from here may keep it), waits the drawn time, syncs if asked. */
  private async write(rec: WalRecord, sync: boolean): Promise<void> {
    this.wal.push(rec);
    const at = this.wal.length;
    await this.sleep(this.drawMs());
    if (sync) this.synced = Math.max(this.synced, at);
  }

  private drawMs(): number {
    return this.prng.chance(this.speed.slowRate) ? this.speed.slowMs : this.prng.nextInt(this.speed.writeMs + 1);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve, reject) => setTimeout(() => (this.crashed ? reject(new DiskCrashed(this.id)) : resolve()), ms));
  }

  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      if (this.crashed) throw new DiskCrashed(this.id);
      return fn();
    };
    const p = this.tail.then(run, run);
    this.tail = p.catch(() => undefined);
    return p;
  }
}

/** Applies one record to a log, as a completed write or a replay after a restart. */
function replay(log: MemoryStorage, r: WalRecord): void {
  if (r.kind === 'save') {
    if (r.batch.snapshot !== undefined) log.applySnapshot(r.batch.snapshot as Snapshot);
    log.append(r.batch.entries);
    if (r.batch.hardState !== undefined) log.setHardState(r.batch.hardState);
  } else if (r.kind === 'snapshot') {
    log.createSnapshot(r.index, r.confState, r.data);
  } else {
    log.compact(r.index);
  }
}
