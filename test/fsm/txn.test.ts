import { describe, expect, it } from 'vitest';
import type { Compare } from '../../fsm/index.ts';
import { errorOf, feeder, ok } from './harness.ts';

describe('txn', () => {
  it('applies the success branch when every compare holds, all ops at the same rev', () => {
    const f = feeder();
    f.put('a', 'x', { v: 1 });
    const r = ok(f.cmd({
      op: 'txn',
      compare: [{ collection: 'a', id: 'x', target: 'rev', cmp: '=', value: 1 }],
      success: [{ op: 'put', collection: 'a', id: 'x', doc: { v: 2 } }, { op: 'put', collection: 'b', id: 'y', doc: {} }],
      failure: [{ op: 'delete', collection: 'a', id: 'x' }],
    }));
    expect(r).toMatchObject({ kind: 'txn', succeeded: true, rev: 2 });
    expect(r.kind === 'txn' && r.results.map((o) => o.kind === 'put' && o.doc.rev)).toEqual([2, 2]);
    expect(f.store.get('a', 'x')?.rev).toBe(2);
    expect(f.store.get('b', 'y')?.rev).toBe(2);
  });

  it('applies the failure branch when a compare fails', () => {
    const f = feeder();
    f.put('a', 'x', {});
    const r = ok(f.cmd({
      op: 'txn',
      compare: [{ collection: 'a', id: 'x', target: 'rev', cmp: '>', value: 5 }],
      success: [{ op: 'put', collection: 'a', id: 'x', doc: { won: true } }],
      failure: [{ op: 'delete', collection: 'a', id: 'x' }],
    }));
    expect(r).toMatchObject({ kind: 'txn', succeeded: false, results: [{ kind: 'delete', collection: 'a', id: 'x', rev: 2 }] });
    expect(f.store.get('a', 'x')).toBeUndefined();
  });

  it('a failing op inside the branch leaves nothing changed and reports which op', () => {
    const f = feeder();
    f.put('a', 'x', { v: 1 });
    let events = 0;
    f.store.subscribe(() => events++);
    const before = f.store.snapshot();
    const e = errorOf(f.cmd({
      op: 'txn',
      compare: [],
      success: [
        { op: 'put', collection: 'a', id: 'x', doc: { v: 2 } },
        { op: 'put', collection: 'a', id: 'new', doc: {} },
        { op: 'delete', collection: 'a', id: 'ghost' },
      ],
      failure: [],
    }));
    expect(e).toMatchObject({ code: 'not_found', details: { branch: 'success', op: 2, collection: 'a', id: 'ghost' } });
    expect(f.store.get('a', 'x')?.doc).toEqual({ v: 1 });
    expect(f.store.get('a', 'new')).toBeUndefined();
    expect(events).toBe(0);
    expect(f.store.eventsSince(1, {})).toEqual([]);
    expect(f.store.stats().documents).toBe(1);
    // Only the revision moved.
    expect(before).not.toEqual(f.store.snapshot());
    expect(f.store.list('a').items.map((d) => d.rev)).toEqual([1]);
  });

  it('op expectations are checked against the state before the txn', () => {
    const f = feeder();
    f.put('a', 'x', {});
    const r = ok(f.cmd({
      op: 'txn', compare: [],
      success: [{ op: 'put', collection: 'a', id: 'x', doc: { v: 2 }, expect: { rev: 1 } }, { op: 'put', collection: 'a', id: 'y', doc: {}, expect: { absent: true } }],
      failure: [],
    }));
    expect(r.kind === 'txn' && r.succeeded).toBe(true);
    expect(errorOf(f.cmd({ op: 'txn', compare: [], success: [{ op: 'put', collection: 'a', id: 'y', doc: {}, expect: { absent: true } }], failure: [] })))
      .toMatchObject({ code: 'already_exists', details: { branch: 'success', op: 0 } });
  });

  it('a branch may not touch one document twice', () => {
    const f = feeder();
    const e = errorOf(f.raw(new Uint8Array(0)));
    expect(e.code).toBe('invalid_command');
    expect(() => f.cmd({
      op: 'txn', compare: [], success: [],
      failure: [{ op: 'put', collection: 'a', id: 'x', doc: {} }, { op: 'delete', collection: 'a', id: 'x' }],
    })).toThrow(/appears twice/);
  });

  it('an empty txn succeeds and changes nothing', () => {
    const f = feeder();
    expect(ok(f.cmd({ op: 'txn', compare: [], success: [], failure: [] }))).toEqual({ ok: true, kind: 'txn', succeeded: true, results: [], rev: 1 });
    expect(f.store.stats().events).toBe(0);
  });
});

describe('txn compares', () => {
  // State: a/x created at 1, updated at 3; a/y absent.
  const f = feeder();
  f.put('a', 'x', {});
  f.put('a', 'other', {});
  f.put('a', 'x', {});
  const holds = (c: Omit<Compare, 'collection'>): boolean => {
    const r = ok(f.cmd({ op: 'txn', compare: [{ collection: 'a', ...c }], success: [], failure: [] }));
    return r.kind === 'txn' && r.succeeded;
  };

  it.each([
    ['rev', '=', 3, true], ['rev', '=', 1, false], ['rev', '!=', 1, true], ['rev', '!=', 3, false],
    ['rev', '<', 4, true], ['rev', '<', 3, false], ['rev', '>', 2, true], ['rev', '>', 3, false],
    ['rev', '<=', 3, true], ['rev', '<=', 2, false], ['rev', '>=', 3, true], ['rev', '>=', 4, false],
    ['createRev', '=', 1, true], ['createRev', '>', 1, false], ['createRev', '<', 3, true],
    ['exists', '=', true, true], ['exists', '=', false, false], ['exists', '!=', false, true],
  ] as const)('x: %s %s %s is %s', (target, cmp, value, expected) => {
    expect(holds({ id: 'x', target, cmp, value })).toBe(expected);
  });

  it.each([
    ['rev', '=', 0, true], ['createRev', '=', 0, true], ['rev', '>', 0, false], ['exists', '=', false, true], ['exists', '!=', true, true],
  ] as const)('absent y: %s %s %s is %s', (target, cmp, value, expected) => {
    expect(holds({ id: 'y', target, cmp, value })).toBe(expected);
  });

  it('every compare must hold', () => {
    const r = ok(f.cmd({
      op: 'txn',
      compare: [{ collection: 'a', id: 'x', target: 'exists', cmp: '=', value: true }, { collection: 'a', id: 'y', target: 'exists', cmp: '=', value: true }],
      success: [], failure: [],
    }));
    expect(r.kind === 'txn' && r.succeeded).toBe(false);
  });

  it('refuses mismatched compare values and operators', () => {
    expect(() => holds({ id: 'x', target: 'exists', cmp: '<', value: true })).toThrow(/only '=' or '!='/);
    expect(() => holds({ id: 'x', target: 'exists', cmp: '=', value: 1 })).toThrow(/true or false/);
    expect(() => holds({ id: 'x', target: 'rev', cmp: '=', value: true })).toThrow(/revision number/);
  });
});
