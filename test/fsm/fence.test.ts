// Fencing by term (design.md, Fencing) and compares on a document's fields: the store-level
// guards the leader's loops and the agents' reports stand on.

import { describe, expect, it } from 'vitest';
import { encodeCommand, validateStamped, type Compare } from '../../fsm/index.ts';
import { errorOf, feeder, hex, ok } from './harness.ts';

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
