// The hand-written message check must accept and reject exactly what the zod `messageSchema`
// does, and return the same value. Random valid messages, then the same with one random
// corruption, through both; a failure prints the seed and case number to replay it.

import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { SeededPrng } from '../../src/raft/prng.ts';
import { decodeFrames, encodeFrame } from '../../transport/codec.ts';
import { NETWORK_MESSAGE_TYPES, messageSchema } from '../../transport/frames.ts';
import { validateMessage } from '../../transport/validate-message.ts';
import { decodeFrame, message, normalEntry } from './helpers.ts';

const packr = new Packr({ useRecords: false, moreTypes: false });
type Obj = Record<string, unknown>;

function pick<T>(rng: SeededPrng, items: readonly T[]): T {
  const item = items[rng.nextInt(items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

function randomId(rng: SeededPrng): string {
  const r = rng.nextFloat();
  if (r < 0.05) return 'x'.repeat(256);
  if (r < 0.1) return '';
  if (r < 0.15) return 'ü'.repeat(1 + rng.nextInt(10));
  return `n${rng.nextInt(1000)}`;
}

function randomCount(rng: SeededPrng): number {
  const r = rng.nextFloat();
  if (r < 0.05) return Number.MAX_SAFE_INTEGER;
  if (r < 0.1) return 0;
  return rng.nextInt(1_000_000);
}

function randomBytes(rng: SeededPrng): Uint8Array {
  const b = new Uint8Array(rng.nextInt(20));
  for (let i = 0; i < b.length; i++) b[i] = rng.nextInt(256);
  return rng.chance(0.3) ? Buffer.from(b) : b;
}

function randomConfChange(rng: SeededPrng): Obj {
  const c: Obj = {
    changes: Array.from({ length: rng.nextInt(3) }, () => ({ type: pick(rng, ['addVoter', 'addLearner', 'removeNode']), node: randomId(rng) })),
  };
  if (rng.chance(0.4)) c.leaveJoint = rng.chance(0.5);
  if (rng.chance(0.4)) c.autoLeave = rng.chance(0.5);
  if (rng.chance(0.4)) c.context = `ctx${rng.nextInt(100)}`;
  return c;
}

function randomEntry(rng: SeededPrng): Obj {
  const base = { term: randomCount(rng), index: randomCount(rng) };
  return rng.chance(0.8) ? { kind: 'normal', ...base, data: randomBytes(rng) } : { kind: 'conf', ...base, change: randomConfChange(rng) };
}

function randomSnapshot(rng: SeededPrng): Obj {
  const ids = (): string[] => Array.from({ length: rng.nextInt(4) }, () => randomId(rng));
  return {
    meta: {
      index: randomCount(rng),
      term: randomCount(rng),
      confState: { voters: ids(), votersOutgoing: ids(), learners: ids(), learnersNext: ids(), autoLeave: rng.chance(0.5) },
    },
    data: randomBytes(rng),
  };
}

function randomMessage(rng: SeededPrng): Obj {
  const m: Obj = {
    type: pick(rng, NETWORK_MESSAGE_TYPES),
    from: randomId(rng),
    to: randomId(rng),
    term: randomCount(rng),
    logTerm: randomCount(rng),
    index: randomCount(rng),
    entries: Array.from({ length: rng.nextInt(4) }, () => randomEntry(rng)),
    commit: randomCount(rng),
    reject: rng.chance(0.5),
    rejectHint: randomCount(rng),
  };
  if (rng.chance(0.3)) m.snapshot = randomSnapshot(rng);
  if (rng.chance(0.3)) m.context = `read-${rng.nextInt(100)}`;
  return m;
}

/** Values chosen to sit on every boundary the schema draws. */
const ODD_VALUES: readonly (() => unknown)[] = [
  () => undefined, () => null, () => NaN, () => Infinity, () => -Infinity, () => -1, () => 1.5, () => -0,
  () => 2 ** 53, () => 2 ** 53 - 1, () => -(2 ** 53), () => 0, () => 7, () => '', () => '7', () => 'x'.repeat(256),
  () => 'x'.repeat(257), () => 'ü'.repeat(257), () => true, () => false, () => [], () => ['a'], () => [1], () => ({}),
  () => new Uint8Array([1, 2]), () => Buffer.from([3]), () => new Uint8ClampedArray(2), () => new ArrayBuffer(2),
  () => new DataView(new ArrayBuffer(2)), () => new Date(0), () => new Map(), () => 1n,
  () => 'normal', () => 'conf', () => 'app', () => 'hup', () => 'addVoter', () => 'bogus',
  () => ({ kind: 'normal', term: 1, index: 1, data: new Uint8Array(0) }),
  () => ({ changes: [] }), () => ({ type: 'removeNode', node: 'a' }),
];

/** Every (container, key) in the value, the root's parent excluded. */
function slots(v: unknown, out: [Obj | unknown[], string | number][] = []): [Obj | unknown[], string | number][] {
  if (Array.isArray(v)) {
    v.forEach((item, i) => {
      out.push([v, i]);
      slots(item, out);
    });
  } else if (typeof v === 'object' && v !== null && !(v instanceof Uint8Array)) {
    for (const [k, item] of Object.entries(v)) {
      out.push([v as Obj, k]);
      slots(item, out);
    }
  }
  return out;
}

/** One corruption: replace, delete or add a key somewhere; or swap the whole value. */
function mutate(rng: SeededPrng, m: Obj): unknown {
  const all = slots(m);
  const r = rng.nextFloat();
  if (r < 0.03) return pick(rng, ODD_VALUES)();
  const [container, key] = pick(rng, all);
  if (r < 0.65) {
    (container as Obj)[key] = pick(rng, ODD_VALUES)();
  } else if (r < 0.8) {
    if (Array.isArray(container)) container.splice(Number(key), 1);
    else delete container[key];
  } else if (r < 0.9) {
    // Unknown keys are stripped, not refused; a known optional key may appear too.
    const target = Array.isArray(container) ? m : container;
    target[pick(rng, ['extra', 'snapshot', 'context', 'leaveJoint', 'autoLeave', 'kind', 't'])] = pick(rng, ODD_VALUES)();
  } else {
    // Fields carried by the prototype: zod reads them with `in` and `[]`, so must we.
    return Object.create(m) as unknown;
  }
  return m;
}

function issuePaths(v: unknown): string[] {
  const parsed = messageSchema.safeParse(v);
  return parsed.success ? [] : parsed.error.issues.map((i) => i.path.map(String).join('.'));
}

function expectAgreement(v: unknown, where: string): boolean {
  const ours = validateMessage(v);
  const ref = messageSchema.safeParse(v);
  expect(ours.ok, `${where}: ours ${ours.ok ? 'accepted' : `refused (${ours.path.join('.')}: ${ours.error})`}, zod ${ref.success ? 'accepted' : 'refused'}`).toBe(ref.success);
  if (ours.ok && ref.success) {
    expect(ours.message, where).toStrictEqual(ref.data);
  } else if (!ours.ok) {
    // The first problem we name is one of those zod names.
    expect(issuePaths(v), where).toContain(ours.path.join('.'));
  }
  return ours.ok;
}

describe('validateMessage agrees with messageSchema', () => {
  const SEED = 20240611;
  const CASES = 4000;

  it(`on ${CASES} random valid and corrupted messages (seed ${SEED})`, () => {
    const rng = new SeededPrng(SEED);
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < CASES; i++) {
      const valid = randomMessage(rng);
      expect(expectAgreement(valid, `seed ${SEED} case ${i} (valid)`), `case ${i} valid`).toBe(true);
      // Half the corrupted cases go through msgpack first, as on the wire (Buffers, no undefined keys lost).
      const corrupted = mutate(rng, structuredCloneMessage(valid));
      let input: unknown = corrupted;
      if (rng.chance(0.5)) {
        try {
          input = packr.unpack(packr.pack(corrupted));
        } catch {
          input = corrupted; // e.g. a BigInt msgpackr refuses: check it as it is
        }
      }
      if (expectAgreement(input, `seed ${SEED} case ${i} (corrupted)`)) accepted++;
      else refused++;
    }
    // The corruption must exercise both outcomes, or the test proves little.
    expect(refused).toBeGreaterThan(CASES / 2);
    expect(accepted).toBeGreaterThan(CASES / 20);
  });
});

/** A deep copy that keeps Buffer and Uint8Array apart (structuredClone turns Buffers into Uint8Arrays). */
function structuredCloneMessage(v: unknown): Obj {
  const copy = (x: unknown): unknown => {
    if (Buffer.isBuffer(x)) return Buffer.from(x);
    if (x instanceof Uint8Array) return new Uint8Array(x);
    if (Array.isArray(x)) return x.map(copy);
    if (typeof x === 'object' && x !== null) return Object.fromEntries(Object.entries(x).map(([k, y]) => [k, copy(y)]));
    return x;
  };
  return copy(v) as Obj;
}

describe('validateMessage', () => {
  const meta = { index: 4, term: 2, confState: { voters: ['a'], votersOutgoing: [], learners: ['b'], learnersNext: [], autoLeave: false } };

  it('returns the message with bytes copied into fresh plain Uint8Arrays', () => {
    const wire = Buffer.from([0, 1, 2, 3, 4, 5]);
    const m = message('a', 'b', {
      type: 'snap',
      entries: [normalEntry(1, wire.subarray(1, 3)), { kind: 'conf', term: 1, index: 2, change: { changes: [{ type: 'addVoter', node: 'c' }], autoLeave: true } }],
      snapshot: { meta, data: wire.subarray(3) },
      context: 'ctx',
    });
    const r = validateMessage(m);
    if (!r.ok) throw new Error(r.error);
    expect(r.message).toStrictEqual(messageSchema.parse(m));
    const e = r.message.entries[0];
    if (e?.kind !== 'normal') throw new Error('expected a normal entry');
    expect([...e.data]).toEqual([1, 2]);
    expect(Object.getPrototypeOf(e.data)).toBe(Uint8Array.prototype);
    expect(e.data.buffer).not.toBe(wire.buffer);
    expect(e.data.byteLength).toBe(e.data.buffer.byteLength);
    expect(r.message.snapshot?.data.buffer).not.toBe(wire.buffer);
  });

  it('strips unknown keys at every level, as z.object does', () => {
    const m = {
      ...message('a', 'b', { entries: [{ ...normalEntry(1, new Uint8Array(1)), extra: 1 } as never] }),
      snapshot: { meta: { ...meta, extra: 2, confState: { ...meta.confState, extra: 3 } }, data: new Uint8Array(0), extra: 4 },
      extra: 5,
    };
    const r = validateMessage(m);
    if (!r.ok) throw new Error(r.error);
    expect(JSON.stringify(r.message)).not.toContain('extra');
    expect(r.message).toStrictEqual(messageSchema.parse(m));
  });

  it('keeps an optional key present as undefined, and leaves an absent one absent', () => {
    const present = validateMessage({ ...message('a', 'b'), snapshot: undefined, context: undefined });
    const absent = validateMessage(message('a', 'b'));
    expect(present.ok && Object.keys(present.message)).toContain('snapshot');
    expect(absent.ok && Object.keys(absent.message)).not.toContain('snapshot');
  });

  it.each([
    ['index', { index: 1.5 }],
    ['index', { index: -1 }],
    ['index', { index: 2 ** 53 }],
    ['term', { term: NaN }],
    ['term', { term: Infinity }],
    ['commit', { commit: '1' }],
    ['from', { from: 'x'.repeat(257) }],
    ['type', { type: 'hup' }],
    ['reject', { reject: 0 }],
    ['context', { context: 7 }],
    ['context', { context: null }],
    ['entries', { entries: {} }],
    ['entries.0.kind', { entries: [{ kind: 'other', term: 1, index: 1 }] }],
    ['entries.0.data', { entries: [{ kind: 'normal', term: 1, index: 1, data: 'text' }] }],
    ['entries.0.data', { entries: [{ kind: 'normal', term: 1, index: 1, data: new ArrayBuffer(1) }] }],
    ['entries.0.change.changes.0.type', { entries: [{ kind: 'conf', term: 1, index: 1, change: { changes: [{ type: 'bogus', node: 'a' }] } }] }],
    ['entries.0.change.leaveJoint', { entries: [{ kind: 'conf', term: 1, index: 1, change: { changes: [], leaveJoint: 'yes' } }] }],
    ['snapshot.meta.confState.voters.0', { snapshot: { meta: { ...meta, confState: { ...meta.confState, voters: [1] } }, data: new Uint8Array(0) } }],
    ['snapshot.data', { snapshot: { meta } }],
  ])('refuses a bad %s and names it', (path, overrides) => {
    const m = { ...message('a', 'b'), ...overrides };
    const r = validateMessage(m);
    expect(r).toMatchObject({ ok: false, path: path.split('.').map((k) => (/^\d+$/.test(k) ? Number(k) : k)) });
    expect(messageSchema.safeParse(m).success).toBe(false);
  });

  it('accepts the boundaries zod accepts', () => {
    for (const overrides of [{ from: 'x'.repeat(256) }, { index: Number.MAX_SAFE_INTEGER }, { term: -0 }, { context: '' }]) {
      expect(validateMessage({ ...message('a', 'b'), ...overrides }).ok).toBe(true);
      expect(messageSchema.safeParse({ ...message('a', 'b'), ...overrides }).success).toBe(true);
    }
  });

  it('reports the path from the frame in the codec', () => {
    const bad = decodeFrame(encodeFrame({ t: 'msg', m: message('a', 'b', { entries: [normalEntry(1, 'text' as unknown as Uint8Array)] }) }));
    expect(bad).toMatchObject({ ok: false, error: expect.stringMatching(/^invalid frame: m\.entries\.0\.data: expected Uint8Array/) });
    expect(decodeFrame(encodeFrame({ t: 'msg', m: null } as never))).toMatchObject({ ok: false, error: expect.stringContaining('m: expected object') });
  });
});

describe('decodeFrames', () => {
  it('reads frames back to back, in order', () => {
    const frames = [1, 2, 3].map((i) => encodeFrame({ t: 'msg', m: message('a', 'b', { index: i }) }));
    const d = decodeFrames(Buffer.concat(frames));
    if (!d.ok) throw new Error(d.error);
    expect(d.frames.map((f) => f.t === 'msg' && f.m.index)).toEqual([1, 2, 3]);
    expect(decodeFrames(frames[0] ?? new Uint8Array(0))).toMatchObject({ ok: true, frames: [{ t: 'msg' }] });
  });

  it('refuses the whole message when one frame is bad, truncated or not msgpack', () => {
    const good = encodeFrame({ t: 'msg', m: message('a', 'b') });
    const bad = encodeFrame({ t: 'msg', m: { ...message('a', 'b'), index: -1 } });
    expect(decodeFrames(Buffer.concat([good, bad, good]))).toMatchObject({ ok: false, error: expect.stringMatching(/^frame 2 of 3: invalid frame: m\.index/) });
    expect(decodeFrames(Buffer.concat([good, good]).subarray(0, good.length * 2 - 1))).toMatchObject({ ok: false, error: expect.stringContaining('not msgpack') });
    expect(decodeFrames(new Uint8Array(0))).toMatchObject({ ok: false });
    expect(decodeFrames(Buffer.concat([good, Buffer.from([0xc1])]))).toMatchObject({ ok: false });
  });

  it('keeps zod for the other frame types', () => {
    const ack = encodeFrame({ t: 'snapAck', id: 1, ok: true });
    expect(decodeFrames(Buffer.concat([ack, ack]))).toMatchObject({ ok: true, frames: [{ t: 'snapAck' }, { t: 'snapAck' }] });
    expect(decodeFrames(encodeFrame({ t: 'snapAck', id: -1, ok: true }))).toMatchObject({ ok: false, error: expect.stringContaining('id') });
  });
});
