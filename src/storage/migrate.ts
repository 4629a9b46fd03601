// Moving a data directory of an older layout to the current one at the first open by this
// release. So a node is upgraded in place: stop it, start the new version on the same data
// directory.
//
// LevelDB (releases up to 0.1.x kept their keys in LevelDB, classic-level, under <data>/log):
// the directory is read by leveldb-reader.ts (no native code) and its keys are copied to the key
// file (key-file.ts) with its fingerprint. The directory stays where it is, untouched, so that a
// rollback to the release before (`shoal upgrade --rollback`) finds it; while it is there the
// key file is not changed without renaming it aside first (to <data>/log.moved, never deleted:
// key-file.ts, which drops the fingerprint). So at each start: a LevelDB directory whose
// fingerprint differs from the one the key file records changed since the copy (a rolled-back
// release wrote it) and is copied again; one beside a key file with no fingerprint is not where
// those keys came from (a recovery wrote a new storage) and is renamed aside.
//
// Format 1 (every entry a key in LevelDB): the write-ahead log is written whole and synced
// before the key file, which then says format 3 and holds no log keys, and the LevelDB
// directory is renamed aside at once (a release of format 1 would serve its old log). A crash
// before the key file leaves format 1 as it was (the half-written write-ahead log is thrown away
// and written again at the next open); after it, the directory is only renamed aside.
//
// Format 2 (the write-ahead log, segments of version 1): the stamp is written, synced, before
// the first preallocated segment (version 2), which releases of format 2 would refuse as
// damaged. Format 3 reads both versions, so a crash after the stamp loses nothing.

import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Logger } from '../raft/types.ts';
import { StorageCorruptionError, rebuildNodeRecovery } from './errors.ts';
import { KeyFile } from './key-file.ts';
import { entryKeyIndex, formatKey, hardStateKey, snapshotKey, truncatedKey } from './keys.ts';
import { setLevelAside } from './level-aside.ts';
import { LevelDbError, readLevelDb } from './leveldb-reader.ts';
import type { StoragePaths } from './paths.ts';
import { readFormat, readLevelLog, type KeySource } from './recover.ts';
import { storageFormat } from './schemas.ts';
import { seal } from './sealed.ts';
import { WalWriter, type WalWriterOptions } from './wal.ts';
import type { LogState } from './wal-replay.ts';

export { hasLevelDir } from './level-aside.ts';

/**
 * Copies the keys of the LevelDB directory into the key file, unless it holds them already; for
 * format 1, moves the log into the write-ahead log and sets the directory aside.
 */
export async function moveLevelDir(paths: StoragePaths, logger: Logger, opts: WalWriterOptions): Promise<void> {
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
  const from = `the LevelDB directory ${paths.level} (${read.stats.tables} tables, ${read.stats.logs} logs)`;
  if (format === 1) {
    // The key file is written only after the write-ahead log holds the log: if it exists, the
    // move is done and only the renaming was cut short.
    if (!existsSync(paths.log)) await moveFormat1(keys, paths, logger, opts, from);
    await setLevelAside(paths, logger, 'its log and keys were moved');
    return;
  }
  const logKeys = [...keys.keys()].filter(isLogKey);
  if (logKeys.length > 0) {
    throw new StorageCorruptionError(paths.level, `storage format ${format ?? '(none)'} keeps its log in the write-ahead log, but LevelDB holds ${logKeys.length} log keys (such as '${Buffer.from(logKeys[0] ?? '', 'latin1').toString('hex')}')`,
      rebuildNodeRecovery(paths.dir));
  }
  const fingerprint = levelFingerprint(keys);
  const existed = existsSync(paths.log);
  const file = await KeyFile.load(paths, logger);
  if (existed && file.levelCopy() === undefined) {
    // A key file not copied from this directory (a recovery wrote a new storage, or a key
    // changed while the directory was set aside by hand and put back): the directory is stale.
    await setLevelAside(paths, logger, `${paths.log} was not copied from it`);
    return;
  }
  if (file.levelCopy() === fingerprint) return;
  await file.copyOf(keys, fingerprint);
  logger.info(existed
    ? `copied the keys of ${from} into ${paths.log} again: they changed since the last start (a rollback ran the release before)`
    : `copied ${keys.size} keys from ${from} into ${paths.log}; the LevelDB directory stays for a rollback to the release before, ` +
      'until a key changes (then it is renamed aside)');
}

/** sha256 of the keys and values in key order. */
function levelFingerprint(keys: Map<string, Buffer>): string {
  const h = createHash('sha256');
  for (const k of [...keys.keys()].sort()) {
    const v = keys.get(k) ?? Buffer.alloc(0);
    h.update(`${k.length}:`).update(Buffer.from(k, 'latin1')).update(`${v.length}:`).update(v);
  }
  return h.digest('hex');
}

const logKeyNames = new Set([hardStateKey, truncatedKey, snapshotKey].map((k) => k.toString('latin1')));
const isLogKey = (k: string): boolean => logKeyNames.has(k) || entryKeyIndex(Buffer.from(k, 'latin1')) !== undefined;

async function moveFormat1(keys: Map<string, Buffer>, paths: StoragePaths, logger: Logger, opts: WalWriterOptions, from: string): Promise<void> {
  const state = readLevelLog(keys, paths);
  const wal = await startWal(paths, state, opts);
  wal.close();
  const kept = new Map([...keys].filter(([k]) => !isLogKey(k)));
  kept.set(formatKey.toString('latin1'), seal({ format: storageFormat }));
  await (await KeyFile.load(paths, logger)).replaceAll(kept);
  logger.info(`moved ${kept.size} keys from ${from} into ${paths.log}, and the log (${state.entries.length} entries after index ` +
    `${state.truncated.index}) into the write-ahead log ${paths.wal} (storage format 1 to ${storageFormat})`);
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
