import { describe, expect, it } from 'vitest';
import { SortedIds } from '../../fsm/sorted-ids.ts';
import { SeededPrng } from '../../src/raft/prng.ts';

describe('SortedIds', () => {
  it('agrees with a sorted array under random inserts and deletes', () => {
    const rng = new SeededPrng(9);
    const s = new SortedIds();
    const ref = new Set<string>();
    for (let i = 0; i < 30_000; i++) {
      const id = `k${rng.nextInt(5000).toString(36)}`;
      // Phases: grow, shrink (merges), grow again.
      const del = i % 10_000 > 6000 ? rng.chance(0.8) : rng.chance(0.2);
      if (del) expect(s.delete(id)).toBe(ref.delete(id));
      else {
        expect(s.insert(id)).toBe(!ref.has(id));
        ref.add(id);
      }
      if (i % 1000 === 0) s.check();
    }
    s.check();
    const sorted = [...ref].sort();
    expect([...s]).toEqual(sorted);
    expect(s.size).toBe(sorted.length);
    for (const probe of ['', 'k', 'k5', 'kzz', sorted[17] ?? '']) {
      expect([...s.from(probe, false)]).toEqual(sorted.filter((x) => x > probe));
      expect([...s.from(probe, true)]).toEqual(sorted.filter((x) => x >= probe));
    }
    for (const id of sorted.slice(0, 50)) expect(s.has(id)).toBe(true);
    expect(s.has('nope')).toBe(false);
  });

  it('builds from sorted ids', () => {
    const ids = Array.from({ length: 2000 }, (_, i) => `id${String(i).padStart(5, '0')}`);
    const s = SortedIds.fromSorted(ids);
    s.check();
    expect([...s.from('id01000', false)][0]).toBe('id01001');
    expect(s.insert('id00000x')).toBe(true);
    s.check();
  });
});
