// What a peer could put on the wire, as fast-check arbitraries, for the fuzz tests of the
// in-memory cluster, of a real three-process cluster and of the fault suite's nemesis.
//
// An arbitrary draws a recipe (plain data, so fast-check shrinks and prints it); `render`
// turns a recipe into the bytes of one WebSocket message for a given sender, receiver and
// current term, so one recipe stays meaningful while the cluster's term moves on. The kinds:
//
//   valid        a message a correct member could send (shape and meaning hold); it may still
//                be a lie (an acknowledgement of entries the sender lacks)
//   meaningless  a valid message broken by one meaning rule of check-message.ts
//   malformed    a valid message broken for the shape check (a field of the wrong type, ...)
//   corrupted    a valid frame with bytes flipped or cut off
//   garbage      random bytes, or msgpack of a random value
//   frame        a frame the connection does not carry after the hello (hello, snapAck, ...)
//   (valid)      also, in the hostile mix, valid messages of a past term
//   batch        several of the above in one WebSocket message (protocol 2)
//
// `classify` says what a receiver does with rendered bytes (dropped, ignored as stale, or
// admitted), so a test against a real cluster can send only what a correct cluster must shrug
// off: Raft trusts its members, and an admitted lie can stall it.

import fc from 'fast-check';
import { Packr } from 'msgpackr';
import type { ConfState, Entry, Message, MessageType, NodeId } from '../../src/raft/types.ts';
import { admitMessage } from '../../transport/check-message.ts';
import { decodeFrames } from '../../transport/codec.ts';
import { NETWORK_MESSAGE_TYPES } from '../../transport/frames.ts';

const packr = new Packr({ useRecords: false, moreTypes: false });

/** Who sends to whom: `from` is the node the connection is authenticated as. */
export interface Route {
  from: NodeId;
  to: NodeId;
  /** Every member, `from` and `to` included. */
  members: readonly NodeId[];
  /** The receiver's term, about: valid messages carry terms around it. */
  term: number;
  /** A payload the receiver can restore: when set, half the valid snapshots carry it, the rest random bytes. */
  snapshotData?: Uint8Array;
}

type NetworkType = (typeof NETWORK_MESSAGE_TYPES)[number];
const FORWARDED: ReadonlySet<MessageType> = new Set(['prop', 'readIndex', 'transferLeader']);

/** The free choices of a valid message; `build` fixes the rest so the message obeys every rule. */
export interface ValidRecipe {
  kind: 'valid';
  type: NetworkType;
  /** Added to the route's term (at least 1 stays). */
  termDelta: number;
  index: number;
  /** Picks the log term below the term. */
  logTermPick: number;
  commit: number;
  reject: boolean;
  rejectHint: number;
  /** The entries: term increments between consecutive ones of an append, and their data. */
  entries: { bump: number; data: Uint8Array }[];
  context: string | undefined;
  snapIndex: number;
  snapTermPick: number;
  confShape: number;
  snapData: Uint8Array;
}

export const MEANING_RULES = [
  'snapWithoutSnapshot', 'snapshotOnOtherType', 'snapIndexZero', 'snapTermZero', 'snapTermAhead', 'learnerVoter',
  'learnerNextNotOutgoing', 'noVoters', 'emptyMemberId', 'autoLeaveNotJoint', 'propWithoutEntries', 'propEmptyConfChange',
  'appGap', 'appTermDecreases', 'appEntryTermAhead', 'appEntryTermZero', 'appLogTermAhead', 'appIndexWithoutTerm',
  'entriesOnOtherType', 'termZero', 'relayedWithTerm', 'contextTooLong', 'wrongSender', 'misaddressed',
] as const;
export type MeaningRule = (typeof MEANING_RULES)[number];

export const SHAPE_BREAKS = [
  'negative', 'fraction', 'notFinite', 'unsafeInteger', 'numberAsString', 'nullField', 'missingField', 'localType',
  'unknownType', 'longId', 'idNotString', 'entriesNotArray', 'entryKind', 'entryDataString', 'confChangeType',
  'snapshotMetaMissing', 'votersNotArray', 'rejectNotBoolean', 'contextNotString', 'notAnObject',
] as const;
export type ShapeBreak = (typeof SHAPE_BREAKS)[number];

export type Recipe =
  | ValidRecipe
  | { kind: 'meaningless'; rule: MeaningRule; base: ValidRecipe }
  | { kind: 'malformed'; brk: ShapeBreak; field: number; base: ValidRecipe }
  | { kind: 'corrupted'; base: ValidRecipe; flips: { at: number; xor: number }[]; cut: number }
  | { kind: 'garbage'; bytes: Uint8Array }
  | { kind: 'anything'; value: unknown }
  | { kind: 'frame'; frame: 'hello' | 'snapAck' | 'snapChunk' | 'snapBegin'; base: ValidRecipe }
  | { kind: 'batch'; parts: Recipe[] };

export const validRecipeArb: fc.Arbitrary<ValidRecipe> = fc.record({
  kind: fc.constant('valid' as const),
  type: fc.constantFrom(...NETWORK_MESSAGE_TYPES),
  // Mostly the receiver's own term: most of what a message can do, it does in the current term.
  termDelta: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: -3, max: 2 }) }),
  index: fc.oneof(fc.nat({ max: 40 }), fc.nat({ max: 400 })),
  logTermPick: fc.nat({ max: 1000 }),
  commit: fc.oneof(fc.nat({ max: 40 }), fc.nat({ max: 400 })),
  reject: fc.boolean(),
  rejectHint: fc.nat({ max: 400 }),
  entries: fc.array(fc.record({ bump: fc.nat({ max: 1 }), data: fc.uint8Array({ maxLength: 32 }) }), { maxLength: 4 }),
  context: fc.option(fc.constantFrom('transfer', 'persisted?', '1', '7', 'n\u00001'), { nil: undefined }),
  snapIndex: fc.integer({ min: 1, max: 400 }),
  snapTermPick: fc.nat({ max: 1000 }),
  confShape: fc.nat({ max: 3 }),
  snapData: fc.uint8Array({ maxLength: 64 }),
});

/**
 * Inputs meant to be dropped: all but a few (a corrupted frame whose flips hit only entry data
 * still decodes, and is admitted); filter with `classify` where only drops may pass.
 */
export function hostileRecipeArb(): fc.Arbitrary<Recipe> {
  const single: fc.Arbitrary<Recipe> = fc.oneof(
    fc.record({ kind: fc.constant('meaningless' as const), rule: fc.constantFrom(...MEANING_RULES), base: validRecipeArb }),
    fc.record({ kind: fc.constant('malformed' as const), brk: fc.constantFrom(...SHAPE_BREAKS), field: fc.nat({ max: 20 }), base: validRecipeArb }),
    fc.record({
      kind: fc.constant('corrupted' as const), base: validRecipeArb,
      flips: fc.array(fc.record({ at: fc.nat({ max: 10_000 }), xor: fc.integer({ min: 1, max: 255 }) }), { minLength: 1, maxLength: 3 }),
      cut: fc.nat({ max: 10_000 }),
    }),
    fc.record({ kind: fc.constant('garbage' as const), bytes: fc.uint8Array({ maxLength: 256 }) }),
    fc.record({ kind: fc.constant('anything' as const), value: fc.anything({ maxDepth: 3, withNullPrototype: false }) }),
    fc.record({ kind: fc.constant('frame' as const), frame: fc.constantFrom('hello' as const, 'snapAck' as const, 'snapChunk' as const), base: validRecipeArb }),
    // Of a past term (unless relayed, which carries none): what the core ignores or answers with its term.
    validRecipeArb.map((r): Recipe => ({ ...r, termDelta: -1 - Math.abs(r.termDelta) })),
  );
  return fc.oneof({ weight: 5, arbitrary: single }, { weight: 1, arbitrary: fc.record({ kind: fc.constant('batch' as const), parts: fc.array(single, { minLength: 2, maxLength: 4 }) }) });
}

// ---- building messages -------------------------------------------------------------------

function confStateOf(shape: number, members: readonly NodeId[]): ConfState {
  const [a = 'a', b = 'b', c = 'c'] = members;
  const base: ConfState = { voters: [...members], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false };
  switch (shape % 4) {
    case 1: return { ...base, voters: [a, b], learners: [c] };
    case 2: return { ...base, voters: [a, b], votersOutgoing: [a, b, c], learnersNext: [c], autoLeave: true };
    case 3: return { ...base, voters: [a] };
    default: return base;
  }
}

/** A message that passes the shape and meaning checks on `route`. */
export function buildValid(r: ValidRecipe, route: Route): Message {
  const term = FORWARDED.has(r.type) ? 0 : Math.max(1, route.term + r.termDelta);
  const m: Message = {
    type: r.type, from: route.from, to: route.to, term, logTerm: 0, index: r.index, entries: [], commit: r.commit,
    reject: r.reject, rejectHint: r.rejectHint,
  };
  if (r.context !== undefined) m.context = r.context;
  if (r.type === 'vote' || r.type === 'preVote' || r.type === 'app') m.logTerm = r.logTermPick % (term + 1);
  if (r.type === 'app') {
    if (m.index === 0) m.logTerm = 0;
    else if (m.logTerm === 0) m.logTerm = 1;
    let t = Math.max(1, m.logTerm);
    m.entries = r.entries.map((e, i): Entry => {
      t = Math.min(term, t + e.bump);
      return { kind: 'normal', term: t, index: m.index + 1 + i, data: e.data };
    });
  }
  if (r.type === 'prop') {
    const entries = r.entries.length > 0 ? r.entries : [{ bump: 0, data: new Uint8Array([1]) }];
    m.entries = entries.map((e): Entry => ({ kind: 'normal', term: 0, index: 0, data: e.data }));
  }
  if (r.type === 'snap') {
    m.snapshot = {
      meta: { index: r.snapIndex, term: 1 + (r.snapTermPick % term), confState: confStateOf(r.confShape, route.members) },
      data: route.snapshotData !== undefined && r.snapData.length % 2 === 0 ? route.snapshotData : r.snapData,
    };
  }
  return m;
}

/** A valid message with one meaning rule broken. */
export function buildMeaningless(rule: MeaningRule, base: ValidRecipe, route: Route): Message {
  const withType = (type: NetworkType): Message => buildValid({ ...base, type }, route);
  const snap = (): Message & { snapshot: NonNullable<Message['snapshot']> } => {
    const m = withType('snap');
    if (m.snapshot === undefined) throw new Error('a snap without a snapshot');
    return { ...m, snapshot: m.snapshot };
  };
  const withConf = (change: Partial<ConfState>): Message => {
    const m = snap();
    return { ...m, snapshot: { ...m.snapshot, meta: { ...m.snapshot.meta, confState: { ...m.snapshot.meta.confState, ...change } } } };
  };
  const app = (): Message => ({ ...withType('app'), index: base.index + 1, logTerm: 1 });
  const entry = (index: number, term: number): Entry => ({ kind: 'normal', term, index, data: new Uint8Array(0) });
  const [a = 'a', b = 'b', c = 'c'] = route.members;
  switch (rule) {
    case 'snapWithoutSnapshot': { const { snapshot: _s, ...m } = snap(); return m; }
    case 'snapshotOnOtherType': return { ...withType('heartbeat'), snapshot: snap().snapshot };
    case 'snapIndexZero': { const m = snap(); return { ...m, snapshot: { ...m.snapshot, meta: { ...m.snapshot.meta, index: 0 } } }; }
    case 'snapTermZero': { const m = snap(); return { ...m, snapshot: { ...m.snapshot, meta: { ...m.snapshot.meta, term: 0 } } }; }
    case 'snapTermAhead': { const m = snap(); return { ...m, snapshot: { ...m.snapshot, meta: { ...m.snapshot.meta, term: m.term + 1 } } }; }
    case 'learnerVoter': return withConf({ voters: [a, b, c], votersOutgoing: [], learners: [c], learnersNext: [], autoLeave: false });
    case 'learnerNextNotOutgoing': return withConf({ voters: [a, b], votersOutgoing: [], learners: [], learnersNext: [c], autoLeave: false });
    case 'noVoters': return withConf({ voters: [], votersOutgoing: [], learners: [a], learnersNext: [], autoLeave: false });
    case 'emptyMemberId': return withConf({ voters: [a, ''], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false });
    case 'autoLeaveNotJoint': return withConf({ voters: [a, b, c], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: true });
    case 'propWithoutEntries': return { ...withType('prop'), entries: [] };
    case 'propEmptyConfChange': return { ...withType('prop'), entries: [{ kind: 'conf', term: 0, index: 0, change: { changes: [] } }] };
    case 'appGap': { const m = app(); return { ...m, entries: [entry(m.index + 2, m.term)] }; }
    case 'appTermDecreases': { const m = app(); return { ...m, term: m.term + 1, entries: [entry(m.index + 1, m.term + 1), entry(m.index + 2, 1)] }; }
    case 'appEntryTermAhead': { const m = app(); return { ...m, entries: [entry(m.index + 1, m.term + 1)] }; }
    case 'appEntryTermZero': { const m = app(); return { ...m, logTerm: 0, index: 0, entries: [entry(1, 0)] }; }
    case 'appLogTermAhead': { const m = app(); return { ...m, logTerm: m.term + 1, entries: [] }; }
    case 'appIndexWithoutTerm': return { ...app(), logTerm: 0, entries: [] };
    case 'entriesOnOtherType': return { ...withType('heartbeat'), entries: [entry(1, 1)] };
    case 'termZero': return { ...withType(base.type === 'prop' || base.type === 'readIndex' || base.type === 'transferLeader' ? 'vote' : base.type), term: 0 };
    case 'relayedWithTerm': return { ...withType('readIndex'), term: Math.max(1, route.term) };
    case 'contextTooLong': return { ...withType('heartbeat'), context: 'c'.repeat(2000) };
    case 'wrongSender': return { ...withType(base.type), from: route.members.find((x) => x !== route.from && x !== route.to) ?? 'mallory' };
    case 'misaddressed': return { ...withType(base.type), to: route.members.find((x) => x !== route.to && x !== route.from) ?? 'nobody' };
  }
}

const WEIRD_VALUES: readonly unknown[] = [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '1', null];
const NUMBER_FIELDS = ['term', 'logTerm', 'index', 'commit', 'rejectHint'] as const;
const REQUIRED_FIELDS = ['type', 'from', 'to', 'term', 'logTerm', 'index', 'entries', 'commit', 'reject', 'rejectHint'] as const;

/** A value shaped like a message but refused by the shape check. */
export function buildMalformed(brk: ShapeBreak, field: number, base: ValidRecipe, route: Route): unknown {
  const m = buildValid(base, route) as unknown as Record<string, unknown>;
  const num = NUMBER_FIELDS[field % NUMBER_FIELDS.length] as string;
  const entryBase = { kind: 'normal', term: 1, index: 1, data: new Uint8Array(1) };
  const meta = { index: 1, term: 1, confState: { voters: [route.to], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
  switch (brk) {
    case 'negative': return { ...m, [num]: -1 - field };
    case 'fraction': return { ...m, [num]: field + 0.5 };
    case 'notFinite': return { ...m, [num]: field % 2 === 0 ? Number.NaN : Number.POSITIVE_INFINITY };
    case 'unsafeInteger': return { ...m, [num]: 2 ** 53 + 2 * field };
    case 'numberAsString': return { ...m, [num]: String(field) };
    case 'nullField': return { ...m, [REQUIRED_FIELDS[field % REQUIRED_FIELDS.length] as string]: null };
    case 'missingField': { const copy = { ...m }; delete copy[REQUIRED_FIELDS[field % REQUIRED_FIELDS.length] as string]; return copy; }
    case 'localType': return { ...m, type: ['hup', 'beat', 'checkQuorum', 'unreachable', 'snapStatus'][field % 5] };
    case 'unknownType': return { ...m, type: field % 2 === 0 ? 'nope' : field };
    case 'longId': return { ...m, [field % 2 === 0 ? 'from' : 'to']: 'x'.repeat(257) };
    case 'idNotString': return { ...m, [field % 2 === 0 ? 'from' : 'to']: field };
    case 'entriesNotArray': return { ...m, entries: field % 2 === 0 ? {} : 'entries' };
    case 'entryKind': return { ...m, entries: [{ ...entryBase, kind: 'weird' }] };
    case 'entryDataString': return { ...m, entries: [{ ...entryBase, data: 'text' }] };
    case 'confChangeType': return { ...m, entries: [{ kind: 'conf', term: 1, index: 1, change: { changes: [{ type: 'promote', node: 'x' }] } }] };
    case 'snapshotMetaMissing': return { ...m, snapshot: { data: new Uint8Array(1) } };
    case 'votersNotArray': return { ...m, snapshot: { meta: { ...meta, confState: { ...meta.confState, voters: 'all' } }, data: new Uint8Array(0) } };
    case 'rejectNotBoolean': return { ...m, reject: field % 2 === 0 ? 'yes' : 1 };
    case 'contextNotString': return { ...m, context: field };
    case 'notAnObject': return WEIRD_VALUES[field % WEIRD_VALUES.length] ?? [m];
  }
}

// ---- bytes -------------------------------------------------------------------------------

/** The bytes of one WebSocket message for `r` on `route`. */
export function render(r: Recipe, route: Route): Uint8Array {
  switch (r.kind) {
    case 'valid': return packr.pack({ t: 'msg', m: buildValid(r, route) });
    case 'meaningless': return packr.pack({ t: 'msg', m: buildMeaningless(r.rule, r.base, route) });
    case 'malformed': return packr.pack({ t: 'msg', m: buildMalformed(r.brk, r.field, r.base, route) });
    case 'corrupted': {
      const bytes = Uint8Array.from(packr.pack({ t: 'msg', m: buildValid(r.base, route) }));
      for (const f of r.flips) bytes[f.at % bytes.length] = (bytes[f.at % bytes.length] as number) ^ f.xor;
      return bytes.subarray(0, Math.max(1, bytes.length - (r.cut % bytes.length)));
    }
    case 'garbage': return r.bytes;
    case 'anything': return packOrBytes(r.value);
    case 'frame': return packr.pack(otherFrame(r.frame, r.base, route));
    case 'batch': return Buffer.concat(r.parts.map((p) => render(p, route)));
  }
}

function packOrBytes(value: unknown): Uint8Array {
  try {
    return packr.pack(value);
  } catch {
    return new TextEncoder().encode(String(value));
  }
}

function otherFrame(kind: 'hello' | 'snapAck' | 'snapChunk' | 'snapBegin', base: ValidRecipe, route: Route): unknown {
  switch (kind) {
    case 'hello':
      return { t: 'hello', clusterId: 'c', nodeId: route.from, protocolVersion: 1, protocolMin: 1, protocolMax: 2, softwareVersion: 'fuzz' };
    case 'snapAck': return { t: 'snapAck', id: base.index, ok: base.reject };
    case 'snapChunk': return { t: 'snapChunk', id: base.index + 1_000_000, offset: base.commit, data: base.snapData };
    case 'snapBegin': return { t: 'snapBegin', id: base.index + 1_000_000, bytes: base.snapData.length, m: buildValid({ ...base, type: 'snap' }, route) };
  }
}

export type Fate = 'dropped' | 'stale' | 'admitted';

/**
 * What a receiver does with `bytes` from `route.from` (a connection past its hello, protocol 2):
 * 'dropped' by the transport's checks, 'stale' (every message admitted but of a term below
 * `route.term`, which the core ignores or answers with its term), or 'admitted'. A chunk of no
 * stream in progress counts as dropped; a snapshot stream's begin as admitted.
 */
export function classify(bytes: Uint8Array, route: Route): Fate {
  const decoded = decodeFrames(bytes);
  if (!decoded.ok) return 'dropped';
  let fate: Fate = 'dropped';
  for (const f of decoded.frames) {
    if (f.t !== 'msg' && f.t !== 'snapBegin') continue;
    if (admitMessage(f.m, route.from, route.to) !== undefined) continue;
    if (FORWARDED.has(f.m.type) || f.m.term >= route.term) return 'admitted';
    fate = 'stale';
  }
  return fate;
}
