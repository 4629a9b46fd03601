// DiskStorage against its model: a MemoryStorage given the same writes. A seeded random walk of
// appends (with truncations), hard states, local snapshots, compactions and received snapshots,
// restarting the storage now and then; after every step the disk-backed storage must serve
// exactly what the model serves. A failure prints its seed.

import { describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import { MemoryStorage } from '../../src/raft/storage.ts';
import type { HardState } from '../../src/raft/types.ts';
import type { DiskStorage } from '../../src/storage/index.ts';
import { bytes, conf, dump, openStorage, run, tempDir } from './helpers.ts';

function modelDump(m: MemoryStorage): ReturnType<typeof dump> {
  return dump({
    initialState: () => m.initialState(),
    entries: (lo, hi, max) => m.entries(lo, hi, max),
    term: (i) => m.term(i),
    firstIndex: () => m.firstIndex(),
    lastIndex: () => m.lastIndex(),
    snapshot: () => m.snapshot(),
    hardState: () => m.hardStateNow(),
  });
}

class Walk {
  term = 1;
  commit = 0;
  constructor(readonly rng: SeededPrng, readonly model: MemoryStorage) {}

  pick(lo: number, hi: number): number {
    return lo + this.rng.nextInt(hi - lo + 1);
  }

  /** Entries from a start after the commit index, sometimes of a new term (a new leader). */
  append(): { entries: ReturnType<typeof run>; hardState: HardState } {
    const m = this.model;
    if (this.rng.nextInt(4) === 0) this.term++;
    const start = this.pick(Math.max(this.commit, m.firstIndex() - 1) + 1, m.lastIndex() + 1);
    const entries = run(start, start + this.rng.nextInt(6), this.term);
    const last = start + entries.length - 1;
    this.commit = this.pick(this.commit, Math.min(last, this.commit + 4));
    return { entries, hardState: { term: this.term, vote: 'a', commit: this.commit } };
  }
}

type Kind = 'append' | 'snapshot' | 'compact' | 'install' | 'none';

async function step(w: Walk, s: DiskStorage): Promise<Kind> {
  const m = w.model;
  const choice = w.rng.nextInt(10);
  if (choice < 6 || m.lastIndex() === 0) {
    const rd = w.append();
    await s.save(rd, { sync: w.rng.nextInt(2) === 0 });
    m.append(rd.entries);
    m.setHardState(rd.hardState);
    return 'append';
  } else if (choice < 8 && w.commit > m.snapshot().meta.index) {
    const index = w.pick(m.snapshot().meta.index + 1, w.commit);
    await s.createSnapshot(index, conf(['a']), bytes(index & 0xff));
    m.createSnapshot(index, conf(['a']), bytes(index & 0xff));
    return 'snapshot';
  } else if (choice < 9 && m.snapshot().meta.index >= m.firstIndex()) {
    const index = w.pick(m.firstIndex(), m.snapshot().meta.index);
    await s.compact(index);
    m.compact(index);
    return 'compact';
  } else if (choice === 9) {
    w.term++;
    const index = m.lastIndex() + w.pick(1, 5);
    w.commit = index;
    const rd = { snapshot: { meta: { index, term: w.term, confState: conf(['a', 'b']) }, data: bytes(1, index & 0xff) }, entries: [], hardState: { term: w.term, vote: '', commit: index } };
    await s.save(rd);
    m.applySnapshot(rd.snapshot);
    m.setHardState(rd.hardState);
    return 'install';
  }
  return 'none';
}

describe('DiskStorage against MemoryStorage', () => {
  // Seeds 4 to 6 use 512-byte write-ahead log segments, so that most writes start a segment and
  // compactions delete some: a restart then reads a log whose oldest entries were deleted.
  for (const [seed, segmentBytes] of [[1, undefined], [2, undefined], [3, undefined], [4, 512], [5, 512], [6, 512]] as const) {
    it(`serves what the model serves through a random walk with restarts (seed ${seed}${segmentBytes !== undefined ? `, ${segmentBytes}-byte segments` : ''})`, async () => {
      const dir = await tempDir();
      const w = new Walk(new SeededPrng(seed), new MemoryStorage());
      const opts = segmentBytes !== undefined ? { segmentBytes } : {};
      let s = await openStorage(dir, opts);
      const seen = new Map<string, number>();
      const count = (k: string): void => void seen.set(k, (seen.get(k) ?? 0) + 1);
      for (let i = 0; i < 150; i++) {
        count(await step(w, s));
        if (w.rng.nextInt(15) === 0) {
          count('restart');
          await s.close();
          s = await openStorage(dir, opts);
        }
        expect(dump(s), `seed ${seed}, step ${i}`).toEqual(modelDump(w.model));
      }
      // The walk covered every kind of write, and restarts, at least a few times.
      for (const k of ['append', 'snapshot', 'compact', 'install', 'restart']) expect(seen.get(k) ?? 0, k).toBeGreaterThan(2);
      if (segmentBytes !== undefined) expect(Number(s.walSegments()[0]?.slice(4, 20)), 'segments were deleted').toBeGreaterThan(1);
    });
  }
});
