import { describe, expect, it } from 'vitest';
import { CursorExpiredError, type WatchEvent } from '../../fsm/index.ts';
import { isShoalError } from '../../src/errors.ts';
import { feeder, ok } from './harness.ts';

const brief = (ev: WatchEvent): string => `${ev.rev}:${ev.type}:${ev.collection}/${ev.id}`;

describe('watch events', () => {
  it('every change emits one event at the entry index; puts carry the doc and prevRev', () => {
    const f = feeder();
    f.put('a', 'x', { v: 1 });
    f.put('a', 'x', { v: 2 });
    f.del('a', 'x');
    f.del('a', 'x'); // not_found: no event
    const evs = f.store.eventsSince(0, {});
    expect(evs.map(brief)).toEqual(['1:put:a/x', '2:put:a/x', '3:delete:a/x']);
    expect(evs[0]).toEqual({ rev: 1, type: 'put', collection: 'a', id: 'x', doc: { collection: 'a', id: 'x', rev: 1, createRev: 1, doc: { v: 1 } } });
    expect(evs[1]?.prevRev).toBe(1);
    expect(evs[2]).toEqual({ rev: 3, type: 'delete', collection: 'a', id: 'x', prevRev: 2 });
  });

  it('eventsSince after a list revision has no gap and no repeat', () => {
    const f = feeder();
    for (let i = 0; i < 20; i++) f.put('jobs', `j${i % 7}`, { i });
    const page = f.store.list('jobs', { limit: 1000 });
    const model = new Map(page.items.map((d) => [d.id, d.rev]));
    for (let i = 0; i < 15; i++) {
      if (i % 4 === 3) f.del('jobs', `j${i % 7}`);
      else f.put('jobs', `j${(i * 3) % 9}`, { i });
    }
    f.put('other', 'x', {});
    const evs = f.store.eventsSince(page.rev, { collection: 'jobs' });
    expect(evs.every((ev) => ev.rev > page.rev)).toBe(true);
    for (const ev of evs) {
      if (ev.type === 'put') model.set(ev.id, ev.rev);
      else model.delete(ev.id);
    }
    const now = f.store.list('jobs', { limit: 1000 });
    expect(new Map(now.items.map((d) => [d.id, d.rev]))).toEqual(model);
    expect(f.store.eventsSince(now.rev, {})).toEqual([]);
  });

  it('filters by collection and id prefix', () => {
    const f = feeder();
    f.put('a', 'web-1', {});
    f.put('b', 'web-2', {});
    f.put('a', 'db-1', {});
    expect(f.store.eventsSince(0, { collection: 'a' }).map(brief)).toEqual(['1:put:a/web-1', '3:put:a/db-1']);
    expect(f.store.eventsSince(0, { prefix: 'web-' }).map(brief)).toEqual(['1:put:a/web-1', '2:put:b/web-2']);
    expect(f.store.eventsSince(0, { collection: 'a', prefix: 'web-' }).map(brief)).toEqual(['1:put:a/web-1']);
    expect(f.store.eventsSince(99, {})).toEqual([]);
  });

  it('a cursor older than the retained events expires with the oldest complete revision', () => {
    const f = feeder({ eventsRetainedMax: 5 });
    for (let i = 0; i < 10; i++) f.put('a', `d${i}`, {});
    // Revs 6..10 held, 1..5 dropped.
    expect(f.store.stats().events).toBe(5);
    expect(f.store.oldestRev).toBe(6);
    expect(f.store.eventsSince(5, {}).map((e) => e.rev)).toEqual([6, 7, 8, 9, 10]);
    let caught: unknown;
    try {
      f.store.eventsSince(4, {});
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CursorExpiredError);
    expect(caught).toMatchObject({ code: 'cursor_expired', status: 410, oldestRev: 6, details: { afterRev: 4, oldestRev: 6 } });
  });

  it('drops whole revisions, so a multi-event entry is never half retained', () => {
    const f = feeder({ eventsRetainedMax: 4 });
    f.cmd({ op: 'txn', compare: [], success: ['a', 'b', 'c'].map((id) => ({ op: 'put' as const, collection: 'x', id, doc: {} })), failure: [] });
    f.put('x', 'd', {});
    f.put('x', 'e', {}); // 5 events: rev 1 (3 events) must go as a whole
    expect(f.store.eventsSince(1, {}).map((e) => e.rev)).toEqual([2, 3]);
    expect(() => f.store.eventsSince(0, {})).toThrow(CursorExpiredError);
  });

  it('keeps the newest entry whole even when it alone exceeds the cap', () => {
    const f = feeder({ eventsRetainedMax: 2 });
    for (const id of ['a', 'b', 'c', 'd']) f.put('x', id, {});
    ok(f.cmd({ op: 'retain', collection: 'x', ids: [] }));
    expect(f.store.eventsSince(4, {})).toHaveLength(4);
    expect(f.store.oldestRev).toBe(5);
    f.put('x', 'z', {});
    expect(f.store.eventsSince(5, {}).map((e) => e.rev)).toEqual([6]);
    expect(f.store.oldestRev).toBe(6);
  });

  it('caps retained bytes too', () => {
    const f = feeder({ eventsRetainedBytesMax: 50_000 });
    for (let i = 0; i < 10; i++) f.put('x', `d${i}`, { pad: 'x'.repeat(10_000) });
    expect(f.store.stats().events).toBe(4);
    expect(f.store.oldestRev).toBe(7);
  });

  it('refuses a negative or fractional cursor', () => {
    const f = feeder();
    for (const bad of [-1, 1.5, Number.NaN]) {
      try {
        f.store.eventsSince(bad, {});
        expect.fail('should throw');
      } catch (err) {
        expect(isShoalError(err) && err.code).toBe('bad_request');
      }
    }
  });
});

describe('subscribe', () => {
  it('is called synchronously during apply, for each event in order, after the state changed', () => {
    const f = feeder();
    const seen: string[] = [];
    const unsubscribe = f.store.subscribe((ev) => {
      seen.push(`${brief(ev)} rev=${f.store.revision} has=${f.store.get(ev.collection, ev.id) !== undefined}`);
    });
    f.cmd({ op: 'txn', compare: [], success: [{ op: 'put', collection: 'a', id: 'x', doc: {} }, { op: 'put', collection: 'a', id: 'y', doc: {} }], failure: [] });
    expect(seen).toEqual(['1:put:a/x rev=1 has=true', '1:put:a/y rev=1 has=true']);
    f.del('a', 'y');
    expect(seen[2]).toBe('2:delete:a/y rev=2 has=false');
    unsubscribe();
    f.put('a', 'z', {});
    expect(seen).toHaveLength(3);
  });

  it('a throwing subscriber does not stop the others or the apply', () => {
    const errors: unknown[] = [];
    const f = feeder({ onListenerError: (err) => errors.push(err) });
    const seen: number[] = [];
    f.store.subscribe(() => {
      throw new Error('boom');
    });
    f.store.subscribe((ev) => seen.push(ev.rev));
    expect(ok(f.put('a', 'x', {})).kind).toBe('put');
    expect(seen).toEqual([1]);
    expect(errors).toHaveLength(1);
    expect(f.store.get('a', 'x')).toBeDefined();
  });
});
