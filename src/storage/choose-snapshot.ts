// Choosing the snapshot to start from. The snapshot record in the log names it; the
// file must be intact and agree with the record and with the log. If it is damaged, an older
// snapshot file may stand in for it, but only if the log still holds every entry after that
// older snapshot (the state at the newer index is then rebuilt by replaying the log).

import type { Entry, Snapshot } from '../raft/types.ts';
import { StorageCorruptionError, logCorrupt, rebuildNodeRecovery } from './errors.ts';
import type { StoragePaths } from './paths.ts';
import type { SnapshotHeader, SnapshotRecord, Truncated } from './schemas.ts';
import type { SnapshotDir } from './snapshot-dir.ts';

/** The log as read at open: entries (truncated.index, truncated.index + entries.length]. */
export interface LogView {
  truncated: Truncated;
  entries: readonly Entry[];
}

export interface ChosenSnapshot {
  /** Undefined when the node has never had a snapshot. */
  snapshot?: Snapshot;
  /** Set when the recorded snapshot is damaged and an older one stands in for it. */
  fallback?: { damagedIndex: number; detail: string; record: SnapshotRecord };
}

/** The term of `index` according to the log, or undefined outside [truncated, last]. */
export function termAt(log: LogView, index: number): number | undefined {
  if (index === log.truncated.index) return log.truncated.term;
  return log.entries[index - log.truncated.index - 1]?.term;
}

export async function chooseSnapshot(
  snapshots: SnapshotDir, record: SnapshotRecord | undefined, log: LogView, paths: StoragePaths,
): Promise<ChosenSnapshot> {
  const { truncated } = log;
  if (record === undefined) {
    if (truncated.index > 0) throw logCorrupt(paths, `the log was compacted through ${truncated.index} but no snapshot is recorded`);
    return {};
  }
  if (record.index < truncated.index) {
    throw logCorrupt(paths, `the log was compacted through ${truncated.index}, past the snapshot at ${record.index}`);
  }
  const logTerm = termAt(log, record.index);
  if (logTerm !== record.term) {
    throw logCorrupt(paths, `the snapshot record says index ${record.index} has term ${record.term}, the log says ${logTerm ?? 'nothing (beyond its end)'}`);
  }
  const decoded = await snapshots.read(record.index);
  const problem = decoded.ok ? mismatch(decoded.header, record) : decoded.detail;
  if (decoded.ok && problem === undefined) return { snapshot: decoded.snapshot };
  const detail = problem ?? 'unreadable';
  const older = await findOlder(snapshots, record.index, log);
  if (older.found !== undefined) {
    const { header, snapshot } = older.found;
    const { format: _format, ...meta } = header;
    const fallbackRecord: SnapshotRecord = { ...meta, file: snapshots.fileName(header.index) };
    return { snapshot, fallback: { damagedIndex: record.index, detail, record: fallbackRecord } };
  }
  throw new StorageCorruptionError(snapshots.path(record.index), `snapshot ${record.index} is damaged: ${detail}; ${older.why}`,
    rebuildNodeRecovery(paths.dir));
}

function mismatch(header: SnapshotHeader, record: SnapshotRecord): string | undefined {
  if (header.term !== record.term || header.dataBytes !== record.dataBytes || header.dataCrc32 !== record.dataCrc32) {
    return `the file is intact but is not the snapshot recorded in the log database (term ${header.term}, ` +
      `${header.dataBytes} bytes; expected term ${record.term}, ${record.dataBytes} bytes)`;
  }
  return undefined;
}

type Older = { found: { header: SnapshotHeader; snapshot: Snapshot }; why?: undefined } | { found?: undefined; why: string };

async function findOlder(snapshots: SnapshotDir, below: number, log: LogView): Promise<Older> {
  const notes: string[] = [];
  for (const index of (await snapshots.list()).filter((i) => i < below)) {
    if (index < log.truncated.index) {
      notes.push(`the older snapshot ${index} cannot stand in for it because the log was compacted through ${log.truncated.index}`);
      break;
    }
    const decoded = await snapshots.read(index);
    if (!decoded.ok) {
      notes.push(`the older snapshot ${index} is damaged too (${decoded.detail})`);
    } else if (termAt(log, index) !== decoded.header.term) {
      notes.push(`the older snapshot ${index} disagrees with the log about the term at ${index}`);
    } else {
      return { found: { header: decoded.header, snapshot: decoded.snapshot } };
    }
  }
  if (notes.length === 0) notes.push('there is no older snapshot file to fall back to');
  return { why: notes.join('; ') };
}
