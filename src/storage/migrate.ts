// Moving a data directory of an older storage format to the current one (3) at the first open
// by this release. So a node is upgraded in place: stop it, start the new version on the same
// data directory.
//
// Format 1 (every entry a key in the level database): the write-ahead log is written whole and
// synced first; then one synced batch stamps the format and deletes the old keys. A crash before
// that batch leaves format 1 as it was (the half-written write-ahead log is thrown away and
// written again at the next open); after it, the new format is whole.
//
// Format 2 (the write-ahead log, segments of version 1): the stamp is written, synced, before
// the first preallocated segment (version 2), which releases of format 2 would refuse as
// damaged. Format 3 reads both versions, so a crash after the stamp loses nothing.

import { rm } from 'node:fs/promises';
import type { Logger } from '../raft/types.ts';
import { entryKey, formatKey, hardStateKey, snapshotKey, truncatedKey } from './keys.ts';
import type { LogDb } from './level.ts';
import type { StoragePaths } from './paths.ts';
import { readLevelLog } from './recover.ts';
import { storageFormat } from './schemas.ts';
import { seal } from './sealed.ts';
import { WalWriter, type WalWriterOptions } from './wal.ts';
import type { LogState } from './wal-replay.ts';

export async function migrateLevelLog(
  db: LogDb, paths: StoragePaths, logger: Logger, opts: WalWriterOptions,
): Promise<{ wal: WalWriter; state: LogState }> {
  const state = await readLevelLog(db, paths);
  const wal = await startWal(paths, state, opts);
  const ops: ({ type: 'put'; key: Buffer; value: Buffer } | { type: 'del'; key: Buffer })[] = [
    { type: 'put', key: formatKey, value: seal({ format: storageFormat }) },
    ...[hardStateKey, truncatedKey, snapshotKey].map((key) => ({ type: 'del' as const, key })),
  ];
  for (const e of state.entries) ops.push({ type: 'del', key: entryKey(e.index) });
  await closingOnFailure(wal, db.batch(ops, { sync: true }));
  logger.info(`moved the log (${state.entries.length} entries after index ${state.truncated.index}) from the level database ` +
    `into the write-ahead log ${paths.wal} (storage format 1 to ${storageFormat})`);
  return { wal, state };
}

/** Format 2 to 3: only the stamp changes; the writer starts a preallocated segment after it. */
export async function stampFormat3(db: LogDb, paths: StoragePaths, logger: Logger): Promise<void> {
  await db.put(formatKey, seal({ format: storageFormat }), { sync: true });
  logger.info(`storage format 2 to ${storageFormat} in ${paths.dir}: new write-ahead log segments are preallocated`);
}

/** A brand-new data directory: an empty write-ahead log, then the format stamp. */
export async function initWal(db: LogDb, paths: StoragePaths, opts: WalWriterOptions): Promise<{ wal: WalWriter; state: LogState }> {
  const state: LogState = { truncated: { index: 0, term: 0 }, entries: [] };
  const wal = await startWal(paths, state, opts);
  await closingOnFailure(wal, db.put(formatKey, seal({ format: storageFormat }), { sync: true }));
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
