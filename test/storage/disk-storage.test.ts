// DiskStorage keeps its cache equal to what a restart loads: every test writes, compares what
// the storage serves, reopens the directory and compares again.

import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { SnapshotUnavailableError } from '../../src/raft/storage.ts';
import type { Entry } from '../../src/raft/types.ts';
import type { SyncSample } from '../../src/storage/index.ts';
import { bytes, conf, dump, hs, normal, openStorage, recordsEnd, run, tempDir } from './helpers.ts';

async function reopen(dir: string, s: { close(): Promise<void> }) {
  await s.close();
  return openStorage(dir);
}

describe('DiskStorage', () => {
  it('opens an empty directory as an empty log, and reopens it the same', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    const empty = dump(s);
    expect(empty).toMatchObject({ firstIndex: 1, lastIndex: 0, entries: [], hardState: hs(0, 0) });
    expect(empty.snapshot.meta.index).toBe(0);
    expect(dump(await reopen(dir, s))).toEqual(empty);
    expect((await readdir(dir)).sort()).toEqual(['log.id', 'snapshots', 'storage.keys', 'storage.lock', 'wal']);
  });

  it('serves after a restart exactly the entries, terms and hard state it saved', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 5, 1), hardState: hs(1, 2, 'a') });
    const confEntry: Entry = { kind: 'conf', index: 6, term: 2, change: { changes: [{ type: 'addLearner', node: 'd' }], context: 'addr' } };
    await s.save({ entries: [confEntry, normal(7, 2, ''), normal(8, 2)], hardState: hs(2, 7, 'b') });
    const before = dump(s);
    expect(before).toMatchObject({ firstIndex: 1, lastIndex: 8, hardState: hs(2, 7, 'b'), terms: [0, 1, 1, 1, 1, 1, 2, 2, 2] });

    const after = await reopen(dir, s);
    expect(dump(after)).toEqual(before);
    expect(after.initialState()).toEqual({ hardState: hs(2, 7, 'b'), confState: conf([]) });
    // Entry payloads come back as plain Uint8Arrays, not Buffers viewing a larger value.
    const data = after.entries(1, 2, Infinity)[0];
    expect(data?.kind === 'normal' && data.data.constructor).toBe(Uint8Array);
  });

  it('truncates a conflicting suffix on disk: no stale entry survives a restart', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 10, 1), hardState: hs(1, 4) });
    // A new leader of term 2 overwrites from index 6 with a shorter log.
    await s.save({ entries: run(6, 7, 2), hardState: hs(2, 4) });
    expect(s.lastIndex()).toBe(7);
    const before = dump(s);

    const after = await reopen(dir, s);
    expect(dump(after)).toEqual(before);
    expect(after.lastIndex()).toBe(7);
    expect(after.entries(5, 8, Infinity).map((e) => [e.index, e.term])).toEqual([[5, 1], [6, 2], [7, 2]]);
    // Appending after the restart continues from the truncated end, not the stale one.
    await after.save({ entries: [normal(8, 2)] });
    expect(dump(await reopen(dir, after)).terms.slice(-3)).toEqual([2, 2, 2]);
  });

  it('does not hold the log writes behind a snapshot file being written', async () => {
    // A snapshot is megabytes; the Ready loop's writes must not wait for its file and fsync
    // (tens of ms, every snapshotEntries entries, on every node at once).
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 20, 1), hardState: hs(1, 18) });
    const done: string[] = [];
    const big = new Uint8Array(8 << 20).fill(7);
    const snapshot = s.createSnapshot(15, conf(['a', 'b', 'c']), big).then(() => done.push('snapshot'));
    await s.save({ entries: run(21, 22, 1), hardState: hs(1, 20) }, { sync: false });
    done.push('save');
    await snapshot;
    expect(done).toEqual(['save', 'snapshot']);
    expect(s.snapshot().meta.index).toBe(15);
    // The snapshot's 8 MB are compared as bytes: a deep equality of them takes a minute.
    const { snapshot: snapBefore, ...before } = dump(s);
    expect(before.lastIndex).toBe(22);
    const { snapshot: snapAfter, ...after } = dump(await reopen(dir, s));
    expect(after).toEqual(before);
    expect(snapAfter.meta).toEqual(snapBefore.meta);
    expect(Buffer.from(snapAfter.data).equals(Buffer.from(big))).toBe(true);
  });

  it('keeps a snapshot and a compacted log across a restart', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 20, 1), hardState: hs(1, 18) });
    const data = bytes(9, 8, 7, 6);
    await s.createSnapshot(15, conf(['a', 'b', 'c']), data);
    await s.compact(10); // a tail of entries is kept below the snapshot for slow followers
    expect(s.firstIndex()).toBe(11);
    expect(s.snapshot()).toEqual({ meta: { index: 15, term: 1, confState: conf(['a', 'b', 'c']) }, data });
    const before = dump(s);

    const after = await reopen(dir, s);
    expect(dump(after)).toEqual(before);
    expect(after.term(10)).toBe(1); // the compaction point still answers term()
    await after.compact(15);
    const compacted = dump(after);
    expect(compacted.firstIndex).toBe(16);
    expect(dump(await reopen(dir, after))).toEqual(compacted);
  });

  it('lets the snapshot\'s bytes leave memory once unused, and reads them back from its file when asked', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir, { snapshotDataKeepMs: 20 });
    await s.save({ entries: run(1, 20, 1), hardState: hs(1, 18) });
    const data = bytes(...Array.from({ length: 64 }, (_, i) => i));
    await s.createSnapshot(15, conf(['a', 'b', 'c']), data);
    expect(s.snapshotDataResident).toBe(true);
    await vi.waitFor(() => expect(s.snapshotDataResident).toBe(false), { timeout: 5000, interval: 10 });
    // Meanwhile the core is told to try again later, as while any snapshot is being prepared.
    expect(() => s.snapshot()).toThrow(SnapshotUnavailableError);
    const back = await vi.waitFor(() => s.snapshot(), { timeout: 5000, interval: 10 });
    expect(back).toEqual({ meta: { index: 15, term: 1, confState: conf(['a', 'b', 'c']) }, data });
    // An installed snapshot is released the same way; the next one replaces it whole.
    const snap = { meta: { index: 50, term: 3, confState: conf(['a', 'b']) }, data: bytes(1, 2, 3) };
    await s.save({ snapshot: snap, entries: run(51, 52, 3), hardState: hs(3, 50) });
    await vi.waitFor(() => expect(s.snapshotDataResident).toBe(false), { timeout: 5000, interval: 10 });
    expect(await vi.waitFor(() => s.snapshot(), { timeout: 5000, interval: 10 })).toEqual(snap);
    // With a negative snapshotDataKeepMs the bytes stay.
    const kept = await openStorage(await tempDir(), { snapshotDataKeepMs: -1 });
    await kept.save({ entries: run(1, 5, 1), hardState: hs(1, 5) });
    await kept.createSnapshot(5, conf(['a']), data);
    await new Promise((r) => setTimeout(r, 50));
    expect(kept.snapshotDataResident).toBe(true);
  });

  it('installs a snapshot received from the leader, replacing the whole log', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 5, 1), hardState: hs(1, 3) });
    const snap = { meta: { index: 50, term: 3, confState: conf(['a', 'b']) }, data: bytes(1, 2, 3) };
    await s.save({ snapshot: snap, entries: run(51, 52, 3), hardState: hs(3, 50) });
    expect(dump(s)).toMatchObject({ firstIndex: 51, lastIndex: 52, snapshot: snap, hardState: hs(3, 50) });
    const before = dump(s);

    const after = await reopen(dir, s);
    expect(dump(after)).toEqual(before);
    expect(after.initialState().confState).toEqual(conf(['a', 'b']));
    // An older snapshot arriving late is ignored, as MemoryStorage ignores it.
    await after.save({ snapshot: { ...snap, meta: { ...snap.meta, index: 40 } }, entries: [] });
    expect(dump(after)).toEqual(before);
  });

  it('bootstraps from a snapshot at index 1, as a founding member does', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: [], hardState: hs(1, 1), snapshot: { meta: { index: 1, term: 1, confState: conf(['a']) }, data: bytes(1) } });
    const after = await reopen(dir, s);
    expect(dump(after)).toMatchObject({ firstIndex: 2, lastIndex: 1, hardState: hs(1, 1), terms: [1] });
  });

  it('keeps the newest two snapshot files', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 30, 1), hardState: hs(1, 30) });
    for (const i of [5, 10, 15, 20]) await s.createSnapshot(i, conf(['a']), bytes(i));
    await s.createSnapshot(20, conf(['a']), bytes(99)); // not newer: ignored
    expect((await readdir(join(dir, 'snapshots'))).sort()).toEqual(['snap-0000000000000015.snap', 'snap-0000000000000020.snap']);
    expect(s.snapshot().data).toEqual(bytes(20));
  });

  it('stores node metadata durably and checks it with a schema on the way back', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    const identity = { id: 'n1', clusterId: 'c1', joinedAt: 12, key: bytes(1, 2) };
    await s.putMeta('identity', identity);
    const after = await reopen(dir, s);
    expect(await after.getMeta('missing')).toBeUndefined();
    const schema = z.object({ id: z.string(), clusterId: z.string(), joinedAt: z.number(), key: z.instanceof(Uint8Array) });
    expect(await after.getMeta('identity', schema)).toEqual({ ...identity, key: Buffer.from([1, 2]) });
    await expect(after.getMeta('identity', z.object({ id: z.number() }))).rejects.toThrow(/'m\/identity' record is not valid/);
    await expect(after.putMeta('', 1)).rejects.toThrow(RangeError);
  });

  it('reports the latency of every durable write', async () => {
    const dir = await tempDir();
    const samples: SyncSample[] = [];
    const s = await openStorage(dir, { onSync: (ms, sample) => { expect(ms).toBeGreaterThanOrEqual(0); samples.push(sample); } });
    await s.save({ entries: run(1, 3, 1), hardState: hs(1, 1) });
    await s.save({ entries: [], hardState: hs(1, 2) }, { sync: false });
    await s.save({ entries: [] }); // nothing to write: no batch, no sample
    await s.createSnapshot(2, conf(['a']), bytes(1));
    await s.compact(1);
    expect(samples.map((x) => [x.op, x.sync])).toEqual([
      ['save', true], ['save', false], ['snapshotFile', true], ['snapshotRecord', true], ['compact', false],
    ]);
  });

  it('starts new write-ahead log segments as they fill, and deletes those holding only compacted entries', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir, { segmentBytes: 512 });
    for (let i = 1; i <= 60; i += 5) await s.save({ entries: run(i, i + 4, 1), hardState: hs(1, i + 4) });
    const segments = s.walSegments();
    expect(segments.length).toBeGreaterThan(3);
    expect((await readdir(join(dir, 'wal'))).sort()).toEqual(segments);
    await s.createSnapshot(40, conf(['a']), bytes(40));
    await s.compact(10);
    const afterSmall = s.walSegments();
    expect(afterSmall[0]).not.toBe(segments[0]); // the first segments held only entries up to 10
    await s.compact(40);
    const left = s.walSegments();
    expect(left.length).toBeLessThan(afterSmall.length);
    expect((await readdir(join(dir, 'wal'))).sort()).toEqual(left);
    const before = dump(s);
    expect(before).toMatchObject({ firstIndex: 41, lastIndex: 60 });
    // The oldest segment left starts after deleted entries: its state record carries the rest.
    const after = await reopen(dir, s);
    expect(dump(after)).toEqual(before);
    await after.save({ entries: run(61, 62, 2), hardState: hs(2, 62) });
    expect(dump(await reopen(dir, after))).toMatchObject({ firstIndex: 41, lastIndex: 62, hardState: hs(2, 62) });
  });

  it('keeps the segment it writes extended with zeros ahead of its records, a step at a time, without filling the disk', async () => {
    const dir = await tempDir();
    const step = 1024;
    const s = await openStorage(dir, { preallocateBytes: step });
    const path = join(dir, 'wal', 'seg-0000000000000001.wal');
    const lengths = new Set<number>();
    for (let i = 1; i <= 100; i += 2) {
      await s.save({ entries: run(i, i + 1, 1), hardState: hs(1, i + 1) });
      const [length, end] = [(await stat(path)).size, await recordsEnd(path)];
      expect(length - end, `after entry ${i + 1}`).toBeGreaterThan(0);
      expect(length - end).toBeLessThanOrEqual(step);
      lengths.add(length);
    }
    expect(await recordsEnd(path)).toBeGreaterThan(3 * step);
    expect(lengths.size, 'extended every few writes, not every write').toBeLessThan(25);
    expect(lengths.size).toBeGreaterThan(2);
    const before = dump(s);
    expect(dump(await reopen(dir, s))).toEqual(before);

    // The default step, 4 MiB, takes no disk space until it is written.
    const big = await tempDir();
    const b = await openStorage(big);
    await b.save({ entries: run(1, 2, 1), hardState: hs(1, 2) });
    const file = await stat(join(big, 'wal', 'seg-0000000000000001.wal'));
    expect(file.size).toBeGreaterThan(4 * 1024 * 1024);
    expect(file.blocks * 512).toBeLessThan(1024 * 1024);
    // Zeros are written a chunk ahead of the records, so that their blocks are allocated once.
    expect(file.blocks * 512).toBeGreaterThanOrEqual(64 * 1024);
  });

  it('runs concurrent writes in call order', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await Promise.all([
      s.save({ entries: run(1, 10, 1), hardState: hs(1, 8) }),
      s.createSnapshot(8, conf(['a']), bytes(8)),
      s.compact(6),
      s.save({ entries: run(9, 12, 2), hardState: hs(2, 8) }),
      s.putMeta('k', 'v'),
    ]);
    const before = dump(s);
    expect(before).toMatchObject({ firstIndex: 7, lastIndex: 12 });
    expect(await s.getMeta('k')).toBe('v');
    expect(dump(await reopen(dir, s))).toEqual(before);
  });

  it('close is idempotent and refuses writes afterwards; reads still answer from the cache', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 2, 1), hardState: hs(1, 1) });
    await Promise.all([s.close(), s.close()]);
    await s.close();
    await expect(s.save({ entries: [normal(3, 1)] })).rejects.toThrow(/closed/);
    await expect(s.getMeta('k')).rejects.toThrow(/closed/);
    expect(s.lastIndex()).toBe(2);
  });

  it('refuses every write after one failed, until the node restarts', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 5, 1), hardState: hs(1, 5) });
    await rm(join(dir, 'snapshots'), { recursive: true }); // the snapshot file cannot be written
    await expect(s.createSnapshot(3, conf(['a']), bytes(3))).rejects.toThrow(/ENOENT/);
    await expect(s.save({ entries: [normal(6, 1)] })).rejects.toThrow(/earlier write .* failed; restart/);
    expect(s.lastIndex()).toBe(5);
  });

  it('rejects writes that would break the log (programmer errors)', async () => {
    const dir = await tempDir();
    const s = await openStorage(dir);
    await s.save({ entries: run(1, 3, 1), hardState: hs(1, 3) });
    await expect(s.compact(2)).rejects.toThrow(/past the snapshot/);
    const other = await openStorage(await tempDir());
    await other.save({ entries: run(1, 3, 1), hardState: hs(1, 3) });
    await expect(other.save({ entries: [normal(5, 1)] })).rejects.toThrow(/gap/);
    const third = await openStorage(await tempDir());
    await expect(third.save({ entries: [normal(1, 1)], hardState: hs(1, 2) })).rejects.toThrow(/commit 2 beyond last index 1/);
  });
});
