// Crashes. What survives a crash is what was on the disk at that instant: every write that was
// fsynced, plus any prefix of what was written after the last fsync. We emulate that honestly,
// without a fault-injecting file system:
//
// - the directory is copied while the storage still has it open (no clean close), which is the
//   disk's content at that instant;
// - every write is one record appended to the last write-ahead log segment (wal/), and a synced
//   one is fdatasynced before save() resolves. A crash can only lose bytes of that file after
//   the last sync, so cutting the copy's segment anywhere after the size it had at the last
//   synced write is a crash that could really happen. We cut at several places, including the
//   middle of the last record (a torn write), and zero the end as a disk that grew the file
//   but never wrote its last sectors would.
//
// The storage must then come back with exactly the synced prefix: never half a batch.

import { readFile, readdir, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SnapshotDir } from '../../src/storage/snapshot-dir.ts';
import { bytes, conf, copyDir, dump, hs, openStorage, run, tempDir } from './helpers.ts';

async function writeAheadLog(dir: string): Promise<{ path: string; bytes: number }> {
  const names = (await readdir(join(dir, 'wal'))).filter((n) => /^seg-\d+\.wal$/.test(n));
  expect(names).toHaveLength(1);
  const path = join(dir, 'wal', names[0] as string);
  return { path, bytes: (await stat(path)).size };
}

describe('crash recovery', () => {
  it('after losing the unsynced tail, serves exactly the synced prefix and nothing partial', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 3, 1), hardState: hs(1, 1) });
    await s.save({ entries: run(4, 5, 1), hardState: hs(1, 3) });
    const synced = dump(s);
    const atSync = await writeAheadLog(await copyDir(dir));

    // The last batch both overwrites a suffix and extends the log, and is not synced.
    await s.save({ entries: run(4, 9, 2), hardState: hs(2, 3, 'a') }, { sync: false });
    const unsynced = dump(s);
    const image = await copyDir(dir);
    const full = await writeAheadLog(image);
    expect(full.bytes).toBeGreaterThan(atSync.bytes);

    const tail = full.bytes - atSync.bytes;
    for (const lost of [tail, tail - 1, Math.floor(tail / 2), 7, 1]) {
      const crashed = await copyDir(image);
      const wal = await writeAheadLog(crashed);
      await truncate(wal.path, full.bytes - lost);
      expect(dump(await openStorage(crashed)), `losing the last ${lost} bytes`).toEqual(synced);
    }
    // A file that grew by the last record but whose last sectors never reached the disk.
    const zeroed = await copyDir(image);
    const wal = await writeAheadLog(zeroed);
    const content = await readFile(wal.path);
    const sector = Math.ceil((atSync.bytes + 10) / 512) * 512;
    expect(sector).toBeLessThan(content.length);
    content.fill(0, sector);
    await writeFile(wal.path, content);
    expect(dump(await openStorage(zeroed)), 'zeroed tail').toEqual(synced);
    // Nothing lost: the unsynced write is whole too.
    expect(dump(await openStorage(await copyDir(image)))).toEqual(unsynced);
  });

  it('appends after a cut-off torn write, and the next start reads both', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 3, 1), hardState: hs(1, 3) });
    await s.save({ entries: run(4, 6, 1), hardState: hs(1, 3) }, { sync: false });
    const crashed = await copyDir(dir);
    const wal = await writeAheadLog(crashed);
    await truncate(wal.path, wal.bytes - 5);
    const warnings: string[] = [];
    const again = await openStorage(crashed, { logger: { debug: () => {}, info: () => {}, warn: (m) => warnings.push(m) } });
    expect(again.lastIndex()).toBe(3);
    expect(warnings.join()).toMatch(/cut an unfinished write off the end of the write-ahead log/);
    await again.save({ entries: run(4, 5, 2), hardState: hs(2, 5) });
    const before = dump(again);
    await again.close();
    expect(dump(await openStorage(crashed))).toEqual(before);
  });

  it('keeps every synced batch when the process dies without closing', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 20, 1), hardState: hs(1, 12) });
    await s.createSnapshot(12, conf(['a', 'b', 'c']), bytes(12));
    await s.compact(8);
    await s.save({ entries: run(21, 22, 2), hardState: hs(2, 20) });
    const image = await copyDir(dir); // s is still open: no clean shutdown reached the disk
    expect(dump(await openStorage(image))).toEqual(dump(s));
  });

  it('discards snapshot files of writes that did not complete', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 10, 1), hardState: hs(1, 10) });
    await s.createSnapshot(5, conf(['a']), bytes(5));
    const before = dump(s);
    await s.close();
    const snapshots = new SnapshotDir(join(dir, 'snapshots'));
    // A crash during a write leaves the temporary file; a crash after the file was renamed but
    // before its record reached the level database leaves a whole file nobody refers to.
    await writeFile(join(dir, 'snapshots', `${snapshots.fileName(9)}.tmp`), 'half a snap');
    await snapshots.write({ meta: { index: 8, term: 1, confState: conf(['a']) }, data: bytes(8) });

    const after = await openStorage(dir);
    expect(dump(after)).toEqual(before);
    expect(await readdir(join(dir, 'snapshots'))).toEqual([snapshots.fileName(5)]);
  });
});
