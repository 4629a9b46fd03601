// Crashes. What survives a crash is what was on the disk at that instant: every write that was
// fsynced, plus any prefix of what was written after the last fsync. We emulate that honestly,
// without a fault-injecting file system:
//
// - the directory is copied while the storage still has it open (no clean close), which is the
//   disk's content at that instant;
// - LevelDB appends each batch as one record to its write-ahead log (a *.log file in log/) and a
//   synced batch is fsynced before save() resolves. A crash can only lose bytes of that file
//   after the last fsync, so cutting the copy's write-ahead log anywhere after the size it had
//   at the last synced batch is a crash that could really happen. We cut at several places,
//   including the middle of the last batch's record (a torn write).
//
// The storage must then come back with exactly the synced prefix: never half a batch.

import { readdir, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SnapshotDir } from '../../src/storage/snapshot-dir.ts';
import { bytes, conf, copyDir, dump, hs, openStorage, run, tempDir } from './helpers.ts';

async function writeAheadLog(dir: string): Promise<{ path: string; bytes: number }> {
  const names = (await readdir(join(dir, 'log'))).filter((n) => /^\d+\.log$/.test(n));
  expect(names).toHaveLength(1);
  const path = join(dir, 'log', names[0] as string);
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
    // Nothing lost: the unsynced batch is whole too.
    expect(dump(await openStorage(await copyDir(image)))).toEqual(unsynced);
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
