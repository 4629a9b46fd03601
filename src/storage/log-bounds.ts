// The log's bounds before and after a write, checked before the write reaches the disk: the
// rules that keep disk and cache equal, mirroring MemoryStorage.append.

import { assert } from '../base/assert.ts';
import type { Entry } from '../raft/types.ts';

/** The log as stored: entries (offset, last]. */
export interface LogBounds {
  offset: number;
  last: number;
}

/**
 * The bounds after appending `entries`, which overwrite any conflicting suffix and end the log.
 * Entries at or below the offset are already compacted: skipped. A gap is a programmer error.
 */
export function appendBounds(bounds: LogBounds, entries: readonly Entry[]): LogBounds {
  const first = entries[0];
  if (first === undefined) return bounds;
  entries.forEach((e, i) => assert(e.index === first.index + i, `append: entries contiguous at ${first.index + i}`));
  const last = first.index + entries.length - 1;
  if (last <= bounds.offset) return bounds;
  const start = Math.max(first.index, bounds.offset + 1);
  assert(start <= bounds.last + 1, `append: gap (last ${bounds.last}, appending ${start})`);
  return { offset: bounds.offset, last };
}
