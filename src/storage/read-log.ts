// Reading a log of storage format 1 (entries in LevelDB) back, to move it into the write-ahead
// log. Verifying every entry on the way: each value's checksum and schema, each key's index
// against the entry inside it, and continuity from the compaction point. Any failure refuses the
// whole log; a log with a hole or a bad entry is never served.

import type { Entry } from '../raft/types.ts';
import { levelCorrupt } from './errors.ts';
import { entryKeyIndex, entryRange } from './keys.ts';
import type { StoragePaths } from './paths.ts';
import { entrySchema, type Truncated } from './schemas.ts';
import { unseal } from './sealed.ts';

/** Every key of `keys` in the entry range, in key order (the order LevelDB iterated them). */
export function entryKeys(keys: Map<string, Buffer>): [Buffer, Buffer][] {
  return [...keys].map(([k, v]) => [Buffer.from(k, 'latin1'), v] as [Buffer, Buffer])
    .filter(([k]) => Buffer.compare(k, entryRange.gte) >= 0 && Buffer.compare(k, entryRange.lt) < 0)
    .sort((a, b) => Buffer.compare(a[0], b[0]));
}

export function readLog(keys: Map<string, Buffer>, truncated: Truncated, paths: StoragePaths): Entry[] {
  const entries: Entry[] = [];
  let prevTerm = truncated.term;
  for (const [key, value] of entryKeys(keys)) {
    const expected = truncated.index + entries.length + 1;
    const index = entryKeyIndex(key);
    if (index === undefined) throw levelCorrupt(paths, `malformed entry key ${key.toString('hex')} after index ${expected - 1}`);
    if (index !== expected) throw levelCorrupt(paths, continuityProblem(index, expected, truncated));
    const entry = decodeEntry(value, index, paths);
    if (entry.term < prevTerm) {
      throw levelCorrupt(paths, `entry ${index} has term ${entry.term}, older than the term ${prevTerm} before it`);
    }
    prevTerm = entry.term;
    entries.push(entry);
  }
  return entries;
}

function decodeEntry(value: Buffer, index: number, paths: StoragePaths): Entry {
  let decoded: unknown;
  try {
    decoded = unseal(value);
  } catch (err) {
    throw levelCorrupt(paths, `log entry ${index} is damaged: ${(err as Error).message}`, err);
  }
  const parsed = entrySchema.safeParse(decoded);
  if (!parsed.success) throw levelCorrupt(paths, `log entry ${index} is not a valid entry: ${parsed.error.message}`);
  if (parsed.data.index !== index) {
    throw levelCorrupt(paths, `the entry stored under index ${index} says it is index ${parsed.data.index}`);
  }
  return parsed.data;
}

function continuityProblem(found: number, expected: number, truncated: Truncated): string {
  if (found < expected) {
    return `entry ${found} is still present although the log was compacted through ${truncated.index}`;
  }
  return `the log has a gap: entries ${expected} to ${found - 1} are missing`;
}
