import { describe, expect, it } from 'vitest';
import { feeder, ok } from './harness.ts';

describe('retain', () => {
  it('deletes every document of the collection not in ids, one event each, in id order', () => {
    const f = feeder();
    for (const id of ['d', 'a', 'c', 'b']) f.put('nodes', id, {});
    f.put('other', 'a', {});
    const seen: string[] = [];
    f.store.subscribe((ev) => seen.push(`${ev.type}:${ev.collection}/${ev.id}@${ev.rev}:${ev.prevRev}`));
    const r = ok(f.cmd({ op: 'retain', collection: 'nodes', ids: ['b', 'zzz', 'b'] }));
    expect(r).toEqual({ ok: true, kind: 'retain', deleted: ['a', 'c', 'd'], rev: 6 });
    expect(seen).toEqual(['delete:nodes/a@6:2', 'delete:nodes/c@6:3', 'delete:nodes/d@6:1']);
    expect(f.store.list('nodes').items.map((d) => d.id)).toEqual(['b']);
    expect(f.store.get('other', 'a')).toBeDefined();
  });

  it('with no ids empties the collection; of an unknown collection deletes nothing', () => {
    const f = feeder();
    f.put('nodes', 'a', {});
    expect(ok(f.cmd({ op: 'retain', collection: 'nodes', ids: [] }))).toMatchObject({ deleted: ['a'] });
    expect(f.store.stats()).toMatchObject({ documents: 0, collections: 0 });
    expect(ok(f.cmd({ op: 'retain', collection: 'nothing', ids: [] }))).toMatchObject({ deleted: [], rev: 3 });
  });
});
