// Rebuilding the log from write-ahead log records, in the order they were written. Pure: the
// reader feeds records; the hard state, compaction point and snapshot record follow nextHead (the
// rule the writer uses too), and the entries mirror the MemoryStorage methods DiskStorage applies
// after a record is durable (append truncates a conflicting suffix, install replaces the whole
// log, compact drops a prefix).
//
// The oldest segment still on disk may begin after entries that lived in deleted segments; that
// is allowed because segments are only deleted once the log is compacted past all they hold.
// Continuity is therefore checked once, at the end, from the final compaction point.

import type { Entry, HardState } from '../raft/types.ts';
import type { SnapshotRecord, Truncated } from './schemas.ts';
import { nextHead, type LogHead, type WalRecord } from './wal-record.ts';

/** The log as read at open: what LevelDB held in storage format 1. */
export interface LogState {
  hardState?: HardState;
  truncated: Truncated;
  /** The snapshot the node restores from, if it has one. */
  record?: SnapshotRecord;
  /** Entries truncated.index + 1, truncated.index + 2, ... */
  entries: Entry[];
}

/** A rule broken by the records; the reader names the file. */
export class ReplayError extends Error {}

export class LogReplay {
  private head: LogHead = { truncated: { index: 0, term: 0 } };
  private readonly byIndex = new Map<number, Entry>();
  /** The log's last index as the records so far leave it. */
  private last = 0;

  /** Applies one record; returns the highest entry index it wrote (0 if none). */
  apply(r: WalRecord): number {
    const before = this.head.truncated.index;
    this.head = nextHead(this.head, r);
    const { truncated } = this.head;
    if (r.type === 'save' && r.install !== undefined) {
      this.byIndex.clear();
      this.last = truncated.index;
    } else if (truncated.index > before) {
      if (this.byIndex.size > 0) for (let i = before + 1; i <= truncated.index; i++) this.byIndex.delete(i);
      this.last = Math.max(this.last, truncated.index);
    }
    return r.type === 'save' ? this.append(r.entries) : 0;
  }

  /** The log the records describe; throws ReplayError if an entry is missing or out of order. */
  finish(): LogState {
    const entries: Entry[] = [];
    const { hardState, truncated, snapshot } = this.head;
    let prevTerm = truncated.term;
    for (let i = truncated.index + 1; i <= this.last; i++) {
      const e = this.byIndex.get(i);
      if (e === undefined) {
        let to = i;
        while (to < this.last && !this.byIndex.has(to + 1)) to++;
        throw new ReplayError(`the log has a gap: entries ${i} to ${to} are missing`);
      }
      if (e.term < prevTerm) throw new ReplayError(`entry ${i} has term ${e.term}, older than the term ${prevTerm} before it`);
      prevTerm = e.term;
      entries.push(e);
    }
    return {
      ...(hardState !== undefined ? { hardState } : {}),
      truncated,
      ...(snapshot !== undefined ? { record: snapshot } : {}),
      entries,
    };
  }

  private append(entries: readonly Entry[]): number {
    const first = entries[0];
    if (first === undefined) return 0;
    entries.forEach((e, i) => {
      if (e.index !== first.index + i) throw new ReplayError(`a record's entries are not contiguous: ${e.index} follows ${first.index + i - 1}`);
    });
    const lastWritten = first.index + entries.length - 1;
    const floor = this.head.truncated.index;
    if (lastWritten <= floor) return lastWritten;
    for (let i = Math.max(first.index, floor + 1); i <= this.last; i++) this.byIndex.delete(i);
    for (const e of entries) if (e.index > floor) this.byIndex.set(e.index, e);
    this.last = lastWritten;
    return lastWritten;
  }
}
