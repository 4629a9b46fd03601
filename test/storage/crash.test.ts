// Crashes. What survives a crash is what was on the disk at that instant: every write that was
// fsynced, plus any part of what was written after the last fsync. We emulate that honestly,
// without a fault-injecting file system:
//
// - the directory is copied while the storage still has it open (no clean close), which is the
//   disk's content at that instant;
// - every write is one record written after the last one in the last write-ahead log segment
//   (wal/), which is kept extended with zeros ahead of its records, and a synced one is
//   fdatasynced before save() resolves. A crash can only lose bytes written after the last sync,
//   and a disk writes them a sector at a time, in any order. So an image whose sectors since
//   the last sync are each taken from either the newer copy or the copy at the last sync is a
//   crash that could really happen. We take several such mixes, and also cut the file short (an
//   extension of the file that never reached the disk).
//
// The storage must then come back with exactly the synced prefix: never half a batch.

import { readFile, readdir, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Entry } from '../../src/raft/types.ts';
import { SnapshotDir } from '../../src/storage/snapshot-dir.ts';
import { bytes, conf, copyDir, dump, hs, normal, openStorage, recordsEnd, run, tempDir } from './helpers.ts';

const sector = 512;

async function writeAheadLog(dir: string): Promise<{ path: string; bytes: number }> {
  const names = (await readdir(join(dir, 'wal'))).filter((n) => /^seg-\d+\.wal$/.test(n));
  expect(names).toHaveLength(1);
  const path = join(dir, 'wal', names[0] as string);
  return { path, bytes: await recordsEnd(path) };
}

/**
 * A copy of `image` crashed after the sync that left `atSync`: of the sectors holding bytes
 * [from, to) of its segment, those `landed` says are as in the image, the others as at the sync.
 */
async function crashImage(image: string, atSync: string, from: number, to: number, landed: (k: number) => boolean): Promise<string> {
  const crashed = await copyDir(image);
  const wal = await writeAheadLog(crashed);
  const old = await readFile((await writeAheadLog(atSync)).path);
  const mixed = await readFile(wal.path);
  expect(old.length).toBe(mixed.length); // the extension was synced with the segment
  for (let k = Math.floor(from / sector); k * sector < to; k++) {
    if (!landed(k)) old.copy(mixed, k * sector, k * sector, (k + 1) * sector);
  }
  await writeFile(wal.path, mixed);
  return crashed;
}

/** Entries of one term, each long enough that a few of them fill a sector. */
function long(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(normal(i, term, `entry ${i}@${term} `.padEnd(300, '.')));
  return out;
}

describe('crash recovery', () => {
  it('after losing any part of the unsynced tail, serves exactly the synced prefix and nothing partial', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 3, 1), hardState: hs(1, 1) });
    await s.save({ entries: run(4, 5, 1), hardState: hs(1, 3) });
    const synced = dump(s);
    const atSync = await copyDir(dir);
    const atSyncBytes = (await writeAheadLog(atSync)).bytes;

    // The last batch both overwrites a suffix and extends the log, and is not synced.
    await s.save({ entries: long(4, 9, 2), hardState: hs(2, 3, 'a') }, { sync: false });
    const unsynced = dump(s);
    const image = await copyDir(dir);
    const full = await writeAheadLog(image);
    const first = Math.floor(atSyncBytes / sector);
    const last = Math.ceil(full.bytes / sector) - 1;
    expect(last - first).toBeGreaterThanOrEqual(3);

    const landed: [string, (k: number) => boolean][] = [
      ['no sector', () => false],
      ['only the first sector', (k) => k === first],
      ['all but the first sector', (k) => k !== first],
      ['all but the last sector', (k) => k !== last],
      ['every other sector', (k) => (k - first) % 2 === 0],
      ['all but one in the middle', (k) => k !== first + 1],
    ];
    for (const [name, pattern] of landed) {
      const crashed = await crashImage(image, atSync, atSyncBytes, full.bytes, pattern);
      expect(dump(await openStorage(crashed)), `${name} of the last write reached the disk`).toEqual(synced);
    }
    const tail = full.bytes - atSyncBytes;
    for (const lost of [tail, tail - 1, Math.floor(tail / 2), 7, 1]) {
      const crashed = await copyDir(image);
      await truncate((await writeAheadLog(crashed)).path, full.bytes - lost);
      expect(dump(await openStorage(crashed)), `the file cut ${lost} bytes short of the last write's end`).toEqual(synced);
    }
    // Nothing lost: the unsynced write is whole too.
    expect(dump(await openStorage(await copyDir(image)))).toEqual(unsynced);
  });

  it('appends after a cut-off torn write, over whatever the crash left after it, and the next start reads both', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 3, 1), hardState: hs(1, 3) });
    const atSync = await copyDir(dir);
    const atSyncBytes = (await writeAheadLog(atSync)).bytes;
    await s.save({ entries: long(4, 6, 1), hardState: hs(1, 3) }, { sync: false });
    const between = (await writeAheadLog(await copyDir(dir))).bytes;
    await s.save({ entries: long(7, 9, 1), hardState: hs(1, 3) }, { sync: false });
    const image = await copyDir(dir);
    const end = (await writeAheadLog(image)).bytes;
    // The first unsynced write never reached the disk; the one after it did, whole.
    const crashed = await crashImage(image, atSync, atSyncBytes, end, (k) => k * sector >= between);
    expect(Math.floor(between / sector)).toBeGreaterThan(Math.floor(atSyncBytes / sector));
    const warnings: string[] = [];
    const again = await openStorage(crashed, { logger: { debug: () => {}, info: () => {}, warn: (m) => warnings.push(m) } });
    expect(again.lastIndex()).toBe(3);
    expect(warnings.join()).toMatch(/cut an unfinished write off the end of the write-ahead log/);
    // A shorter write than the two lost ones: the start after it must not read their remains.
    await again.save({ entries: run(4, 5, 2), hardState: hs(2, 5) });
    const before = dump(again);
    await again.close();
    const later: string[] = [];
    expect(dump(await openStorage(crashed, { logger: { debug: () => {}, info: () => {}, warn: (m) => later.push(m) } }))).toEqual(before);
    expect(later, 'the second start finds nothing to cut off').toEqual([]);
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
