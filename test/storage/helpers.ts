// Shared pieces of the storage tests: temporary data directories, entry builders and a full
// dump of what a storage serves, for comparing before and after a restart.

import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import { emptyConfState, type LogStorage } from '../../src/raft/storage.ts';
import type { ConfState, Entry, HardState, Snapshot } from '../../src/raft/types.ts';
import { DiskStorage, type DiskStorageOptions } from '../../src/storage/index.ts';
import { StorageCorruptionError } from '../../src/storage/errors.ts';
import { readFrame, readHeader, segmentHeaderBytes } from '../../src/storage/wal-record.ts';

const made: string[] = [];
const opened: DiskStorage[] = [];

afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  for (const d of made.splice(0)) await rm(d, { recursive: true, force: true });
});

/**
 * Where the records of a write-ahead log segment end: the file's length for a segment of
 * version 1, the start of the zeros after them for a preallocated one (version 2).
 */
export async function recordsEnd(path: string): Promise<number> {
  const buf = await readFile(path);
  const header = readHeader(buf);
  if ('problem' in header) throw new Error(`${path}: ${header.problem}`);
  let pos = segmentHeaderBytes;
  for (let f = readFrame(buf, pos, header.version); f.kind === 'record'; f = readFrame(buf, pos, header.version)) pos = f.end;
  return pos;
}

/** Writes bytes into a file at `at`, over what was there (zeros past the records, say). */
export async function writeAt(path: string, at: number, bytes: Buffer): Promise<void> {
  const b = await readFile(path);
  const out = Buffer.alloc(Math.max(b.length, at + bytes.length));
  b.copy(out);
  bytes.copy(out, at);
  await writeFile(path, out);
}

/** A fresh directory under the OS temp folder, removed after the test. */
export async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'shoal-storage-'));
  made.push(d);
  return d;
}

/** Opens a storage that is closed after the test (closing twice is allowed). */
export async function openStorage(dir: string, opts?: DiskStorageOptions): Promise<DiskStorage> {
  const s = await DiskStorage.open(dir, opts);
  opened.push(s);
  return s;
}

/** Copies a data directory as it is on disk now, even while a storage has it open. */
export async function copyDir(from: string): Promise<string> {
  const to = await tempDir();
  await cp(from, to, { recursive: true });
  return to;
}

export function normal(index: number, term: number, text = `entry ${index}@${term}`): Entry {
  return { kind: 'normal', index, term, data: new TextEncoder().encode(text) };
}

/** Entries [from, to] of one term. */
export function run(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(normal(i, term));
  return out;
}

export const conf = (voters: string[]): ConfState => ({ ...emptyConfState(), voters });

export const hs = (term: number, commit: number, vote = ''): HardState => ({ term, vote, commit });

export function bytes(...values: number[]): Uint8Array {
  return Uint8Array.from(values);
}

export interface Dump {
  firstIndex: number;
  lastIndex: number;
  entries: Entry[];
  terms: number[];
  hardState: HardState;
  snapshot: Snapshot;
}

/** Everything the core can read, for toEqual comparisons across a restart. */
export function dump(s: LogStorage & { hardState(): HardState }): Dump {
  const first = s.firstIndex();
  const last = s.lastIndex();
  const terms: number[] = [];
  for (let i = first - 1; i <= last; i++) terms.push(s.term(i));
  return {
    firstIndex: first,
    lastIndex: last,
    entries: last >= first ? s.entries(first, last + 1, Number.MAX_SAFE_INTEGER) : [],
    terms,
    hardState: s.hardState(),
    snapshot: s.snapshot(),
  };
}

/** Opening `dir` is refused as corrupt: the typed error, its file and its recovery in the message. */
export async function openRefused(dir: string): Promise<StorageCorruptionError> {
  const err: unknown = await DiskStorage.open(dir).then(async (s) => {
    await s.close();
    return undefined;
  }, (e: unknown) => e);
  expect(err).toBeInstanceOf(StorageCorruptionError);
  const c = err as StorageCorruptionError;
  expect(c.code).toBe('storage_corrupt');
  expect(c.message).toContain(c.file);
  expect(c.message).toContain(c.recovery);
  return c;
}
