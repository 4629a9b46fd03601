// Moving a data directory of an older layout to the current one at the first open by this
// release. So a node is upgraded in place: stop it, start the new version on the same data
// directory.
//
// LevelDB (releases up to 0.1.x kept their keys in LevelDB, classic-level, under <data>/log):
// the directory is read by leveldb-reader.ts (no native code) and its keys are written to the
// key file (key-file.ts); then the directory is renamed aside to <data>/log.moved, never
// deleted. Until the key file is written the directory is the truth, and a crash means the move
// is done again at the next start; after, the key file is, and a LevelDB directory found next to
// it is only renamed aside.
//
// Format 1 (every entry a key in LevelDB): the write-ahead log is written whole and synced
// before the key file, which then says format 3 and holds no log keys. A crash before that
// leaves format 1 as it was (the half-written write-ahead log is thrown away and written again
// at the next open).
//
// Format 2 (the write-ahead log, segments of version 1): the stamp is written, synced, before
// the first preallocated segment (version 2), which releases of format 2 would refuse as
// damaged. Format 3 reads both versions, so a crash after the stamp loses nothing.

import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../raft/types.ts';
import { StorageCorruptionError, rebuildNodeRecovery } from './errors.ts';
import { KeyFile } from './key-file.ts';
import { entryKeyIndex, formatKey, hardStateKey, snapshotKey, truncatedKey } from './keys.ts';
import { LevelDbError, readLevelDb } from './leveldb-reader.ts';
import { levelAsideName, type StoragePaths } from './paths.ts';
import { readFormat, readLevelLog, type KeySource } from './recover.ts';
import { storageFormat } from './schemas.ts';
import { seal } from './sealed.ts';
import { syncDir } from './sync-dir.ts';
import { WalWriter, type WalWriterOptions } from './wal.ts';
import type { LogState } from './wal-replay.ts';

/** Whether the data directory still has the LevelDB directory of an older release. */
export function hasLevelDir(paths: StoragePaths): boolean {
  return existsSync(join(paths.level, 'CURRENT'));
}

/**
 * Moves the keys (and, in format 1, the log) of the LevelDB directory into the key file (and the
 * write-ahead log), unless the key file exists already; then renames the directory aside.
 */
export async function moveLevelDir(paths: StoragePaths, logger: Logger, opts: WalWriterOptions): Promise<void> {
  if (existsSync(paths.log)) {
    logger.warn(`found the LevelDB directory ${paths.level} next to ${paths.log}, which already holds its keys (a start that stopped before renaming it)`);
  } else {
    await copyLevelDir(paths, logger, opts);
  }
  let n = 1;
  while (existsSync(join(paths.dir, levelAsideName(n)))) n++;
  const aside = join(paths.dir, levelAsideName(n));
  await rename(paths.level, aside);
  await syncDir(paths.dir);
  logger.info(`renamed the LevelDB directory ${paths.level} to ${aside}: nothing reads it any more; delete it once this node runs as it should`);
}

async function copyLevelDir(paths: StoragePaths, logger: Logger, opts: WalWriterOptions): Promise<void> {
  let read: Awaited<ReturnType<typeof readLevelDb>>;
  try {
    read = await readLevelDb(paths.level);
  } catch (err) {
    if (!(err instanceof LevelDbError)) throw err;
    throw new StorageCorruptionError(err.file, `the LevelDB directory of an older release cannot be read to move its keys: ${err.detail}`,
      rebuildNodeRecovery(paths.dir), { cause: err });
  }
  for (const t of read.torn) logger.warn(`ignored an unfinished write at the end of a LevelDB log (${t}); it was never acknowledged`);
  const keys = read.entries;
  const source: KeySource = { get: (k) => keys.get(Buffer.from(k).toString('latin1')), file: paths.level };
  const format = readFormat(source, paths);
  const logKeys = new Set([hardStateKey, truncatedKey, snapshotKey].map((k) => k.toString('latin1')));
  const isLogKey = (k: string): boolean => logKeys.has(k) || entryKeyIndex(Buffer.from(k, 'latin1')) !== undefined;
  const kept = [...keys].filter(([k]) => !isLogKey(k));
  if (format !== 1) {
    const stray = [...keys.keys()].filter(isLogKey);
    if (stray.length > 0) {
      throw new StorageCorruptionError(paths.level, `storage format ${format ?? '(none)'} keeps its log in the write-ahead log, but LevelDB holds ${stray.length} log keys (such as '${Buffer.from(stray[0] ?? '', 'latin1').toString('hex')}')`,
        rebuildNodeRecovery(paths.dir));
    }
  }
  let moved = '';
  if (format === 1) {
    const state = readLevelLog(keys, paths);
    const wal = await startWal(paths, state, opts);
    wal.close();
    kept.push([formatKey.toString('latin1'), seal({ format: storageFormat })]);
    moved = `, and the log (${state.entries.length} entries after index ${state.truncated.index}) into the write-ahead log ${paths.wal} (storage format 1 to ${storageFormat})`;
  }
  const file = await KeyFile.load(paths);
  await file.put(kept.map(([k, v]) => [Buffer.from(k, 'latin1'), v] as const));
  logger.info(`moved ${kept.length} keys from the LevelDB directory ${paths.level} (${read.stats.tables} tables, ${read.stats.logs} logs) into ${paths.log}${moved}`);
}

/** Format 2 to 3: only the stamp changes; the writer starts a preallocated segment after it. */
export async function stampFormat3(keys: KeyFile, paths: StoragePaths, logger: Logger): Promise<void> {
  await keys.put([[formatKey, seal({ format: storageFormat })]]);
  logger.info(`storage format 2 to ${storageFormat} in ${paths.dir}: new write-ahead log segments are preallocated`);
}

/** A brand-new data directory: an empty write-ahead log, then the format stamp. */
export async function initWal(keys: KeyFile, paths: StoragePaths, opts: WalWriterOptions): Promise<{ wal: WalWriter; state: LogState }> {
  const state: LogState = { truncated: { index: 0, term: 0 }, entries: [] };
  const wal = await startWal(paths, state, opts);
  await closingOnFailure(wal, keys.put([[formatKey, seal({ format: storageFormat })]]));
  return { wal, state };
}

async function startWal(paths: StoragePaths, state: LogState, opts: WalWriterOptions): Promise<WalWriter> {
  await rm(paths.wal, { recursive: true, force: true }); // left by a start that did not finish
  const wal = WalWriter.create(paths.wal, state, opts);
  await closingOnFailure(wal, wal.sync());
  return wal;
}

/** Awaits `work`; if it fails, closes the write-ahead log the caller would have handed back. */
async function closingOnFailure<T>(wal: WalWriter, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    wal.close();
    throw err;
  }
}
