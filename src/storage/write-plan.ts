// What each write does to the level database, as a list of batch operations computed from the
// log's bounds before the write. Pure, so the rules that keep disk and cache equal are checked
// in one place: each plan mirrors the MemoryStorage method applied after the batch is durable.

import { assert } from '../raft/assert.ts';
import type { Entry, HardState } from '../raft/types.ts';
import { entryKey, hardStateKey, snapshotKey, truncatedKey } from './keys.ts';
import type { SnapshotRecord, Truncated } from './schemas.ts';
import { seal } from './sealed.ts';

export type LevelOp = { type: 'put'; key: Buffer; value: Buffer } | { type: 'del'; key: Buffer };

/** The log as stored: entries (offset, last]. */
export interface LogBounds {
  offset: number;
  last: number;
}

const put = (key: Buffer, value: unknown): LevelOp => ({ type: 'put', key, value: seal(value) });

function deleteRange(from: number, to: number, ops: LevelOp[]): void {
  for (let i = from; i <= to; i++) ops.push({ type: 'del', key: entryKey(i) });
}

/**
 * Appends `entries`, overwriting any conflicting suffix and deleting what lies beyond the new
 * end (MemoryStorage.append). Entries at or below the offset are already compacted: skipped.
 */
export function planAppend(bounds: LogBounds, entries: readonly Entry[], ops: LevelOp[]): LogBounds {
  const first = entries[0];
  if (first === undefined) return bounds;
  entries.forEach((e, i) => assert(e.index === first.index + i, `append: entries contiguous at ${first.index + i}`));
  const kept = entries.filter((e) => e.index > bounds.offset);
  const start = kept[0];
  if (start === undefined) return bounds;
  assert(start.index <= bounds.last + 1, `append: gap (last ${bounds.last}, appending ${start.index})`);
  const last = start.index + kept.length - 1;
  for (const e of kept) ops.push(put(entryKey(e.index), e));
  deleteRange(last + 1, bounds.last, ops); // truncation: stale entries of an older term
  return { offset: bounds.offset, last };
}

/**
 * Replaces the whole log with a snapshot received from the leader (MemoryStorage.applySnapshot
 * drops every entry: the core installs a snapshot only when its log does not match at the
 * snapshot's index, so nothing after it can be kept either).
 */
export function planInstallSnapshot(bounds: LogBounds, record: SnapshotRecord, ops: LevelOp[]): LogBounds {
  deleteRange(bounds.offset + 1, bounds.last, ops);
  ops.push(put(snapshotKey, record));
  const truncated: Truncated = { index: record.index, term: record.term };
  ops.push(put(truncatedKey, truncated));
  return { offset: record.index, last: record.index };
}

/** Deletes entries up to and including `truncated.index` (MemoryStorage.compact). */
export function planCompact(bounds: LogBounds, truncated: Truncated, ops: LevelOp[]): LogBounds {
  deleteRange(bounds.offset + 1, truncated.index, ops);
  ops.push(put(truncatedKey, truncated));
  return { offset: truncated.index, last: bounds.last };
}

export function planHardState(hs: HardState, ops: LevelOp[]): void {
  ops.push(put(hardStateKey, hs));
}

export function planSnapshotRecord(record: SnapshotRecord, ops: LevelOp[]): void {
  ops.push(put(snapshotKey, record));
}
