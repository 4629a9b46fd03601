// The durable log of a node. The core reads a MemoryStorage cache (its reads never wait on
// disk); every write goes to disk first and reaches the cache only once it is durable, so the
// cache always equals what a restart would load.
//
// On disk, under the data directory:
//   wal/          the write-ahead log: entries, hard state, snapshot record, compaction point
//   storage.keys  the key file: node metadata, the storage format and the log's id (key-file.ts)
//   snapshots/    snap-<index>.snap files, the newest two kept
//   log.id        the log's id again, to tell a wiped or swapped log (log-incarnation.ts)
//   storage.lock  while open: the process that has it open (dir-lock.ts)
//   log/          the LevelDB directory of a release up to 0.1.x, its keys copied into
//                 storage.keys; kept for a rollback until a key changes (migrate.ts), then:
//   log.moved/    the same, renamed aside

import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { assert } from '../base/assert.ts';
import { MemoryStorage, SnapshotUnavailableError, type InitialState, type LogStorage } from '../raft/storage.ts';
import type { ConfState, Entry, HardState, Logger, Snapshot } from '../raft/types.ts';
import { StorageCorruptionError, rebuildNodeRecovery } from './errors.ts';
import { metaKey } from './keys.ts';
import { lockDataDir, type DirLock } from './dir-lock.ts';
import { KeyFile } from './key-file.ts';
import { checkLogIncarnation } from './log-incarnation.ts';
import { appendBounds, type LogBounds } from './log-bounds.ts';
import { hasLevelDir, initWal, moveLevelDir, stampFormat3 } from './migrate.ts';
import { storagePaths, type StoragePaths } from './paths.ts';
import { checkLog, readFormat, readRecord, tidyAndBuild } from './recover.ts';
import type { SafeParser, SnapshotRecord } from './schemas.ts';
import { seal } from './sealed.ts';
import { SnapshotDir } from './snapshot-dir.ts';
import { WalWriter, readWal, removeTemporarySegments, type WalContents } from './wal.ts';
import type { WalRecord } from './wal-record.ts';
import type { LogState } from './wal-replay.ts';

/** One timed write, for the node's metrics. */
export interface SyncSample {
  op: 'save' | 'snapshotFile' | 'snapshotRecord' | 'compact' | 'meta';
  /** Whether the write waited for fsync. */
  sync: boolean;
  /** Bytes of keys and values put (for a snapshot file: its data). */
  bytes: number;
}

export interface DiskStorageOptions {
  logger?: Logger;
  /** Called after every durable write with its latency in milliseconds. */
  onSync?: (ms: number, sample: SyncSample) => void;
  /** Snapshot files kept on disk, newest first. Default 2 (the newest and one to fall back to). */
  snapshotsKeptMax?: number;
  /**
   * How long the current snapshot's bytes stay in memory after they were last read, created or
   * installed; then only its file holds them, and `snapshot()` reads them back on demand (it
   * throws SnapshotUnavailableError meanwhile: the core retries the send). Default 1 s; a
   * negative value keeps them (as before).
   */
  snapshotDataKeepMs?: number;
  /** A new write-ahead log segment is started once the current one reaches this size. Default 64 MiB. */
  segmentBytes?: number;
  /** How far ahead of its records the segment being written is extended with zeros. Default 4 MiB. */
  preallocateBytes?: number;
}

/** What `save` persists: the part of a Ready that must be durable before its messages are sent. */
export interface SaveRequest {
  hardState?: HardState | undefined;
  entries: readonly Entry[];
  snapshot?: Snapshot | undefined;
}

/** Node-layer metadata values are small (identity, member records). */
const metaValueBytesMax = 1024 * 1024;

const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {} };

export class DiskStorage implements LogStorage {
  // Writes run one at a time in call order: each plan is computed from the cache as the
  // previous write left it.
  private tail: Promise<void> = Promise.resolve();
  /** Writes queued or running; `tail` settles after the last of them. */
  private pending = 0;
  private failure: unknown;
  private closing: Promise<void> | undefined;
  /** Snapshots being created (each settles, never rejects), for compact and close to wait on. */
  private readonly snapshotsCreating = new Set<Promise<void>>();
  /** Indexes of snapshot files being written outside the queue: not to be pruned. */
  private readonly snapshotFilesWriting = new Set<number>();
  /** The index of the current snapshot whose bytes left memory (its file holds them), if any. */
  private snapshotReleased: number | undefined;
  /** Reading the released bytes back, while it runs. */
  private snapshotLoading: Promise<void> | undefined;
  /** Releases the current snapshot's bytes once they went unused for snapshotDataKeepMs. */
  private snapshotReleaseTimer: ReturnType<typeof setTimeout> | undefined;

  private constructor(
    private readonly keys: KeyFile,
    private readonly lock: DirLock,
    private readonly wal: WalWriter,
    readonly paths: StoragePaths,
    private readonly snapshots: SnapshotDir,
    private readonly cache: MemoryStorage,
    private readonly opts: DiskStorageOptions,
  ) {}

  /** Opens (creating if absent) the storage in `dir`, verifying everything it loads. */
  static async open(dir: string, opts: DiskStorageOptions = {}): Promise<DiskStorage> {
    const kept = opts.snapshotsKeptMax ?? 2;
    if (!Number.isInteger(kept) || kept < 1) throw new RangeError(`snapshotsKeptMax must be an integer >= 1, got ${kept}`);
    const paths = storagePaths(dir);
    const logger = opts.logger ?? silentLogger;
    await mkdir(paths.snapshots, { recursive: true });
    const lock = await lockDataDir(paths, logger);
    let wal: WalWriter | undefined;
    try {
      const snapshots = new SnapshotDir(paths.snapshots);
      const walOpts = {
        segmentBytes: opts.segmentBytes ?? 64 * 1024 * 1024,
        ...(opts.preallocateBytes !== undefined ? { preallocateBytes: opts.preallocateBytes } : {}),
      };
      const level = hasLevelDir(paths);
      if (!level && !existsSync(paths.log) && (await snapshots.list()).length > 0) {
        throw new StorageCorruptionError(paths.log, 'the key file is missing but snapshot files exist', rebuildNodeRecovery(dir));
      }
      if (level) await moveLevelDir(paths, logger, walOpts);
      const keys = await KeyFile.load(paths, logger);
      const format = readFormat(keys, paths);
      await checkLogIncarnation(keys, paths);
      // Formats 2 and 3 are read and checked before anything on disk changes; a new directory
      // gets its write-ahead log first (migrate.ts), then the same checks.
      let contents: WalContents | undefined;
      let state: LogState;
      if (format === 2 || format === 3) {
        contents = await readWal(paths);
        state = contents.state;
      } else {
        if (format === 1) {
          // Format 1 lived in LevelDB only: its move writes format 3 to the key file.
          throw new StorageCorruptionError(paths.log, 'the key file says storage format 1, which only LevelDB ever held', rebuildNodeRecovery(dir));
        }
        ({ wal, state } = await initWal(keys, paths, walOpts));
      }
      const chosen = await checkLog(state, snapshots, paths);
      if (contents !== undefined) {
        if (format === 2) await stampFormat3(keys, paths, logger);
        wal = WalWriter.openForAppend(paths.wal, contents, walOpts);
        if (contents.torn !== undefined) logger.warn(`cut an unfinished write off the end of the write-ahead log (${contents.torn}); it was never acknowledged`);
      }
      assert(wal !== undefined, 'open: the write-ahead log is open');
      return await DiskStorage.finishOpen(keys, lock, wal, paths, snapshots, state, chosen, { ...opts, logger });
    } catch (err) {
      wal?.close();
      await lock.release();
      throw err;
    }
  }

  private static async finishOpen(
    keys: KeyFile, lock: DirLock, wal: WalWriter, paths: StoragePaths, snapshots: SnapshotDir, state: LogState,
    chosen: Awaited<ReturnType<typeof checkLog>>, opts: DiskStorageOptions & { logger: Logger },
  ): Promise<DiskStorage> {
    const recordSnapshot = async (snapshot: SnapshotRecord): Promise<void> => {
      wal.append({ type: 'snapshot', snapshot });
      await wal.sync();
    };
    const cache = await tidyAndBuild(state, chosen, snapshots, opts.logger, recordSnapshot);
    const temporary = await removeTemporarySegments(paths.wal);
    if (temporary.length > 0) opts.logger.info(`removed write-ahead log segments that were never completed: ${temporary.join(', ')}`);
    opts.logger.info(`opened storage ${paths.dir}: snapshot ${cache.snapshot().meta.index}, log ${cache.firstIndex()}..${cache.lastIndex()}, ` +
      `commit ${cache.hardStateNow().commit}`);
    return new DiskStorage(keys, lock, wal, paths, snapshots, cache, opts);
  }

  // ---- LogStorage: served from the cache --------------------------------------------------

  /** The read-only view the core reads (this object; the cache itself is never handed out). */
  get log(): LogStorage {
    return this;
  }

  initialState(): InitialState {
    return this.cache.initialState();
  }

  entries(lo: number, hi: number, bytesMax: number): Entry[] {
    return this.cache.entries(lo, hi, bytesMax);
  }

  term(index: number): number {
    return this.cache.term(index);
  }

  firstIndex(): number {
    return this.cache.firstIndex();
  }

  lastIndex(): number {
    return this.cache.lastIndex();
  }

  /**
   * The snapshot to restore the state machine from at start (index 0: none), or to send to a
   * follower. Its bytes leave memory snapshotDataKeepMs (1 s) after their last use (a 100,000-document
   * store's snapshot is about 30 MB, which a node would otherwise hold for good); while they are
   * read back from the file this throws SnapshotUnavailableError, which the core answers by
   * trying again on a later append (src/raft/raft.ts, maybeSendSnapshot).
   */
  snapshot(): Snapshot {
    const snap = this.cache.snapshot();
    if (this.snapshotReleased !== snap.meta.index) {
      this.keepSnapshotData();
      return snap;
    }
    this.loadSnapshotData(snap.meta.index);
    throw new SnapshotUnavailableError();
  }

  /** Whether the current snapshot's bytes are in memory (false: only in its file). */
  get snapshotDataResident(): boolean {
    return this.snapshotReleased !== this.cache.snapshot().meta.index;
  }

  /** (Re)arms the release of the current snapshot's bytes, snapshotDataKeepMs from now. */
  private keepSnapshotData(): void {
    const keepMs = this.opts.snapshotDataKeepMs ?? 1000;
    if (keepMs < 0 || this.closing !== undefined || this.cache.snapshot().meta.index === 0) return;
    if (this.snapshotReleaseTimer !== undefined) clearTimeout(this.snapshotReleaseTimer);
    this.snapshotReleaseTimer = setTimeout(() => {
      this.snapshotReleaseTimer = undefined;
      void this.releaseSnapshotData();
    }, keepMs);
    this.snapshotReleaseTimer.unref();
  }

  /** Drops the current snapshot's bytes from memory if its file is on disk (the file is durable before the snapshot becomes current). */
  private async releaseSnapshotData(): Promise<void> {
    const index = this.cache.snapshot().meta.index;
    if (index === 0 || this.snapshotReleased === index || this.closing !== undefined) return;
    try {
      if (!(await this.snapshots.list()).includes(index)) return;
    } catch {
      return;
    }
    if (this.cache.setSnapshotData(index, new Uint8Array(0))) this.snapshotReleased = index;
  }

  /** Reads the released bytes of the snapshot at `index` back from its file, once at a time. */
  private loadSnapshotData(index: number): void {
    this.snapshotLoading ??= (async () => {
      try {
        const decoded = await this.snapshots.read(index);
        if (!decoded.ok) {
          this.opts.logger?.warn(`could not read the snapshot file of index ${index} back: ${decoded.detail}`);
          return;
        }
        if (this.snapshotReleased === index && this.cache.setSnapshotData(index, decoded.snapshot.data)) {
          this.snapshotReleased = undefined;
          this.keepSnapshotData();
        }
      } catch (err) {
        this.opts.logger?.warn(`could not read the snapshot file of index ${index} back: ${(err as Error).message}`);
      } finally {
        this.snapshotLoading = undefined;
      }
    })();
  }

  hardState(): HardState {
    return this.cache.hardStateNow();
  }

  // ---- writes -------------------------------------------------------------------------------
  // Public methods check their arguments and reject (never throw synchronously), then queue.

  /**
   * Persists a Ready as one batch: snapshot (its file first), entries (overwriting a conflicting
   * suffix), hard state. Synced unless `sync: false` (for a Ready whose mustSync is false).
   */
  async save(rd: SaveRequest, opts: { sync?: boolean } = {}): Promise<void> {
    assert(Array.isArray(rd.entries), 'save: entries is an array');
    return this.enqueue('save', () => this.saveNow(rd, opts.sync ?? true));
  }

  /**
   * Records a snapshot of the state machine at `index` (applied, so committed and in the log);
   * `snapshot()` returns it after. Ignored if not newer than the current snapshot. Does not
   * compact. Checked in call order like every write, but the file, megabytes written and synced, is
   * written outside the write queue, so that the log's writes issued meanwhile do not wait
   * behind it; only the small record that points at it is queued after them. A compaction
   * waits for the snapshots being created, since it may only discard what one covers.
   */
  async createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<void> {
    assert(Number.isSafeInteger(index) && index > 0, `createSnapshot: index ${index}`);
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
    const snap = await this.enqueue('create a snapshot', async (): Promise<Snapshot | undefined> => {
      if (index <= this.cache.snapshot().meta.index) return undefined;
      assert(index <= this.cache.lastIndex(), `createSnapshot ${index} beyond last index ${this.cache.lastIndex()}`);
      // Committed entries are never truncated, and compaction waits for us: this term holds.
      return { meta: { index, term: this.cache.term(index), confState }, data };
    });
    if (snap === undefined) return;
    this.snapshotFilesWriting.add(index);
    try {
      let file: SnapshotRecord;
      try {
        file = await this.writeSnapshotFile(snap);
      } catch (err) {
        this.failure ??= err; // as for a write in the queue: the disk is not to be trusted
        throw err;
      }
      await this.enqueue('record a snapshot', () => this.recordSnapshotNow(snap, file));
    } finally {
      this.snapshotFilesWriting.delete(index);
    }
  }

  /**
   * Discards log entries up to and including `index`, which must not pass the snapshot. Not
   * synced: a compaction lost in a crash only leaves a longer log. Write-ahead log segments
   * holding only compacted entries are deleted (after a sync, so the compaction that frees them
   * is durable first).
   */
  async compact(index: number): Promise<void> {
    assert(Number.isSafeInteger(index) && index >= 0, `compact: index ${index}`);
    if (this.snapshotsCreating.size > 0) await Promise.all([...this.snapshotsCreating]);
    return this.enqueue('compact', () => this.compactNow(index));
  }

  /**
   * Rewrites the storage without what the snapshot covers (docs/security.md, "Secrets at rest"):
   * compacts the log up to the snapshot, rewrites the write-ahead log into one new segment of the
   * entries after it and deletes every older segment, and deletes every snapshot file but the
   * snapshot's. Refused unless the snapshot is at `through` or later. Returns what was deleted.
   */
  async purge(through: number): Promise<{ snapshot: number; segments: string[]; snapshots: string[] }> {
    if (this.snapshotsCreating.size > 0) await Promise.all([...this.snapshotsCreating]);
    return this.enqueue('purge', async () => {
      const snap = this.cache.snapshot().meta.index;
      assert(snap >= through, `purge through ${through}: the snapshot is at ${snap}`);
      if (snap > this.bounds().offset) {
        await this.write({ type: 'compact', truncated: { index: snap, term: this.cache.term(snap) } }, false, 'compact');
        this.cache.compact(snap);
      }
      const segments = await this.wal.rewrite(this.cache.entries(this.cache.firstIndex(), this.cache.lastIndex() + 1, Number.MAX_SAFE_INTEGER));
      const snapshots = await this.snapshots.removeAllBut(snap);
      return { snapshot: snap, segments, snapshots };
    });
  }

  /** Reads node-layer metadata; `schema` (zod or alike) checks what comes back from disk. */
  async getMeta<T>(key: string, schema?: SafeParser<T>): Promise<T | undefined> {
    const k = metaKey(key);
    this.checkOpen('read metadata');
    await this.tail; // read your own queued writes
    const anything: SafeParser<unknown> = { safeParse: (v) => ({ success: true, data: v }) };
    return readRecord(this.keys, k, schema ?? anything, this.paths) as T | undefined;
  }

  /** Writes node-layer metadata durably (msgpack; keep values small). */
  async putMeta(key: string, value: unknown): Promise<void> {
    const k = metaKey(key);
    const v = seal(value);
    if (v.length > metaValueBytesMax) throw new RangeError(`meta value for '${key}' is ${v.length} bytes, over ${metaValueBytesMax}`);
    return this.enqueue('write metadata', async () => {
      const started = performance.now();
      await this.keys.put([[k, v]]);
      this.opts.onSync?.(performance.now() - started, { op: 'meta', sync: true, bytes: k.length + v.length });
    });
  }

  /** Waits for queued writes, then closes the write-ahead log and releases the lock. Idempotent. */
  close(): Promise<void> {
    if (this.snapshotReleaseTimer !== undefined) clearTimeout(this.snapshotReleaseTimer);
    this.snapshotReleaseTimer = undefined;
    this.closing ??= Promise.all([...this.snapshotsCreating]).then(() => this.tail).then(() => {
      this.wal.close();
      return this.lock.release();
    });
    return this.closing;
  }

  // ---- implementation -----------------------------------------------------------------------

  private async saveNow(rd: SaveRequest, sync: boolean): Promise<void> {
    let bounds = this.bounds();
    // An older snapshot than ours is ignored, as MemoryStorage.applySnapshot ignores it.
    const snap = rd.snapshot !== undefined && rd.snapshot.meta.index > this.cache.snapshot().meta.index ? rd.snapshot : undefined;
    let install: SnapshotRecord | undefined;
    if (snap !== undefined) {
      install = await this.writeSnapshotFile(snap);
      // Installing replaces the whole log: the core installs a snapshot only when its log does
      // not match at the snapshot's index, so nothing after it can be kept either.
      bounds = { offset: snap.meta.index, last: snap.meta.index };
    }
    bounds = appendBounds(bounds, rd.entries);
    if (rd.hardState !== undefined) {
      assert(rd.hardState.commit <= bounds.last, `save: commit ${rd.hardState.commit} beyond last index ${bounds.last}`);
    }
    if (install === undefined && rd.entries.length === 0 && rd.hardState === undefined) return;
    const record: WalRecord = {
      type: 'save', entries: rd.entries,
      ...(rd.hardState !== undefined ? { hardState: rd.hardState } : {}),
      ...(install !== undefined ? { install } : {}),
    };
    await this.write(record, sync, 'save');
    if (snap !== undefined) {
      this.cache.applySnapshot(snap);
      this.keepSnapshotData();
    }
    this.cache.append(rd.entries);
    if (rd.hardState !== undefined) this.cache.setHardState(rd.hardState);
    assert(this.cache.lastIndex() === bounds.last, `save: cache last ${this.cache.lastIndex()} equals disk last ${bounds.last}`);
    if (snap !== undefined) await this.pruneSnapshots();
  }

  /** After its file is durable: the record that makes `snap` the log's snapshot. */
  private async recordSnapshotNow(snap: Snapshot, file: SnapshotRecord): Promise<void> {
    // A newer snapshot may have been installed meanwhile; this file is then pruned as an old one.
    if (snap.meta.index <= this.cache.snapshot().meta.index) return;
    await this.write({ type: 'snapshot', snapshot: file }, true, 'snapshotRecord');
    this.cache.createSnapshot(snap.meta.index, snap.meta.confState, snap.data);
    this.keepSnapshotData();
    await this.pruneSnapshots();
  }

  private async compactNow(index: number): Promise<void> {
    if (index <= this.bounds().offset) return;
    const snapIndex = this.cache.snapshot().meta.index;
    assert(index <= snapIndex, `compact ${index} past the snapshot at ${snapIndex}: those entries are in no snapshot`);
    await this.write({ type: 'compact', truncated: { index, term: this.cache.term(index) } }, false, 'compact');
    this.cache.compact(index);
    const removed = await this.wal.removeObsolete();
    if (removed.length > 0) this.opts.logger?.debug(`removed write-ahead log segments ${removed.join(', ')}`);
  }

  private async writeSnapshotFile(snap: Snapshot): Promise<SnapshotRecord> {
    const started = performance.now();
    const header = await this.snapshots.write(snap);
    this.opts.onSync?.(performance.now() - started, { op: 'snapshotFile', sync: true, bytes: snap.data.length });
    const { format: _format, ...meta } = header;
    return { ...meta, file: this.snapshots.fileName(snap.meta.index) };
  }

  private async pruneSnapshots(): Promise<void> {
    const removed = await this.snapshots.prune(this.cache.snapshot().meta.index, this.opts.snapshotsKeptMax ?? 2, this.snapshotFilesWriting);
    if (removed.length > 0) this.opts.logger?.debug(`removed old snapshots ${removed.join(', ')}`);
  }

  private async write(record: WalRecord, sync: boolean, op: SyncSample['op']): Promise<void> {
    const started = performance.now();
    const bytes = this.wal.append(record);
    if (sync) await this.wal.sync();
    this.opts.onSync?.(performance.now() - started, { op, sync, bytes });
  }

  /** The write-ahead log's segment files, oldest first. */
  walSegments(): string[] {
    return this.wal.segmentNames();
  }

  private bounds(): LogBounds {
    return { offset: this.cache.firstIndex() - 1, last: this.cache.lastIndex() };
  }

  private checkOpen(what: string): void {
    if (this.closing !== undefined) throw new Error(`cannot ${what}: storage ${this.paths.dir} is closed`);
  }

  /**
   * Runs a write after the ones before it; at once when none is pending, so the batch reaches
   * the storage thread before the caller goes on (the node applies entries while its write
   * runs). A failed write leaves disk and cache possibly apart, so every later write is
   * refused: the node must restart and reload from disk.
   */
  private enqueue<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.checkOpen(what);
    const run = async (): Promise<T> => {
      if (this.failure !== undefined) {
        throw new Error(`cannot ${what}: an earlier write to ${this.paths.dir} failed; restart the node to reload its state from disk`,
          { cause: this.failure });
      }
      try {
        return await fn();
      } catch (err) {
        this.failure ??= err;
        throw err;
      }
    };
    const result = this.pending === 0 ? run() : this.tail.then(run);
    this.pending++;
    this.tail = result.then(() => { this.pending--; }, () => { this.pending--; });
    return result;
  }
}
