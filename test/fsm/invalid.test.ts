import { describe, expect, it } from 'vitest';
import { decodeCommand, encodeCommand, InvalidCommandError, type Stamped } from '../../fsm/index.ts';
import { jsonBytes } from '../../fsm/json-value.ts';
import { docBytesMax } from '../../fsm/limits.ts';
import { errorOf, feeder, rawPackr } from './harness.ts';

/** Applies raw (unvalidated) stamped commands and checks each gives invalid_command and changes nothing. */
function expectRefused(values: unknown[], pattern?: RegExp): void {
  const f = feeder();
  f.put('keep', 'me', { v: 1 });
  const before = { stats: f.store.stats(), list: f.store.list('keep'), events: f.store.eventsSince(0, {}) };
  let events = 0;
  f.store.subscribe(() => events++);
  for (const v of values) {
    const e = errorOf(f.raw(rawPackr.pack(v)));
    expect(e.code, String(e.message)).toBe('invalid_command');
    if (pattern) expect(e.message).toMatch(pattern);
    expect((e.details as { issues: unknown[] }).issues.length).toBeGreaterThan(0);
  }
  expect(events).toBe(0);
  expect(f.store.stats()).toEqual(before.stats);
  expect(f.store.list('keep').items).toEqual(before.list.items);
  expect(f.store.eventsSince(0, {})).toEqual(before.events);
  expect(f.store.revision).toBe(1 + values.length);
}

const put = (over: Record<string, unknown>): unknown => ({ cmd: { op: 'put', collection: 'a', id: 'x', doc: {}, ...over }, ts: 1 });

describe('invalid commands', () => {
  it('garbage bytes give an invalid_command result', () => {
    const f = feeder();
    for (const data of [new Uint8Array([0xc1]), new Uint8Array([0x92, 0x01]), new Uint8Array(), new TextEncoder().encode('{"cmd":1}'), new Uint8Array([0x01, 0x02])]) {
      expect(errorOf(f.raw(data)).code).toBe('invalid_command');
    }
    expect(f.store.stats().documents).toBe(0);
  });

  it('bad collection names and ids', () => {
    expectRefused([
      put({ collection: 'Upper' }), put({ collection: '' }), put({ collection: '-lead' }), put({ collection: 'a'.repeat(64) }),
      put({ collection: 'sp ace' }), put({ id: '' }), put({ id: 'a/b' }), put({ id: 'x'.repeat(257) }), put({ id: 7 }),
    ]);
  });

  it('documents that are not JSON objects', () => {
    expectRefused([
      put({ doc: [1, 2] }), put({ doc: 'text' }), put({ doc: null }), put({ doc: 5 }), put({ doc: undefined }),
      put({ doc: { when: new Date(0) } }), put({ doc: { big: 2n ** 62n } }), put({ doc: { bin: new Uint8Array(3) } }),
      put({ doc: { n: Number.NaN } }), put({ doc: { n: Number.POSITIVE_INFINITY } }), put({ doc: { list: [1, undefined] } }),
    ]);
  });

  it('too deep or too large documents', () => {
    let deep: unknown = {};
    for (let i = 0; i < 70; i++) deep = { d: deep };
    expectRefused([put({ doc: deep })], /nest at most/);
    expectRefused([put({ doc: { pad: 'x'.repeat(docBytesMax) } })], /limit is/);
  });

  it('measures documents in UTF-8 bytes of their JSON, not in characters', () => {
    // {"s":"é😀\n"}: 6 + 2 (é) + 4 (😀, a surrogate pair) + 2 (the escaped newline) + 2.
    expect(jsonBytes({ s: 'é😀\n' })).toBe(16);
    // Under the limit in characters, over it in bytes.
    const chars = Math.floor(docBytesMax / 2) + 8;
    expect(chars).toBeLessThan(docBytesMax);
    expectRefused([put({ doc: { pad: 'é'.repeat(chars) } })], new RegExp(`the document is ${2 * chars + 10} bytes`));
  });

  it('unknown ops, unknown fields, bad expectations and bad stamps', () => {
    expectRefused([
      { cmd: { op: 'upsert', collection: 'a', id: 'x' }, ts: 1 },
      put({ extra: true }),
      put({ expect: { rev: 0 } }), put({ expect: { rev: 1.5 } }), put({ expect: { absent: false } }), put({ expect: { rev: 1, absent: true } }),
      { cmd: { op: 'put', collection: 'a', id: 'x', doc: {} } },
      { cmd: { op: 'put', collection: 'a', id: 'x', doc: {} }, ts: -1 },
      { cmd: { op: 'put', collection: 'a', id: 'x', doc: {} }, ts: 1, idempotencyKey: '' },
      { cmd: { op: 'put', collection: 'a', id: 'x', doc: {} }, ts: 1, extra: 1 },
      { cmd: { op: 'retain', collection: 'a' }, ts: 1 },
      { cmd: { op: 'txn', compare: [], success: [] }, ts: 1 },
      { cmd: { op: 'txn', compare: [], success: [{ op: 'retain', collection: 'a', ids: [] }], failure: [] }, ts: 1 },
      { cmd: { op: 'txn', compare: [{ collection: 'a', id: 'x', target: 'exists', cmp: '>', value: true }], success: [], failure: [] }, ts: 1 },
      { cmd: { op: 'txn', compare: [], success: [{ op: 'put', collection: 'a', id: 'x', doc: {} }, { op: 'put', collection: 'a', id: 'x', doc: {} }], failure: [] }, ts: 1 },
      'just a string', null, [1, 2, 3],
    ]);
  });

  it('an invalid keyed command is not recorded for idempotency', () => {
    const f = feeder();
    errorOf(f.raw(rawPackr.pack({ cmd: { op: 'put', collection: 'BAD', id: 'x', doc: {} }, ts: 1, principal: 'p', idempotencyKey: 'k' })));
    expect(f.store.stats().idempotencyRecords).toBe(0);
  });

  it('reports every problem at once', () => {
    const f = feeder();
    const e = errorOf(f.raw(rawPackr.pack({ cmd: { op: 'put', collection: 'BAD', id: 'a/b', doc: {} }, ts: -5 })));
    const paths = (e.details as { issues: { path: string }[] }).issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['cmd.collection', 'cmd.id', 'ts']));
  });

  it('encodeCommand refuses what apply would refuse, decodeCommand throws on garbage', () => {
    expect(() => encodeCommand({ cmd: { op: 'put', collection: 'a', id: 'x', doc: [] }, ts: 1 })).toThrow(InvalidCommandError);
    expect(() => decodeCommand(new Uint8Array([0xc1]))).toThrow(InvalidCommandError);
    try {
      decodeCommand(rawPackr.pack(put({ collection: 'Nope' })));
      expect.fail('should throw');
    } catch (err) {
      expect(err).toMatchObject({ code: 'bad_request', status: 400, details: { issues: [{ path: 'cmd.collection' }] } });
    }
    const s: Stamped = { cmd: { op: 'put', collection: 'a', id: 'x', doc: { v: [1, 'two', null, true, { n: 1.5 }] }, expect: { absent: true } }, ts: 5, principal: 'p', idempotencyKey: 'k' };
    expect(decodeCommand(encodeCommand(s))).toEqual(s);
    // encodeCommand does not freeze the caller's objects.
    expect(Object.isFrozen((s.cmd as { doc: object }).doc)).toBe(false);
  });

  it("refuses the key '__proto__' (msgpack would rename it)", () => {
    const doc = JSON.parse('{"__proto__": {"x": 1}}') as Record<string, unknown>;
    expect(() => encodeCommand({ cmd: { op: 'put', collection: 'a', id: 'x', doc: doc as never }, ts: 1 })).toThrow(/__proto__/);
  });
});
