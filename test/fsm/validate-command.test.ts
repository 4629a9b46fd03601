// The fast path in fsm/validate-command.ts against zod, its reference: on generated valid commands
// it must accept and return exactly zod's parsed.data (values, key order, doc by reference); on
// mutated ones it may bail out but must never accept what zod refuses, and validateStamped must
// answer exactly as zod alone would. One seed per test; a failure prints the seed and the input.

import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import {
  idPrefixProblem, idPrefixSchema, idProblem, idSchema, stampedSchema, validateStamped, validateStampedWithZod, type Validated,
} from '../../fsm/command.ts';
import {
  idempotencyKeyLengthMax, idLengthMax, principalLengthMax, retainIdsMax, txnComparesMax, txnOpsMax,
} from '../../fsm/limits.ts';
import { fastParseStamped } from '../../fsm/validate-command.ts';
import { SeededPrng } from '../../src/raft/prng.ts';

const casesPerTest = 3000;
const packr = new Packr({ useRecords: false });

type Gen = SeededPrng;
type Entry = [string, unknown];

function pick<T>(g: Gen, xs: readonly T[]): T {
  return xs[g.nextInt(xs.length)] as T;
}

/** A plain object from entries in a random order, sometimes with a null prototype. */
function obj(g: Gen, entries: Entry[]): Record<string, unknown> {
  const shuffled = g.shuffle(entries.slice());
  const o: Record<string, unknown> = g.chance(0.1) ? Object.create(null) as Record<string, unknown> : {};
  for (const [k, v] of shuffled) o[k] = v;
  return o;
}

/** An optional field: absent, present as undefined (zod keeps the key), or a value. */
function optional(g: Gen, key: string, value: () => unknown): Entry[] {
  const r = g.nextFloat();
  if (r < 0.4) return [];
  if (r < 0.5) return [[key, undefined]];
  return [[key, value()]];
}

const collectionFirst = 'abcdefghijklmnopqrstuvwxyz0123456789';
const collectionRest = `${collectionFirst}_.-`;

function genCollection(g: Gen): string {
  const len = g.chance(0.1) ? 63 : 1 + g.nextInt(8);
  let s = pick(g, [...collectionFirst]);
  while (s.length < len) s += pick(g, [...collectionRest]);
  return s;
}

/**
 * A string of exactly `len` UTF-16 code units, with surrogate pairs and spaces; principals and
 * keys (`free`) also get '/' and control characters, which ids may not hold.
 */
function genText(g: Gen, len: number, free: boolean): string {
  const chars = ['a', 'Z', '0', '-', ' ', 'é', '\u00a0', '😀', ...(free ? ['/', '\u0000', '\n', '\u007f', '\u0085'] : [])];
  let s = '';
  while (s.length < len) {
    const c = pick(g, chars);
    s += s.length + c.length <= len ? c : 'x';
  }
  return s;
}

function genBounded(g: Gen, max: number, free: boolean): string {
  const r = g.nextFloat();
  return genText(g, r < 0.1 ? max : r < 0.2 ? 1 : 1 + g.nextInt(12), free);
}

const genId = (g: Gen): string => genBounded(g, idLengthMax, false);

function genInt(g: Gen, min: number): number {
  const r = g.nextFloat();
  if (r < 0.1) return min;
  if (r < 0.2) return Number.MAX_SAFE_INTEGER;
  if (r < 0.25 && min === 0) return -0;
  return min + g.nextInt(1_000_000);
}

function genDoc(g: Gen): Record<string, unknown> {
  const entries: Entry[] = [];
  const n = g.nextInt(4);
  for (let i = 0; i < n; i++) {
    entries.push([`k${i}`, pick(g, [1, 'two', null, true, [1, { x: 'y' }], { nested: { n: 1.5 } }])]);
  }
  return obj(g, entries);
}

function genExpect(g: Gen): Entry[] {
  return optional(g, 'expect', () => (g.chance(0.5) ? obj(g, [['rev', genInt(g, 1)]]) : obj(g, [['absent', true]])));
}

function genPut(g: Gen, collection = genCollection(g), id = genId(g)): Record<string, unknown> {
  return obj(g, [['op', 'put'], ['collection', collection], ['id', id], ['doc', genDoc(g)], ...genExpect(g)]);
}

function genDelete(g: Gen, collection = genCollection(g), id = genId(g)): Record<string, unknown> {
  return obj(g, [['op', 'delete'], ['collection', collection], ['id', id], ...genExpect(g)]);
}

function genCompare(g: Gen): Record<string, unknown> {
  const target = pick(g, ['rev', 'createRev', 'exists']);
  const cmp = target === 'exists' ? pick(g, ['=', '!=']) : pick(g, ['=', '!=', '<', '>', '<=', '>=']);
  const value = target === 'exists' ? g.chance(0.5) : genInt(g, 0);
  return obj(g, [['collection', genCollection(g)], ['id', genId(g)], ['target', target], ['cmp', cmp], ['value', value]]);
}

/** A txn branch; each op touches its own document, so most commands also pass checkSemantics. */
function genBranch(g: Gen): Record<string, unknown>[] {
  const n = g.chance(0.05) ? txnOpsMax : g.nextInt(4);
  return Array.from({ length: n }, (_, i) => (g.chance(0.5) ? genPut(g, 'c', `d${i}`) : genDelete(g, 'c', `d${i}`)));
}

function genCommand(g: Gen): Record<string, unknown> {
  switch (g.nextInt(4)) {
    case 0: return genPut(g);
    case 1: return genDelete(g);
    case 2: {
      const compares = g.chance(0.05) ? txnComparesMax : g.nextInt(4);
      return obj(g, [['op', 'txn'], ['compare', Array.from({ length: compares }, () => genCompare(g))], ['success', genBranch(g)], ['failure', genBranch(g)]]);
    }
    default:
      return obj(g, [['op', 'retain'], ['collection', genCollection(g)], ['ids', Array.from({ length: g.nextInt(6) }, () => genId(g))]]);
  }
}

function genStamped(g: Gen): Record<string, unknown> {
  return obj(g, [
    ['cmd', genCommand(g)], ['ts', genInt(g, 0)],
    ...optional(g, 'principal', () => genBounded(g, principalLengthMax, true)),
    ...optional(g, 'role', () => pick(g, ['admin', 'operator', 'reader'])),
    ...optional(g, 'idempotencyKey', () => genBounded(g, idempotencyKeyLengthMax, true)),
  ]);
}

class Point { x = 1; }

/** Values that break some field somewhere (and a few that happen to be valid for some). */
function weird(g: Gen): unknown {
  return pick(g, [
    null, undefined, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 0, 1, -1, 1.5,
    2 ** 53, -(2 ** 53), Number.MAX_SAFE_INTEGER, 1n, '', 'a', 'A', 'a/b', '/', ' x', 'x'.repeat(idLengthMax),
    'x'.repeat(idLengthMax + 1), '😀'.repeat(128), `${'😀'.repeat(128)}x`, 'a'.repeat(64), '-lead', 'put', 'delete',
    'a\u0000b', 'line\n', '\t', 'del\u007f', 'c1\u0085', '\u009f', '\ud83d', 'x\ude00', '\u00a0', '😀',
    'txn', 'retain', 'exists', 'rev', '=', '<', true, false, [], [null], [1, 2], {}, { x: null }, { rev: 1 },
    { absent: true }, { absent: false }, { rev: 0 }, new Date(0), new Map([['rev', 1]]), new Point(),
    Object.create(null) as object, Object.assign(Object.create({ inherited: 1 }) as object, { rev: 1 }),
    new String('a'), Symbol('s'), () => 1, new Uint8Array(2),
  ]);
}

/** Every (container, key) slot in the command, not descending into documents. */
function slots(v: unknown, out: [Record<string | number, unknown>, string | number][] = []): typeof out {
  // Not into String objects and the like (a weird() value): their slots cannot be deleted.
  if (typeof v !== 'object' || v === null || v instanceof String || ArrayBuffer.isView(v)) return out;
  const c = v as Record<string | number, unknown>;
  if (Array.isArray(c)) {
    c.forEach((e, i) => {
      out.push([c, i]);
      slots(e, out);
    });
    return out;
  }
  for (const k of Object.keys(c)) {
    out.push([c, k]);
    if (k !== 'doc') slots(c[k], out);
  }
  return out;
}

function mutate(g: Gen, root: Record<string, unknown>): unknown {
  const all = slots(root);
  const [container, key] = pick(g, all);
  const value = container[key];
  switch (g.nextInt(7)) {
    case 0: case 1: container[key] = weird(g); break;
    case 2: delete container[key]; break;
    case 3: {
      const target = typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : container;
      if (g.chance(0.2)) Object.defineProperty(target, '__proto__', { value: 1, enumerable: true, writable: true, configurable: true });
      else target[pick(g, ['extra', 'constructor', '0', 'toString', 'rev', 'absent', 'doc', 'expect'])] = weird(g);
      break;
    }
    case 4: {
      // An array one past its limit, or an object where an array belongs and vice versa.
      if (Array.isArray(value) && value.length > 0) {
        const max = key === 'ids' ? retainIdsMax : key === 'compare' ? txnComparesMax : txnOpsMax;
        if (max <= txnOpsMax) container[key] = Array.from({ length: max + 1 }, () => value[0]);
        else container[key] = { ...value };
      } else {
        container[key] = [value];
      }
      break;
    }
    case 5: container[key] = Object.assign(new Point(), value); break;
    default: return g.chance(0.5) ? weird(g) : [root];
  }
  return g.chance(0.3) ? mutate(g, root) : root;
}

/** A canonical text: key order, undefined values, -0 and non-plain objects all show. */
function canon(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v !== 'object' || v === null) return typeof v === 'string' ? JSON.stringify(v) : String(v);
  if (Array.isArray(v)) return `[${Array.from(v, canon).join(',')}]`;
  const proto: unknown = Object.getPrototypeOf(v);
  const kind = proto === Object.prototype ? '' : proto === null ? 'null-proto' : `<${Object.prototype.toString.call(v)}>`;
  return `${kind}{${Object.keys(v).map((k) => `${JSON.stringify(k)}:${canon((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

/** The documents of a parsed command's puts, in order. */
function docsOf(s: unknown): unknown[] {
  const cmd = (s as { cmd: { op: string; doc?: unknown; success?: { op: string; doc?: unknown }[]; failure?: { op: string; doc?: unknown }[] } }).cmd;
  if (cmd.op === 'put') return [cmd.doc];
  if (cmd.op !== 'txn') return [];
  return [...cmd.success ?? [], ...cmd.failure ?? []].filter((op) => op.op === 'put').map((op) => op.doc);
}

/** JSON text, with bigints (which a mutated doc may hold) shown rather than thrown on. */
const json = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));

/** Checks zod accepts `value` and the fast path returned exactly what zod did. */
function expectSameAsZod(value: unknown, fast: unknown, where: string): void {
  const ref = stampedSchema.safeParse(value);
  expect(ref.success, `${where}: fast path accepted what zod refuses`).toBe(true);
  if (!ref.success) return;
  expect(canon(fast), where).toBe(canon(ref.data));
  expect(json(fast), where).toBe(json(ref.data));
  expect(fast, where).not.toBe(value);
  const fastDocs = docsOf(fast);
  const refDocs = docsOf(ref.data);
  expect(fastDocs.length, where).toBe(refDocs.length);
  fastDocs.forEach((d, i) => expect(Object.is(d, refDocs[i]), `${where}: doc ${i} by reference`).toBe(true));
}

function expectSameResult(a: Validated, b: Validated, where: string): void {
  expect(a.ok, where).toBe(b.ok);
  if (a.ok && b.ok) {
    expect(canon(a.stamped), where).toBe(canon(b.stamped));
    expect([...a.docBytes.entries()], where).toEqual([...b.docBytes.entries()]);
    expect([...a.docBytes.keys()].every((k, i) => k === [...b.docBytes.keys()][i]), where).toBe(true);
  } else if (!a.ok && !b.ok) {
    expect(a.message, where).toBe(b.message);
    expect(a.issues, where).toEqual(b.issues);
  }
}

const describeInput = (seed: number, i: number, v: unknown): string => `seed ${seed} case ${i}: ${canon(v).slice(0, 2000)}`;

describe('fastParseStamped', () => {
  it('accepts generated valid commands of every kind and returns exactly what zod returns', () => {
    const seed = 0x5eed01;
    const g = new SeededPrng(seed);
    const kinds = new Map<string, number>();
    for (let i = 0; i < casesPerTest; i++) {
      const value = genStamped(g);
      const where = describeInput(seed, i, value);
      const fast = fastParseStamped(value);
      expect(fast, where).toBeDefined();
      expectSameAsZod(value, fast, where);
      // What msgpack decodes must take the fast path too, or apply gains nothing.
      const decoded: unknown = packr.unpack(packr.pack(value));
      expect(fastParseStamped(decoded), where).toBeDefined();
      const op = (value.cmd as { op: string }).op;
      kinds.set(op, (kinds.get(op) ?? 0) + 1);
    }
    expect([...kinds.keys()].sort()).toEqual(['delete', 'put', 'retain', 'txn']);
  });

  it('never accepts a mutated command zod refuses, and returns what zod returns when it accepts', () => {
    const seed = 0x5eed02;
    const g = new SeededPrng(seed);
    let refused = 0;
    let bailed = 0;
    for (let i = 0; i < casesPerTest; i++) {
      const value = mutate(g, genStamped(g));
      const where = describeInput(seed, i, value);
      const fast = fastParseStamped(value);
      if (fast === undefined) bailed++;
      else expectSameAsZod(value, fast, where);
      if (!stampedSchema.safeParse(value).success) refused++;
    }
    // The mutations must mostly break something, or this test proves little.
    expect(refused).toBeGreaterThan(casesPerTest * 0.6);
    expect(bailed).toBeGreaterThanOrEqual(refused);
  });

  it('bails out to zod for shapes it does not handle, valid or not', () => {
    const put = { op: 'put', collection: 'a', id: 'x', doc: {} };
    expect(fastParseStamped({ cmd: put, ts: 1 })).toEqual({ cmd: put, ts: 1 });
    expect(fastParseStamped(Object.assign(new Point(), { cmd: put, ts: 1 }))).toBeUndefined();
    expect(fastParseStamped({ cmd: Object.assign(new Point(), put), ts: 1 })).toBeUndefined();
    expect(fastParseStamped({ cmd: { ...put, doc: undefined }, ts: 1 })).toBeUndefined();
    expect(fastParseStamped({ cmd: { op: 'retain', collection: 'a', ids: Object.assign(new (class extends Array {})(), ['x']) }, ts: 1 })).toBeUndefined();
    expect(stampedSchema.safeParse(Object.assign(new Point(), { cmd: put, ts: 1 })).success).toBe(false);
    expect(stampedSchema.safeParse({ cmd: Object.assign(new Point(), put), ts: 1 }).success).toBe(false);
  });

  it('leaves a role to zod under the first release\'s rules, which refuse it', () => {
    const value = { cmd: { op: 'delete', collection: 'a', id: 'x' }, ts: 0, principal: 'alice', role: 'admin' };
    expect(validateStamped(value, false).ok).toBe(true);
    const legacy = validateStamped(value, false, 'legacy');
    expect(legacy.ok).toBe(false);
    expectSameResult(legacy, validateStampedWithZod(value, false, 'legacy'), 'legacy role');
  });

  it('agrees with zod at every length and count limit', () => {
    const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `i${i}`);
    const compare = { collection: 'a', id: 'x', target: 'rev', cmp: '=', value: 0 };
    const del = { op: 'delete', collection: 'a', id: 'x' };
    // [value, zod accepts it, the fast path does]; the fast path leaves strings longer in UTF-16
    // units than the limit to zod, which counts code points.
    const cases: [unknown, boolean, boolean][] = [
      [{ cmd: { op: 'retain', collection: 'a', ids: ids(retainIdsMax) }, ts: 0 }, true, true],
      [{ cmd: { op: 'retain', collection: 'a', ids: ids(retainIdsMax + 1) }, ts: 0 }, false, false],
      [{ cmd: { op: 'txn', compare: Array(txnComparesMax).fill(compare), success: [], failure: [] }, ts: 0 }, true, true],
      [{ cmd: { op: 'txn', compare: Array(txnComparesMax + 1).fill(compare), success: [], failure: [] }, ts: 0 }, false, false],
      [{ cmd: { op: 'txn', compare: [], success: Array(txnOpsMax).fill(del), failure: [] }, ts: 0 }, true, true],
      [{ cmd: { op: 'txn', compare: [], success: [], failure: Array(txnOpsMax + 1).fill(del) }, ts: 0 }, false, false],
      [{ cmd: { ...del, id: '😀'.repeat(idLengthMax / 2) }, ts: 0 }, true, true],
      [{ cmd: { ...del, id: `${'😀'.repeat(idLengthMax / 2)}x` }, ts: 0 }, true, false],
      [{ cmd: { ...del, id: '😀'.repeat(idLengthMax + 1) }, ts: 0 }, false, false],
      [{ cmd: { ...del, id: '\ud83d'.repeat(idLengthMax + 1) }, ts: 0 }, false, false],
      [{ cmd: { ...del, id: '\ud83d' }, ts: 0 }, false, false],
      [{ cmd: { ...del, id: `a${'\ude00'}` }, ts: 0 }, false, false],
      [{ cmd: { ...del, id: '\u00a0é😀' }, ts: 0 }, true, true],
      [{ cmd: del, ts: 0, principal: 'p'.repeat(principalLengthMax), idempotencyKey: 'k'.repeat(idempotencyKeyLengthMax) }, true, true],
      [{ cmd: del, ts: 0, principal: 'p'.repeat(principalLengthMax + 1) }, false, false],
      [{ cmd: del, ts: 0, idempotencyKey: '😀'.repeat(idempotencyKeyLengthMax) }, true, false],
      [{ cmd: del, ts: 0, idempotencyKey: 'k'.repeat(idempotencyKeyLengthMax + 1) }, false, false],
      [{ cmd: del, ts: Number.MAX_SAFE_INTEGER }, true, true],
      [{ cmd: del, ts: Number.MAX_SAFE_INTEGER + 1 }, false, false],
      [{ cmd: { ...del, expect: { rev: Number.MAX_SAFE_INTEGER + 1 } }, ts: 0 }, false, false],
      [{ cmd: { ...del, expect: undefined }, ts: -0, principal: undefined }, true, true],
      [{ cmd: del, ts: 0, principal: 'alice', role: 'operator' }, true, true],
      [{ cmd: del, ts: 0, role: 'root' }, false, false],
      [{ cmd: del, ts: 0, role: undefined }, true, true],
    ];
    cases.forEach(([value, zodAccepts, fastAccepts], i) => {
      expect(stampedSchema.safeParse(value).success, `case ${i}`).toBe(zodAccepts);
      const fast = fastParseStamped(value);
      if (fastAccepts) expectSameAsZod(value, fast, `case ${i}`);
      else expect(fast, `case ${i}`).toBeUndefined();
      expectSameResult(validateStamped(value, false), validateStampedWithZod(value, false), `case ${i}`);
    });
  });
});

describe('validateStamped', () => {
  it('answers exactly as zod alone does, for valid and mutated commands', () => {
    const seed = 0x5eed03;
    const g = new SeededPrng(seed);
    let ok = 0;
    for (let i = 0; i < casesPerTest; i++) {
      const value = g.chance(0.5) ? genStamped(g) : mutate(g, genStamped(g));
      const where = describeInput(seed, i, value);
      const got = validateStamped(value, false);
      expectSameResult(got, validateStampedWithZod(value, false), where);
      if (got.ok) ok++;
    }
    expect(ok).toBeGreaterThan(casesPerTest * 0.3);
    expect(ok).toBeLessThan(casesPerTest * 0.9);
  });

  it('freezes documents on the fast path as on the zod path', () => {
    const doc = { a: { b: [1] } };
    const v = validateStamped({ cmd: { op: 'put', collection: 'a', id: 'x', doc }, ts: 1 }, true);
    expect(v.ok && v.stamped.cmd.op === 'put' && v.stamped.cmd.doc === doc).toBe(true);
    expect(Object.isFrozen(doc.a.b)).toBe(true);
  });
});

describe('the id rule', () => {
  /** Every C0 and C1 control, DEL, the characters around them, lone surrogates and a pair. */
  const probes: string[] = [
    ...Array.from({ length: 0xa1 }, (_, c) => String.fromCharCode(c)), '\u00ad', '\u2028', '\ufeff', '\ud800', '\udbff', '\udc00',
    '\udfff', '😀', '/',
  ];
  const refused = (c: string): boolean => {
    const code = c.charCodeAt(0);
    const control = c.length === 1 && (code <= 0x1f || (code >= 0x7f && code <= 0x9f));
    const lone = c.length === 1 && code >= 0xd800 && code <= 0xdfff;
    return c === '/' || control || lone;
  };

  it('refuses control characters, lone surrogates and / in ids, identically in zod, idProblem and the fast path', () => {
    const del = { op: 'delete', collection: 'a' };
    for (const c of probes) {
      for (const id of [c, `a${c}`, `${c}b`, `a${c}b`]) {
        const where = `id ${JSON.stringify(id)}`;
        const ok = !refused(c);
        expect(idSchema.safeParse(id).success, where).toBe(ok);
        expect(idProblem(id) === undefined, where).toBe(ok);
        expect(idPrefixSchema.safeParse(id).success, where).toBe(ok);
        expect(idPrefixProblem(id) === undefined, where).toBe(ok);
        const value = { cmd: { ...del, id }, ts: 0 };
        const fast = fastParseStamped(value);
        if (ok) expectSameAsZod(value, fast, where);
        else expect(fast, where).toBeUndefined();
        expectSameResult(validateStamped(value, false), validateStampedWithZod(value, false), where);
      }
    }
  });

  it('takes an empty prefix but not an empty id, and counts length in code points in both checks', () => {
    expect(idPrefixSchema.safeParse('').success).toBe(true);
    expect(idPrefixProblem('')).toBeUndefined();
    expect(idSchema.safeParse('').success).toBe(false);
    expect(idProblem('')).toBeDefined();
    for (const id of ['😀'.repeat(idLengthMax), 'x'.repeat(idLengthMax), '😀'.repeat(idLengthMax + 1), 'x'.repeat(idLengthMax + 1)]) {
      expect(idProblem(id) === undefined, id).toBe(idSchema.safeParse(id).success);
      expect(idPrefixProblem(id) === undefined, id).toBe(idPrefixSchema.safeParse(id).success);
    }
  });
});
