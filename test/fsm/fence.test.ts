// Fencing by term (design.md, Fencing) and compares on a document's fields: the store-level
// guards the leader's loops and the agents' reports stand on.

import { describe, expect, it } from 'vitest';
import { encodeCommand, validateStamped, type Compare } from '../../fsm/index.ts';
import { errorOf, feeder as feederAt1, hex, ok, rawPackr, type Feeder } from './harness.ts';

/** Fences and value compares are of feature level 2. */
function feeder(): Feeder {
  const f = feederAt1();
  f.featureLevel = 2;
  return f;
}

const node = (epoch: number, status = 'up'): Record<string, unknown> => ({ epoch, runtime: { status } });

describe('a fenced command', () => {
  it('applies in an entry of the term that decided it', () => {
    const f = feeder();
    f.term = 4;
    ok(f.stamped({ cmd: { op: 'put', collection: 'shoal.tasks', id: 't1', doc: { v: 1 } }, fence: { term: 4 } }));
    expect(f.store.get('shoal.tasks', 't1')?.doc).toEqual({ v: 1 });
  });

  it('is refused with stale_term in an entry of any other term, and changes nothing, the same on every node', () => {
    const a = feeder();
    const b = feeder();
    for (const f of [a, b]) {
      f.term = 5;
      f.put('shoal.tasks', 't1', { v: 1 });
      const before = f.store.eventsSince(0).length;
      const e = errorOf(f.stamped({ cmd: { op: 'txn', compare: [], success: [{ op: 'put', collection: 'shoal.tasks', id: 't1', doc: { v: 2 } }], failure: [] }, fence: { term: 4 } }));
      expect(e).toMatchObject({ code: 'stale_term', details: { fenceTerm: 4, entryTerm: 5 } });
      expect(f.store.get('shoal.tasks', 't1')?.doc).toEqual({ v: 1 });
      expect(f.store.eventsSince(0)).toHaveLength(before);
    }
    expect(hex(a.store.snapshot())).toBe(hex(b.store.snapshot()));
  });

  it('refuses a fence term that is not a positive integer when encoding', () => {
    expect(() => encodeCommand({ cmd: { op: 'delete', collection: 'a', id: 'x' }, ts: 1, fence: { term: 0 } })).toThrow(/fence\.term/);
  });
});

describe('a value compare', () => {
  const cmp = (over: Partial<Compare>): Compare => ({ collection: 'shoal.nodes', id: 'n1', target: 'value', path: 'epoch', cmp: '=', value: 3, ...over });
  const txnWith = (compare: Compare[]) => ({ op: 'txn' as const, compare, success: [{ op: 'put' as const, collection: 'out', id: 'x', doc: { ok: true } }], failure: [] });

  it('holds or not on a number, a nested string and a boolean field', () => {
    const f = feeder();
    f.put('shoal.nodes', 'n1', { ...node(3), ready: true });
    const holds = (c: Compare): boolean => { const r = ok(f.cmd(txnWith([c]))); return r.kind === 'txn' && r.succeeded; };
    expect(holds(cmp({}))).toBe(true);
    expect(holds(cmp({ value: 4 }))).toBe(false);
    expect(holds(cmp({ cmp: '<', value: 4 }))).toBe(true);
    expect(holds(cmp({ cmp: '>=', value: 4 }))).toBe(false);
    expect(holds(cmp({ path: 'runtime.status', value: 'up' }))).toBe(true);
    expect(holds(cmp({ path: 'runtime.status', cmp: '!=', value: 'up' }))).toBe(false);
    expect(holds(cmp({ path: 'ready', value: true }))).toBe(true);
  });

  it('treats an absent field or document as equal to nothing', () => {
    const f = feeder();
    f.put('shoal.nodes', 'n1', node(3));
    const holds = (c: Compare): boolean => { const r = ok(f.cmd(txnWith([c]))); return r.kind === 'txn' && r.succeeded; };
    expect(holds(cmp({ path: 'missing' }))).toBe(false);
    expect(holds(cmp({ path: 'missing', cmp: '!=' }))).toBe(true);
    expect(holds(cmp({ path: 'epoch.deeper' }))).toBe(false);
    expect(holds(cmp({ id: 'absent' }))).toBe(false);
    expect(holds(cmp({ id: 'absent', cmp: '<', value: 100 }))).toBe(false);
    expect(holds(cmp({ path: 'runtime', cmp: '!=', value: 'x' }))).toBe(true);
  });

  it('is refused when malformed: no path, a path on another target, ordering on a string, a bad path', () => {
    const bad: Compare[] = [
      { collection: 'a', id: 'x', target: 'value', cmp: '=', value: 1 },
      { collection: 'a', id: 'x', target: 'rev', cmp: '=', value: 1, path: 'epoch' },
      cmp({ cmp: '<', value: 'a' }),
      cmp({ path: 'a..b' }),
      cmp({ path: '__proto__.x y' }),
    ];
    for (const c of bad) expect(validateStamped({ cmd: txnWith([c]), ts: 1 }, false).ok, JSON.stringify(c)).toBe(false);
  });
});

describe('at feature level 1', () => {
  it('an entry is applied as the first release applied it: a fence or a value compare is invalid, an id with a newline is not', () => {
    const f = feederAt1();
    const fenced = rawPackr.pack({ cmd: { op: 'put', collection: 'a', id: 'x', doc: {} }, ts: 1, fence: { term: 1 } });
    expect(errorOf(f.raw(fenced)).code).toBe('invalid_command');
    const valued = rawPackr.pack({ cmd: { op: 'txn', compare: [{ collection: 'a', id: 'x', target: 'value', path: 'v', cmp: '=', value: 1 }], success: [], failure: [] }, ts: 1 });
    expect(errorOf(f.raw(valued)).code).toBe('invalid_command');
    const newline = rawPackr.pack({ cmd: { op: 'put', collection: 'a', id: 'line\nbreak', doc: { v: 1 } }, ts: 1 });
    ok(f.raw(newline));
    expect(f.store.list('a').items.map((d) => d.id)).toEqual(['line\nbreak']);
    // And a snapshot holding it restores (the id was legal when it was written).
    const copy = feederAt1();
    copy.store.restore(f.store.snapshot());
    expect(copy.store.list('a').items.map((d) => d.id)).toEqual(['line\nbreak']);
  });

  it('the same id with a newline is refused at level 2, and by encodeCommand at any level', () => {
    const f = feeder();
    const newline = rawPackr.pack({ cmd: { op: 'put', collection: 'a', id: 'line\nbreak', doc: { v: 1 } }, ts: 1 });
    expect(errorOf(f.raw(newline)).code).toBe('invalid_command');
    expect(() => encodeCommand({ cmd: { op: 'put', collection: 'a', id: 'line\nbreak', doc: {} }, ts: 1 })).toThrow(/control characters/);
  });
});
