// Damaged storage is found at open and refused with a StorageCorruptionError that names the
// damaged file and says what to do; the node never starts on a partial or altered log, and a
// refused open changes nothing on disk.

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, readFile, readdir, rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DiskStorage, StorageFormatError, storagePaths } from '../../src/storage/index.ts';
import { KeyFile } from '../../src/storage/key-file.ts';
import { formatKey } from '../../src/storage/keys.ts';
import { packr, seal } from '../../src/storage/sealed.ts';
import { SnapshotDir } from '../../src/storage/snapshot-dir.ts';
import { encodeRecord, frameBody } from '../../src/storage/wal-record.ts';
import type { Logger } from '../../src/raft/types.ts';
import { bytes, conf, dump, hs, openRefused, openStorage, recordsEnd, run, tempDir, writeAt } from './helpers.ts';

/** A closed data directory: entries 1..20 (term 1, then 2 from 11), snapshots as asked. */
async function prepared(snapshotsAt: number[], compactTo = 0): Promise<string> {
  const dir = await tempDir();
  const s = await openStorage(dir);
  await s.save({ entries: [...run(1, 10, 1), ...run(11, 20, 2)], hardState: hs(2, 20) });
  for (const i of snapshotsAt) await s.createSnapshot(i, conf(['a', 'b', 'c']), bytes(i, i));
  if (compactTo > 0) await s.compact(compactTo);
  await s.close();
  return dir;
}

/** Edits the key file of a closed data directory. */
async function withKeys(dir: string, edit: (keys: KeyFile) => Promise<unknown>): Promise<void> {
  await edit(await KeyFile.load(storagePaths(dir)));
}

const keysPath = (dir: string): string => join(dir, 'storage.keys');

const segPath = (dir: string, seq = 1): string => join(dir, 'wal', `seg-${String(seq).padStart(16, '0')}.wal`);

/** Writes raw bytes after the last segment's records, as a buggy writer or a damaged disk might leave them. */
async function appendToWal(dir: string, ...frames: Buffer[]): Promise<void> {
  const path = segPath(dir);
  await writeAt(path, await recordsEnd(path), Buffer.concat(frames));
}


/** A frame with a good checksum around any value, valid record or not. */
const frame = (value: unknown): Buffer => frameBody(packr.pack(value));


const snapPath = (dir: string, index: number): string => join(dir, 'snapshots', new SnapshotDir('').fileName(index));

/** Flips the byte `fromEnd` bytes before `end` (default: the end of the file). */
async function flipByte(path: string, fromEnd: number, end?: number): Promise<void> {
  const b = await readFile(path);
  const at = (end ?? b.length) - fromEnd;
  b[at] = (b[at] as number) ^ 0xff;
  await writeFile(path, b);
}

describe('corruption is detected at open', () => {
  it('a truncated snapshot file', async () => {
    const dir = await prepared([15], 15);
    const path = snapPath(dir, 15);
    await truncate(path, (await readFile(path)).length - 1);
    const err = await openRefused(dir);
    expect(err.file).toBe(path);
    expect(err.detail).toMatch(/snapshot 15 is damaged: data is 1 bytes, the header says 2 \(truncated/);
    expect(err.recovery).toContain(`move ${dir} aside`);
  });

  it('a flipped byte in a snapshot file, with no older snapshot to fall back to', async () => {
    const dir = await prepared([15]);
    await flipByte(snapPath(dir, 15), 1);
    const err = await openRefused(dir);
    expect(err.file).toBe(snapPath(dir, 15));
    expect(err.detail).toMatch(/data checksum mismatch; there is no older snapshot file/);
  });

  it('a damaged newest snapshot is replaced by the older one when the log still covers the gap', async () => {
    const dir = await prepared([8, 15], 5);
    await flipByte(snapPath(dir, 15), 1);
    const warnings: string[] = [];
    const logger: Logger = { debug: () => {}, info: () => {}, warn: (m) => warnings.push(m) };
    const s = await openStorage(dir, { logger });
    expect(s.snapshot()).toEqual({ meta: { index: 8, term: 1, confState: conf(['a', 'b', 'c']) }, data: bytes(8, 8) });
    expect(dump(s)).toMatchObject({ firstIndex: 6, lastIndex: 20 }); // entries 9..15 are replayed from the log
    expect(warnings.join()).toMatch(/snapshot 15 is damaged .* starting from snapshot 8/);
    // The damaged file is kept aside for inspection, and the next start is clean.
    expect((await readdir(join(dir, 'snapshots'))).sort()).toEqual([new SnapshotDir('').fileName(8), `${new SnapshotDir('').fileName(15)}.damaged`]);
    const before = dump(s);
    await s.close();
    warnings.length = 0;
    expect(dump(await openStorage(dir, { logger }))).toEqual(before);
    expect(warnings).toEqual([]);
  });

  it('a damaged newest snapshot is refused when the log was compacted past the older one', async () => {
    const dir = await prepared([8, 15], 12);
    await flipByte(snapPath(dir, 15), 1);
    const err = await openRefused(dir);
    expect(err.file).toBe(snapPath(dir, 15));
    expect(err.detail).toMatch(/older snapshot 8 cannot stand in for it because the log was compacted through 12/);
    // Refusing changed nothing: the damaged file is where it was.
    expect((await readdir(join(dir, 'snapshots'))).length).toBe(2);
  });

  it('a missing snapshot file', async () => {
    const dir = await prepared([15]);
    await rm(snapPath(dir, 15));
    const err = await openRefused(dir);
    expect(err.detail).toMatch(/snapshot 15 is damaged: the snapshot file is missing/);
  });

  it('a flipped byte in a record of the write-ahead log, even the last one', async () => {
    const dir = await prepared([]);
    await flipByte(segPath(dir), 20, await recordsEnd(segPath(dir))); // inside the last record
    const err = await openRefused(dir);
    expect(err.file).toBe(segPath(dir));
    expect(err.detail).toMatch(/a record of \d+ bytes fails its checksum, at byte \d+/);
    expect(err.recovery).toMatch(/join it again .* as a learner/);
  });

  it('damage followed by whole records is not taken for a torn write', async () => {
    const dir = await prepared([]);
    const path = segPath(dir);
    const b = await readFile(path);
    b.fill(0, 16, 40); // the state record's header and part of its body, then whole records
    await writeFile(path, b);
    expect((await openRefused(dir)).detail).toMatch(/a record header gives a length of 0 bytes, at byte 16/);
  });

  it('a gap in the log', async () => {
    const dir = await prepared([]);
    await appendToWal(dir, encodeRecord({ type: 'save', entries: run(23, 24, 2) }));
    const err = await openRefused(dir);
    expect(err.file).toBe(join(dir, 'wal'));
    expect(err.detail).toMatch(/gap: entries 21 to 22 are missing/);
  });

  it('a record whose entries are not contiguous', async () => {
    const dir = await prepared([]);
    await appendToWal(dir, encodeRecord({ type: 'save', entries: [...run(21, 21, 2), ...run(23, 23, 2)] }));
    expect((await openRefused(dir)).detail).toMatch(/entries are not contiguous: 23 follows 21/);
  });

  it('a hard state that commits past the end of the log: synced entries were lost', async () => {
    const dir = await prepared([]);
    await appendToWal(dir, encodeRecord({ type: 'save', entries: run(11, 18, 2), hardState: hs(2, 20) }));
    expect((await openRefused(dir)).detail).toMatch(/commits index 20 but the log ends at 18/);
  });

  it('a record that does not match its schema', async () => {
    const dir = await prepared([]);
    await appendToWal(dir, frame({ type: 'save', entries: [], hardState: { term: 'two', commit: 3 } }));
    expect((await openRefused(dir)).detail).toMatch(/the record is not valid/);
  });

  it('a missing write-ahead log, or one emptied of its segments', async () => {
    const dir = await prepared([]);
    await rm(join(dir, 'wal', 'seg-0000000000000001.wal'));
    expect((await openRefused(dir)).detail).toMatch(/the write-ahead log has no segment files/);
    await rm(join(dir, 'wal'), { recursive: true });
    const err = await openRefused(dir);
    expect(err.file).toBe(join(dir, 'wal'));
    expect(err.detail).toMatch(/the write-ahead log is missing/);
    expect(await readdir(dir)).not.toContain('wal'); // not recreated by the refused open
  });

  it('a missing segment between two others', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir, { segmentBytes: 256 });
    for (let i = 1; i <= 30; i += 3) await s.save({ entries: run(i, i + 2, 1), hardState: hs(1, i) });
    await s.close();
    expect((await readdir(join(dir, 'wal'))).length).toBeGreaterThan(2);
    await rm(segPath(dir, 2));
    const err = await openRefused(dir);
    expect(err.detail).toMatch(/segment 2 is missing between 1 and/);
  });

  it('a missing key file next to existing snapshots', async () => {
    const dir = await prepared([15]);
    await rm(keysPath(dir));
    const err = await openRefused(dir);
    expect(err.file).toBe(keysPath(dir));
    expect(err.detail).toMatch(/key file is missing but snapshot files exist/);
    expect(await readdir(dir)).not.toContain('storage.keys'); // not recreated by the refused open
  });

  it('a log wiped (with its snapshots) under a data directory that had one: the node must not rejoin under its old id', async () => {
    const dir = await prepared([]);
    await rm(keysPath(dir));
    const err = await openRefused(dir);
    expect(err.file).toBe(keysPath(dir));
    expect(err.detail).toMatch(/log is new or was replaced, but .*log\.id shows this node had log/);
    expect(err.recovery).toMatch(/member remove/);
    // Refused every time, not only on the first start after the wipe.
    await openRefused(dir);
  });

  it('the log of another data directory moved in', async () => {
    const mine = await prepared([]);
    const other = await prepared([]);
    await cp(keysPath(other), keysPath(mine));
    const err = await openRefused(mine);
    expect(err.detail).toMatch(/comes from another node/);
  });

  it('a log from before log ids (no log.id file, no id in the database) gets one and opens', async () => {
    const dir = await prepared([]);
    const id = (await readFile(join(dir, 'log.id'), 'utf8')).trim();
    await rm(join(dir, 'log.id'));
    const s = await openStorage(dir);
    expect(s.lastIndex()).toBe(20);
    await s.close();
    // The file is written again from the database, with the same id.
    expect((await readFile(join(dir, 'log.id'), 'utf8')).trim()).toBe(id);
  });

  it('a layout written by another version is refused with a format error', async () => {
    const dir = await prepared([]);
    await withKeys(dir, (keys) => keys.put([[formatKey, seal({ format: 4 })]]));
    await expect(DiskStorage.open(dir)).rejects.toThrow(StorageFormatError);
  });
});

describe('storage format 1 (the log in LevelDB, written by classic-level) is moved into the write-ahead log at open', () => {
  /** A data directory as format 1 left it: entries 6..20 (compacted to 5), a snapshot at 8 (test/fixtures/leveldb). */
  async function formatOne(): Promise<string> {
    const dir = await tempDir();
    execFileSync('tar', ['xzf', new URL('../fixtures/leveldb/format1.tar.gz', import.meta.url).pathname, '-C', dir]);
    return dir;
  }

  const expected = {
    firstIndex: 6, lastIndex: 20, hardState: hs(2, 18, 'a'),
    snapshot: { meta: { index: 8, term: 1, confState: conf(['a']) }, data: bytes(8, 8, 8) },
  };

  it('serves the same log, keeps the metadata, and sets the LevelDB directory aside', async () => {
    const dir = await formatOne();
    const s = await openStorage(dir);
    const moved = dump(s);
    expect(moved).toMatchObject(expected);
    expect(moved.entries.map((e) => [e.index, e.term])).toEqual([...run(6, 10, 1), ...run(11, 20, 2)].map((e) => [e.index, e.term]));
    expect(await s.getMeta('identity')).toEqual({ id: 'n1' });
    await s.close();
    expect(existsSync(join(dir, 'log'))).toBe(false);
    expect(existsSync(join(dir, 'log.moved', 'CURRENT'))).toBe(true);
    await withKeys(dir, async (keys) => {
      expect(keys.get(formatKey)).toEqual(seal({ format: 3 }));
      expect(keys.get(Buffer.from('hs'))).toBeUndefined();
    });
    expect(dump(await openStorage(dir))).toEqual(moved);
  });

  it('a move cut short by a crash (write-ahead log written, key file not) is done again', async () => {
    const dir = await formatOne();
    const original = await tempDir();
    await cp(dir, original, { recursive: true });
    const s = await openStorage(dir);
    const moved = dump(s);
    await s.close();
    // The crash: the new write-ahead log is on disk, LevelDB still says format 1.
    await rm(join(original, 'wal'), { recursive: true, force: true });
    await cp(join(dir, 'wal'), join(original, 'wal'), { recursive: true });
    await appendToWal(original, Buffer.from('half a record'));
    expect(dump(await openStorage(original))).toEqual(moved);
  });

  it('a move cut short after the key file (LevelDB not renamed yet) only renames it, beside an earlier one', async () => {
    const dir = await formatOne();
    const original = await tempDir();
    await cp(dir, original, { recursive: true });
    const s = await openStorage(dir);
    const moved = dump(s);
    await s.putMeta('identity', { id: 'changed after the move' });
    await s.close();
    await cp(join(original, 'log'), join(dir, 'log'), { recursive: true });
    const logged: string[] = [];
    const again = await openStorage(dir, { logger: { debug: () => {}, info: (m) => logged.push(m), warn: (m) => logged.push(m) } });
    expect(dump(again)).toEqual(moved);
    expect(await again.getMeta('identity')).toEqual({ id: 'changed after the move' }); // the key file wins
    await again.close();
    expect(logged.join('\n')).toMatch(/renamed the LevelDB directory .*\/log to .*\/log\.moved-2 \(its log and keys were moved\)/);
    expect(logged.join('\n')).not.toMatch(/moved \d+ keys/);
    expect((await readdir(dir)).filter((n) => n.startsWith('log'))).toEqual(['log.id', 'log.moved', 'log.moved-2']);
  });
});

describe('storage format 2 (segments that end with their records) becomes format 3 at open', () => {
  /** A data directory as format 2 left it: one segment of version 1, as long as its records. */
  async function formatTwo(): Promise<{ dir: string; before: ReturnType<typeof dump> }> {
    const dir = await prepared([15]);
    const s = await openStorage(dir);
    const before = dump(s);
    await s.close();
    const path = segPath(dir);
    const b = (await readFile(path)).subarray(0, await recordsEnd(path));
    b.writeUInt32BE(1, 8);
    await writeFile(path, b);
    await withKeys(dir, (keys) => keys.put([[formatKey, seal({ format: 2 })]]));
    return { dir, before };
  }

  it('reads the old segment, stamps format 3 before writing, and writes from then on in a new, preallocated segment', async () => {
    const { dir, before } = await formatTwo();
    const logged: string[] = [];
    const s = await openStorage(dir, { logger: { debug: () => {}, info: (m) => logged.push(m), warn: (m) => logged.push(`warn: ${m}`) } });
    expect(logged.join('\n')).toMatch(/storage format 2 to 3 .*: new write-ahead log segments are preallocated/);
    expect(logged.join('\n')).not.toMatch(/warn:/);
    expect(dump(s)).toEqual(before);
    expect(s.walSegments()).toEqual(['seg-0000000000000001.wal', 'seg-0000000000000002.wal']);
    const old = await readFile(segPath(dir, 1));
    expect(old.readUInt32BE(8)).toBe(1);
    expect(old.length).toBe(await recordsEnd(segPath(dir, 1))); // left as it was

    await s.save({ entries: run(21, 22, 2), hardState: hs(2, 22) });
    const after = dump(s);
    await s.close();
    const second = await readFile(segPath(dir, 2));
    expect(second.readUInt32BE(8)).toBe(2);
    expect(second.length).toBeGreaterThan(await recordsEnd(segPath(dir, 2)));
    await withKeys(dir, async (keys) => expect(keys.get(formatKey)).toEqual(seal({ format: 3 })));
    expect(dump(await openStorage(dir))).toEqual(after);
  });
});
