// Loading a node's storage at open: the log state (from the write-ahead log, or from the LevelDB
// directory of storage format 1), the snapshot, then the checks that tie them together, and only
// then the cache. `checkLog` changes nothing on disk, so a refused start leaves the evidence as
// it was; `tidyAndBuild` runs after every check passed.

import { MemoryStorage } from '../raft/storage.ts';
import type { HardState, Logger, Snapshot } from '../raft/types.ts';
import { chooseSnapshot, type ChosenSnapshot, type LogView } from './choose-snapshot.ts';
import { StorageCorruptionError, StorageFormatError, logCorrupt, rebuildNodeRecovery } from './errors.ts';
import { formatKey, hardStateKey, snapshotKey, truncatedKey } from './keys.ts';
import type { StoragePaths } from './paths.ts';
import { readLog } from './read-log.ts';
import {
  formatSchema, hardStateSchema, snapshotRecordSchema, storageFormat, truncatedSchema, type SafeParser, type SnapshotRecord,
  type StorageFormat,
} from './schemas.ts';
import { unseal } from './sealed.ts';
import type { SnapshotDir } from './snapshot-dir.ts';
import type { LogState } from './wal-replay.ts';

/** Where sealed records are read from: the key file, or (when moving it) an old LevelDB directory. */
export interface KeySource {
  get(key: Uint8Array): Buffer | undefined;
  /** The file or directory to name when a record is damaged. */
  readonly file: string;
}

export function readRecord<T>(source: KeySource, key: Buffer, schema: SafeParser<T>, paths: StoragePaths): T | undefined {
  const value = source.get(key);
  if (value === undefined) return undefined;
  const corrupt = (detail: string, cause?: unknown): StorageCorruptionError =>
    new StorageCorruptionError(source.file, detail, rebuildNodeRecovery(paths.dir), { cause });
  let decoded: unknown;
  try {
    decoded = unseal(value);
  } catch (err) {
    throw corrupt(`the '${key.toString()}' record is damaged: ${(err as Error).message}`, err);
  }
  const parsed = schema.safeParse(decoded);
  if (!parsed.success) throw corrupt(`the '${key.toString()}' record is not valid: ${parsed.error.message}`);
  return parsed.data;
}

/**
 * The storage format of the data directory: undefined for a new one, 1 for a log kept in
 * LevelDB (moved at open), 2 and 3 for the write-ahead log (3 once a release of format 3 has
 * stamped it). Anything else is refused.
 */
export function readFormat(source: KeySource, paths: StoragePaths): StorageFormat | undefined {
  const found = readRecord(source, formatKey, formatSchema, paths);
  if (found === undefined) return undefined;
  if (found.format === 1 || found.format === 2 || found.format === 3) return found.format;
  throw new StorageFormatError(source.file, found.format, storageFormat);
}

/** The log as storage format 1 kept it: every entry and record in LevelDB (`keys`, as read by leveldb-reader.ts). */
export function readLevelLog(keys: Map<string, Buffer>, paths: StoragePaths): LogState {
  const source: KeySource = { get: (k) => keys.get(Buffer.from(k).toString('latin1')), file: paths.level };
  const hardState = readRecord(source, hardStateKey, hardStateSchema, paths);
  const truncated = readRecord(source, truncatedKey, truncatedSchema, paths) ?? { index: 0, term: 0 };
  const record = readRecord(source, snapshotKey, snapshotRecordSchema, paths);
  const entries = readLog(keys, truncated, paths);
  return { ...(hardState !== undefined ? { hardState } : {}), truncated, ...(record !== undefined ? { record } : {}), entries };
}

/** Every check between the log and the snapshot files. Changes nothing on disk. */
export async function checkLog(state: LogState, snapshots: SnapshotDir, paths: StoragePaths): Promise<ChosenSnapshot> {
  const log: LogView = { truncated: state.truncated, entries: state.entries };
  const chosen = await chooseSnapshot(snapshots, state.record, log, paths);
  checkHardState(state.hardState, log, chosen.snapshot?.meta.index ?? 0, paths);
  return chosen;
}

/**
 * After checkLog passed: tidies up what a crash or damage left behind (recording a fallback
 * snapshot with `recordSnapshot`) and returns the cache as it was before the restart.
 */
export async function tidyAndBuild(
  state: LogState, chosen: ChosenSnapshot, snapshots: SnapshotDir, logger: Logger,
  recordSnapshot: (record: SnapshotRecord) => Promise<void>,
): Promise<MemoryStorage> {
  const fb = chosen.fallback;
  if (fb !== undefined) {
    const asidePath = await snapshots.setAside(fb.damagedIndex);
    await recordSnapshot(fb.record);
    logger.warn(`snapshot ${fb.damagedIndex} is damaged (${fb.detail}); moved it to ${asidePath} and starting from ` +
      `snapshot ${fb.record.index}, replaying the log after it. Check the disk; delete the damaged file once inspected.`);
  }
  const leftovers = await snapshots.removeTemporary();
  const orphans = await snapshots.prune(chosen.snapshot?.meta.index ?? 0, Number.MAX_SAFE_INTEGER);
  if (leftovers.length + orphans.length > 0) {
    logger.info(`removed snapshot files of writes that did not complete: ${[...leftovers, ...orphans.map((i) => snapshots.fileName(i))].join(', ')}`);
  }
  return buildCache(chosen.snapshot, { truncated: state.truncated, entries: state.entries }, state.hardState);
}

function checkHardState(hs: HardState | undefined, log: LogView, snapshotIndex: number, paths: StoragePaths): void {
  const last = log.truncated.index + log.entries.length;
  const lastTerm = log.entries[log.entries.length - 1]?.term ?? log.truncated.term;
  const floor = Math.max(log.truncated.index, snapshotIndex);
  if (hs === undefined) {
    if (last > 0) throw logCorrupt(paths, `the hard state is missing but the log runs to index ${last}`);
    return;
  }
  if (hs.commit > last) throw logCorrupt(paths, `the hard state commits index ${hs.commit} but the log ends at ${last}: synced entries were lost`);
  if (hs.commit < floor) throw logCorrupt(paths, `the hard state commits index ${hs.commit}, behind the snapshot or compaction at ${floor}`);
  if (hs.term < lastTerm) throw logCorrupt(paths, `the hard state term ${hs.term} is older than the last entry's term ${lastTerm}`);
}

/**
 * The cache as it was before the restart. The snapshot may be newer than the compaction point
 * (taken, log not compacted yet), so the log is rebuilt from the compaction point and the
 * snapshot recorded over it, without compacting.
 */
function buildCache(snapshot: Snapshot | undefined, log: LogView, hs: HardState | undefined): MemoryStorage {
  const cache = new MemoryStorage();
  const { truncated } = log;
  if (snapshot !== undefined && snapshot.meta.index === truncated.index) {
    cache.applySnapshot(snapshot);
  } else if (truncated.index > 0 && snapshot !== undefined) {
    const base = { meta: { index: truncated.index, term: truncated.term, confState: snapshot.meta.confState }, data: new Uint8Array(0) };
    cache.applySnapshot(base);
  }
  if (log.entries.length > 0) cache.append(log.entries);
  if (snapshot !== undefined && snapshot.meta.index > truncated.index) {
    cache.createSnapshot(snapshot.meta.index, snapshot.meta.confState, snapshot.data);
  }
  if (hs !== undefined) cache.setHardState(hs);
  return cache;
}
