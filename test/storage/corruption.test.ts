// Damaged storage is found at open and refused with a StorageCorruptionError that names the
// damaged file and says what to do; the node never starts on a partial or altered log, and a
// refused open changes nothing on disk.

import { ClassicLevel } from 'classic-level';
import { cp, readFile, readdir, rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DiskStorage, StorageCorruptionError, StorageFormatError } from '../../src/storage/index.ts';
import { entryKey, formatKey, hardStateKey } from '../../src/storage/keys.ts';
import { seal } from '../../src/storage/sealed.ts';
import { SnapshotDir } from '../../src/storage/snapshot-dir.ts';
import type { Logger } from '../../src/raft/types.ts';
import { bytes, conf, dump, hs, openStorage, run, tempDir } from './helpers.ts';

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

async function withLevel(dir: string, edit: (db: ClassicLevel<Buffer, Buffer>) => Promise<void>): Promise<void> {
  const db = new ClassicLevel<Buffer, Buffer>(join(dir, 'log'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  try {
    await edit(db);
  } finally {
    await db.close();
  }
}

async function refused(dir: string): Promise<StorageCorruptionError> {
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

const snapPath = (dir: string, index: number): string => join(dir, 'snapshots', new SnapshotDir('').fileName(index));

async function flipByte(path: string, fromEnd: number): Promise<void> {
  const b = await readFile(path);
  const at = b.length - fromEnd;
  b[at] = (b[at] as number) ^ 0xff;
  await writeFile(path, b);
}

describe('corruption is detected at open', () => {
  it('a truncated snapshot file', async () => {
    const dir = await prepared([15], 15);
    const path = snapPath(dir, 15);
    await truncate(path, (await readFile(path)).length - 1);
    const err = await refused(dir);
    expect(err.file).toBe(path);
    expect(err.detail).toMatch(/snapshot 15 is damaged: data is 1 bytes, the header says 2 \(truncated/);
    expect(err.recovery).toContain(`move ${dir} aside`);
  });

  it('a flipped byte in a snapshot file, with no older snapshot to fall back to', async () => {
    const dir = await prepared([15]);
    await flipByte(snapPath(dir, 15), 1);
    const err = await refused(dir);
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
    const err = await refused(dir);
    expect(err.file).toBe(snapPath(dir, 15));
    expect(err.detail).toMatch(/older snapshot 8 cannot stand in for it because the log was compacted through 12/);
    // Refusing changed nothing: the damaged file is where it was.
    expect((await readdir(join(dir, 'snapshots'))).length).toBe(2);
  });

  it('a missing snapshot file', async () => {
    const dir = await prepared([15]);
    await rm(snapPath(dir, 15));
    const err = await refused(dir);
    expect(err.detail).toMatch(/snapshot 15 is damaged: the snapshot file is missing/);
  });

  it('a log entry whose stored checksum does not match', async () => {
    const dir = await prepared([]);
    await withLevel(dir, async (db) => {
      const v = await db.get(entryKey(7));
      if (v === undefined) throw new Error('entry 7 present');
      v[v.length - 1] = (v[v.length - 1] as number) ^ 1;
      await db.put(entryKey(7), v);
    });
    const err = await refused(dir);
    expect(err.file).toBe(join(dir, 'log'));
    expect(err.detail).toMatch(/log entry 7 is damaged: checksum mismatch/);
    expect(err.recovery).toMatch(/join it again .* as a learner/);
  });

  it('a gap in the log', async () => {
    const dir = await prepared([]);
    await withLevel(dir, (db) => db.del(entryKey(12)));
    const err = await refused(dir);
    expect(err.file).toBe(join(dir, 'log'));
    expect(err.detail).toMatch(/gap: entries 12 to 12 are missing/);
  });

  it('an entry stored under another index', async () => {
    const dir = await prepared([]);
    await withLevel(dir, async (db) => {
      const v = await db.get(entryKey(8));
      if (v === undefined) throw new Error('entry 8 present');
      await db.put(entryKey(9), v);
    });
    expect((await refused(dir)).detail).toMatch(/stored under index 9 says it is index 8/);
  });

  it('lost entries at the end of the log, below the commit index', async () => {
    const dir = await prepared([]);
    await withLevel(dir, (db) => db.batch([19, 20].map((i) => ({ type: 'del' as const, key: entryKey(i) }))));
    expect((await refused(dir)).detail).toMatch(/commits index 20 but the log ends at 18/);
  });

  it('a hard state that does not decode', async () => {
    const dir = await prepared([]);
    await withLevel(dir, (db) => db.put(hardStateKey, seal({ term: 'two', commit: 3 })));
    expect((await refused(dir)).detail).toMatch(/'hs' record is not valid/);
  });

  it('a missing log database next to existing snapshots', async () => {
    const dir = await prepared([15]);
    await rm(join(dir, 'log'), { recursive: true });
    const err = await refused(dir);
    expect(err.file).toBe(join(dir, 'log'));
    expect(err.detail).toMatch(/log database is missing but snapshot files exist/);
    expect(await readdir(dir)).not.toContain('log'); // not recreated by the refused open
  });

  it('a log wiped (with its snapshots) under a data directory that had one: the node must not rejoin under its old id', async () => {
    const dir = await prepared([]);
    await rm(join(dir, 'log'), { recursive: true });
    const err = await refused(dir);
    expect(err.file).toBe(join(dir, 'log'));
    expect(err.detail).toMatch(/log is new or was replaced, but .*log\.id shows this node had log/);
    expect(err.recovery).toMatch(/member remove/);
    // Refused every time, not only on the first start after the wipe.
    await refused(dir);
  });

  it('the log of another data directory moved in', async () => {
    const mine = await prepared([]);
    const other = await prepared([]);
    await rm(join(mine, 'log'), { recursive: true });
    await cp(join(other, 'log'), join(mine, 'log'), { recursive: true });
    const err = await refused(mine);
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
    await withLevel(dir, (db) => db.put(formatKey, seal({ format: 2 })));
    await expect(DiskStorage.open(dir)).rejects.toThrow(StorageFormatError);
  });
});
