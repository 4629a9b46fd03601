import { describe, expect, it } from 'vitest';
import { requestFingerprint, type Command } from '../../fsm/index.ts';
import { errorOf, feeder, ok } from './harness.ts';

const hour = 60 * 60 * 1000;

describe('idempotency', () => {
  it('the same principal, key and request replays the first result and changes nothing', () => {
    const f = feeder();
    const put: Command = { op: 'put', collection: 'a', id: 'x', doc: { v: 1 } };
    const first = ok(f.cmd(put, { principal: 'alice', idempotencyKey: 'k1' }));
    let events = 0;
    f.store.subscribe(() => events++);
    const again = f.cmd(put, { principal: 'alice', idempotencyKey: 'k1' });
    expect(again).toEqual({ ...first, replayed: true });
    expect(f.store.get('a', 'x')?.rev).toBe(1);
    expect(events).toBe(0);
    expect(f.store.revision).toBe(2);
    expect(f.store.stats().idempotencyRecords).toBe(1);
  });

  it('replays failures too, so a retry gets the same answer', () => {
    const f = feeder();
    f.put('a', 'x', {});
    const cas: Command = { op: 'put', collection: 'a', id: 'x', doc: {}, expect: { rev: 9 } };
    const first = errorOf(f.cmd(cas, { principal: 'p', idempotencyKey: 'k' }));
    f.put('a', 'x', {}, undefined);
    expect(f.cmd(cas, { principal: 'p', idempotencyKey: 'k' })).toEqual({ ok: false, error: first, replayed: true });
  });

  it('the same key with a different request is an idempotency_conflict', () => {
    const f = feeder();
    f.cmd({ op: 'put', collection: 'a', id: 'x', doc: { v: 1 } }, { principal: 'alice', idempotencyKey: 'k1' });
    const e = errorOf(f.cmd({ op: 'put', collection: 'a', id: 'x', doc: { v: 2 } }, { principal: 'alice', idempotencyKey: 'k1' }));
    expect(e).toMatchObject({ code: 'idempotency_conflict', details: { idempotencyKey: 'k1', firstRev: 1 } });
    expect(f.store.get('a', 'x')?.doc).toEqual({ v: 1 });
  });

  it('keys are scoped by principal; a key without a principal belongs to the anonymous principal', () => {
    const f = feeder();
    const put = (v: number): Command => ({ op: 'put', collection: 'a', id: 'x', doc: { v } });
    ok(f.cmd(put(1), { principal: 'alice', idempotencyKey: 'k' }));
    const bob = ok(f.cmd(put(2), { principal: 'bob', idempotencyKey: 'k' }));
    expect(bob.replayed).toBeUndefined();
    ok(f.cmd(put(3), { idempotencyKey: 'k' }));
    expect(f.cmd(put(3), { idempotencyKey: 'k' }).replayed).toBe(true);
    expect(f.store.stats().idempotencyRecords).toBe(3);
  });

  it('the fingerprint ignores key order', () => {
    const a: Command = { op: 'put', collection: 'a', id: 'x', doc: { p: 1, q: { r: 2, s: 3 } } };
    const b = { doc: { q: { s: 3, r: 2 }, p: 1 }, id: 'x', collection: 'a', op: 'put' } as Command;
    expect(requestFingerprint(a)).toBe(requestFingerprint(b));
    expect(requestFingerprint(a)).not.toBe(requestFingerprint({ ...a, id: 'y' }));
    expect(requestFingerprint(a)).toMatch(/^[0-9a-f]{64}$/);
    const f = feeder();
    ok(f.cmd(a, { principal: 'p', idempotencyKey: 'k' }));
    expect(f.cmd(b, { principal: 'p', idempotencyKey: 'k' }).replayed).toBe(true);
  });

  it('records expire in log time, measured by the stamps of later entries', () => {
    const f = feeder({ idempotencyWindowMs: hour });
    const put = (v: number): Command => ({ op: 'put', collection: 'a', id: 'x', doc: { v } });
    f.ts = 0;
    ok(f.cmd(put(1), { principal: 'p', idempotencyKey: 'k' }));
    f.ts = hour; // exactly at the edge: still answers
    expect(f.cmd(put(1), { principal: 'p', idempotencyKey: 'k' }).replayed).toBe(true);
    f.ts = hour + 1;
    f.put('other', 'y', {}); // any entry moves log time and expires the record
    expect(f.store.stats().idempotencyRecords).toBe(0);
    const fresh = ok(f.cmd(put(2), { principal: 'p', idempotencyKey: 'k' }));
    expect(fresh.replayed).toBeUndefined();
    expect(f.store.get('a', 'x')?.doc).toEqual({ v: 2 });
  });

  it('log time never goes back when a later leader stamps an older time', () => {
    const f = feeder({ idempotencyWindowMs: hour });
    f.ts = 10 * hour;
    ok(f.cmd({ op: 'put', collection: 'a', id: 'x', doc: {} }, { principal: 'p', idempotencyKey: 'old' }));
    f.ts = 20 * hour;
    f.put('a', 'y', {});
    expect(f.store.stats().idempotencyRecords).toBe(0);
    f.ts = 5 * hour; // a new leader with a slow clock
    ok(f.cmd({ op: 'put', collection: 'a', id: 'z', doc: {} }, { principal: 'p', idempotencyKey: 'new' }));
    f.ts = 20 * hour + hour + 1; // one window after log time (20 h), not after the stamp (5 h)
    f.put('a', 'y', {});
    expect(f.store.stats().idempotencyRecords).toBe(0);
  });

  it('caps the number of records, evicting the oldest', () => {
    const f = feeder({ idempotencyRecordsMax: 3 });
    for (let i = 0; i < 5; i++) f.cmd({ op: 'put', collection: 'a', id: `d${i}`, doc: {} }, { principal: 'p', idempotencyKey: `k${i}` });
    expect(f.store.stats().idempotencyRecords).toBe(3);
    // k0 was evicted: the same request now runs again (a new rev), k4 still replays.
    const again = ok(f.cmd({ op: 'put', collection: 'a', id: 'd0', doc: {} }, { principal: 'p', idempotencyKey: 'k0' }));
    expect(again.replayed).toBeUndefined();
    expect(f.cmd({ op: 'put', collection: 'a', id: 'd4', doc: {} }, { principal: 'p', idempotencyKey: 'k4' }).replayed).toBe(true);
  });

  it('caps the bytes the records hold', () => {
    const f = feeder({ idempotencyBytesMax: 30_000 });
    for (let i = 0; i < 5; i++) f.cmd({ op: 'put', collection: 'a', id: `d${i}`, doc: { pad: 'x'.repeat(10_000) } }, { principal: 'p', idempotencyKey: `k${i}` });
    expect(f.store.stats().idempotencyRecords).toBe(2);
  });
});
