import { describe, expect, it } from 'vitest';
import { errorOf, feeder, ok } from './harness.ts';

describe('revisions', () => {
  it('rev is the index of the last change, createRev the index of creation', () => {
    const f = feeder();
    const a = ok(f.put('apps', 'web', { image: 'nginx:1' }));
    expect(a).toMatchObject({ kind: 'put', doc: { collection: 'apps', id: 'web', rev: 1, createRev: 1, doc: { image: 'nginx:1' } } });
    f.put('apps', 'db', { image: 'pg' }, undefined);
    const b = ok(f.stamped({ cmd: { op: 'put', collection: 'apps', id: 'web', doc: { image: 'nginx:2' } } }, 3));
    expect(b.kind === 'put' && b.doc).toMatchObject({ rev: 6, createRev: 1 });
    expect(f.store.get('apps', 'web')).toMatchObject({ rev: 6, createRev: 1, doc: { image: 'nginx:2' } });
    expect(f.store.revision).toBe(6);
  });

  it('a re-create after delete gets a new createRev', () => {
    const f = feeder();
    f.put('apps', 'web', { v: 1 });
    expect(ok(f.del('apps', 'web'))).toMatchObject({ kind: 'delete', collection: 'apps', id: 'web', rev: 2 });
    expect(f.store.get('apps', 'web')).toBeUndefined();
    f.put('apps', 'web', { v: 2 });
    expect(f.store.get('apps', 'web')).toMatchObject({ rev: 3, createRev: 3 });
  });

  it('delete of a missing document is not_found and advances only the revision', () => {
    const f = feeder();
    const e = errorOf(f.del('apps', 'ghost'));
    expect(e.code).toBe('not_found');
    expect(e.details).toEqual({ collection: 'apps', id: 'ghost' });
    expect(f.store.revision).toBe(1);
    expect(f.store.stats()).toEqual({ documents: 0, collections: 0, events: 0, idempotencyRecords: 0 });
  });

  it('documents and results are frozen', () => {
    const f = feeder();
    const r = ok(f.put('apps', 'web', { nested: { a: [1, 2] } }));
    const d = f.store.get('apps', 'web');
    expect(Object.isFrozen(r)).toBe(true);
    expect(Object.isFrozen(d)).toBe(true);
    expect(Object.isFrozen((d?.doc as { nested: { a: number[] } }).nested.a)).toBe(true);
  });

  it('refuses entries out of index order (a programmer error)', () => {
    const f = feeder();
    f.put('apps', 'a', {});
    expect(() => f.store.apply({ index: 1, term: 1, data: new Uint8Array() })).toThrow(/index order/);
  });
});

describe('compare-and-set', () => {
  it('two puts expecting the same rev: the first wins, the second is a revision_mismatch', () => {
    const f = feeder();
    f.put('cfg', 'x', { n: 0 });
    ok(f.put('cfg', 'x', { n: 1 }, { rev: 1 }));
    const e = errorOf(f.put('cfg', 'x', { n: 2 }, { rev: 1 }));
    expect(e.code).toBe('revision_mismatch');
    expect(e.details).toEqual({ collection: 'cfg', id: 'x', expectedRev: 1, currentRev: 2 });
    expect(f.store.get('cfg', 'x')?.doc).toEqual({ n: 1 });
  });

  it('expecting a rev of an absent document reports currentRev null', () => {
    const f = feeder();
    const e = errorOf(f.put('cfg', 'x', {}, { rev: 4 }));
    expect(e).toMatchObject({ code: 'revision_mismatch', details: { currentRev: null } });
  });

  it('absent: true creates once, then already_exists', () => {
    const f = feeder();
    ok(f.put('cfg', 'x', { a: 1 }, { absent: true }));
    const e = errorOf(f.put('cfg', 'x', { a: 2 }, { absent: true }));
    expect(e).toMatchObject({ code: 'already_exists', details: { currentRev: 1 } });
    expect(f.store.get('cfg', 'x')?.doc).toEqual({ a: 1 });
  });

  it('delete with an expected rev', () => {
    const f = feeder();
    f.put('cfg', 'x', {});
    f.put('cfg', 'x', {});
    expect(errorOf(f.del('cfg', 'x', { rev: 1 })).code).toBe('revision_mismatch');
    ok(f.del('cfg', 'x', { rev: 2 }));
    expect(f.store.get('cfg', 'x')).toBeUndefined();
  });
});
