import { describe, expect, it } from 'vitest';
import { isShoalError } from '../../src/errors.ts';
import { feeder } from './harness.ts';

function ids(items: { id: string }[]): string[] {
  return items.map((d) => d.id);
}

describe('list', () => {
  it('pages in id order with after and next, at the store revision', () => {
    const f = feeder();
    for (const id of ['c', 'a', 'e', 'b', 'd']) f.put('nodes', id, { id });
    f.put('other', 'a', {});
    const p1 = f.store.list('nodes', { limit: 2 });
    expect(ids(p1.items)).toEqual(['a', 'b']);
    expect(p1).toMatchObject({ rev: 6, next: 'b' });
    const p2 = f.store.list('nodes', { limit: 2, after: 'b' });
    expect(ids(p2.items)).toEqual(['c', 'd']);
    const p3 = f.store.list('nodes', { limit: 2, after: p2.next ?? '' });
    expect(ids(p3.items)).toEqual(['e']);
    expect(p3.next).toBeNull();
    expect(f.store.list('nodes', { limit: 5 }).next).toBeNull();
  });

  it('filters by id prefix, with after inside, before and beyond the prefix range', () => {
    const f = feeder();
    for (const id of ['a', 'svc-1', 'svc-2', 'svc-3', 'svd', 'z']) f.put('c', id, {});
    expect(ids(f.store.list('c', { prefix: 'svc-' }).items)).toEqual(['svc-1', 'svc-2', 'svc-3']);
    expect(ids(f.store.list('c', { prefix: 'svc-', after: 'svc-1' }).items)).toEqual(['svc-2', 'svc-3']);
    expect(ids(f.store.list('c', { prefix: 'svc-', after: 'a' }).items)).toEqual(['svc-1', 'svc-2', 'svc-3']);
    expect(ids(f.store.list('c', { prefix: 'svc-', after: 'svc-9' }).items)).toEqual([]);
    const page = f.store.list('c', { prefix: 'svc-', limit: 3 });
    expect(page.next).toBeNull();
  });

  it('an unknown collection is an empty page', () => {
    const f = feeder();
    expect(f.store.list('nothing')).toEqual({ items: [], rev: 0, next: null });
  });

  it('defaults to 100, clamps to 1000, refuses limits below 1', () => {
    const f = feeder();
    const docs = Array.from({ length: 1200 }, (_, i) => `d${String(i).padStart(5, '0')}`);
    for (let i = 0; i < docs.length; i += 100) {
      f.cmd({ op: 'txn', compare: [], success: docs.slice(i, i + 100).map((id) => ({ op: 'put' as const, collection: 'big', id, doc: {} })), failure: [] });
    }
    expect(f.store.list('big').items).toHaveLength(100);
    expect(f.store.list('big', { limit: 5000 }).items).toHaveLength(1000);
    expect(() => f.store.list('big', { limit: 0 })).toThrow(/invalid list arguments/);
    expect(() => f.store.list('big', { limit: 1.5 })).toThrow();
  });

  it('refuses invalid collection names and ids on reads with bad_request', () => {
    const f = feeder();
    for (const call of [
      () => f.store.list('Bad'), () => f.store.get('ok', 'a/b'), () => f.store.get('ok', ''), () => f.store.get('-x', 'a'),
      () => f.store.get('ok', 'a\nb'), () => f.store.list('ok', { prefix: 'a\u0000' }), () => f.store.list('ok', { after: 'x/y' }),
      () => f.store.list('ok', { prefix: '\ud800' }), () => f.store.eventsSince(0, { prefix: 'a\u007f' }),
    ]) {
      try {
        call();
        expect.fail('should throw');
      } catch (err) {
        expect(isShoalError(err) && err.code).toBe('bad_request');
      }
    }
  });

  it('stays fast with 100,000 documents while writes and pages interleave', () => {
    const f = feeder();
    let seed = 7;
    const rand = (): string => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed.toString(36);
    };
    for (let i = 0; i < 1000; i++) {
      f.cmd({ op: 'txn', compare: [], success: Array.from({ length: 100 }, () => ({ op: 'put' as const, collection: 'many', id: rand(), doc: { i } })), failure: [] });
    }
    expect(f.store.stats().documents).toBeGreaterThan(99_000);
    const start = performance.now();
    for (let i = 0; i < 1000; i++) {
      f.put('many', rand(), {});
      const page = f.store.list('many', { limit: 100, after: rand() });
      expect(page.items.length).toBeLessThanOrEqual(100);
    }
    // Sorting 100k ids per list would take over a minute here; the chunked index takes well under a second.
    expect(performance.now() - start).toBeLessThan(5000);
    const all: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = f.store.list('many', { limit: 1000, ...(after !== undefined ? { after } : {}) });
      all.push(...ids(page.items));
      if (page.next === null) break;
      after = page.next;
    }
    expect(all).toEqual([...all].sort());
    expect(all).toHaveLength(f.store.stats().documents);
  });
});
