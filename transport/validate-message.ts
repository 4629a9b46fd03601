// The check of a decoded 'msg' frame's message, written by hand because it runs once per Raft
// message: zod cost 6-7 % of a busy leader's CPU here. It accepts and rejects exactly what
// `messageSchema` (frames.ts) does and returns the same value: unknown keys stripped, bytes
// copied into a fresh plain Uint8Array, an optional key present as undefined kept as undefined.
// test/transport/validate-message.test.ts holds the two to agreement on random inputs; a
// change to one must be made to the other.

import { NETWORK_MESSAGE_TYPES, type DecodedMessage } from './frames.ts';

export type PathKey = string | number;

export type MessageCheck = { ok: true; message: DecodedMessage } | { ok: false; path: PathKey[]; error: string };

export function validateMessage(value: unknown): MessageCheck {
  try {
    return { ok: true, message: message(value) };
  } catch (err) {
    if (err instanceof Invalid) return { ok: false, path: err.path, error: err.message };
    throw err;
  }
}

/** Thrown at the first invalid field; each enclosing level adds its key on the way out. */
class Invalid extends Error {
  constructor(
    readonly path: PathKey[],
    message: string,
  ) {
    super(message);
  }
}

function within(err: unknown, ...keys: PathKey[]): never {
  if (err instanceof Invalid) err.path.unshift(...keys);
  throw err;
}

// The decoded shapes, as zod infers them (bytes are Uint8Array<ArrayBuffer>: fresh copies).
type NetworkType = DecodedMessage['type'];
type Entry = DecodedMessage['entries'][number];
type ConfChange = Extract<Entry, { kind: 'conf' }>['change'];
type ConfChangeSingle = ConfChange['changes'][number];
type Snapshot = NonNullable<DecodedMessage['snapshot']>;
type ConfState = Snapshot['meta']['confState'];
const NETWORK_TYPES: ReadonlySet<unknown> = new Set(NETWORK_MESSAGE_TYPES);
const CONF_CHANGE_TYPES: ReadonlySet<unknown> = new Set(['addVoter', 'addLearner', 'removeNode']);
const ID_LENGTH_MAX = 256;

/** zod's object test: arrays are not objects, anything else non-null of type object is. */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 32 ? `${v.slice(0, 32)}...` : v);
  if (v instanceof Uint8Array) return 'bytes';
  return typeof v;
}

function object(v: unknown, key: PathKey): Record<string, unknown> {
  if (isObject(v)) return v;
  throw new Invalid([key], `expected object, received ${describe(v)}`);
}

function id(v: unknown, key: PathKey): string {
  if (typeof v === 'string' && v.length <= ID_LENGTH_MAX) return v;
  throw new Invalid([key], typeof v === 'string' ? `too long: ${v.length} > ${ID_LENGTH_MAX} characters` : `expected string, received ${describe(v)}`);
}

/** z.number().int().nonnegative(): finite, a safe integer, and >= 0 (-0 passes). */
function count(v: unknown, key: PathKey): number {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  throw new Invalid([key], `expected a non-negative safe integer, received ${describe(v)}`);
}

function bool(v: unknown, key: PathKey): boolean {
  if (typeof v === 'boolean') return v;
  throw new Invalid([key], `expected boolean, received ${describe(v)}`);
}

function string(v: unknown, key: PathKey): string {
  if (typeof v === 'string') return v;
  throw new Invalid([key], `expected string, received ${describe(v)}`);
}

/** msgpackr's Buffer may share memory with the whole frame; the copy detaches it. */
function bytes(v: unknown, key: PathKey): Uint8Array<ArrayBuffer> {
  if (v instanceof Uint8Array) return new Uint8Array(v);
  throw new Invalid([key], `expected Uint8Array, received ${describe(v)}`);
}

function ids(v: unknown, key: PathKey): string[] {
  if (!Array.isArray(v)) throw new Invalid([key], `expected array, received ${describe(v)}`);
  const out = new Array<string>(v.length);
  try {
    for (let i = 0; i < v.length; i++) out[i] = id(v[i], i);
  } catch (err) {
    within(err, key);
  }
  return out;
}

/** Paths are relative to the message. */
function message(v: unknown): DecodedMessage {
  if (!isObject(v)) throw new Invalid([], `expected object, received ${describe(v)}`);
  const o = v;
  if (!NETWORK_TYPES.has(o.type)) throw new Invalid(['type'], `expected one of the network message types, received ${describe(o.type)}`);
  const m: DecodedMessage = {
    type: o.type as NetworkType,
    from: id(o.from, 'from'),
    to: id(o.to, 'to'),
    term: count(o.term, 'term'),
    logTerm: count(o.logTerm, 'logTerm'),
    index: count(o.index, 'index'),
    entries: entries(o.entries),
    commit: count(o.commit, 'commit'),
    reject: bool(o.reject, 'reject'),
    rejectHint: count(o.rejectHint, 'rejectHint'),
  };
  // Optional keys: absent stays absent, present as undefined stays present (as zod does).
  if ('snapshot' in o) m.snapshot = o.snapshot === undefined ? undefined : snapshot(o.snapshot);
  if ('context' in o) m.context = o.context === undefined ? undefined : string(o.context, 'context');
  if ('origin' in o) m.origin = o.origin === undefined ? undefined : id(o.origin, 'origin');
  return m;
}

function entries(v: unknown): Entry[] {
  if (!Array.isArray(v)) throw new Invalid(['entries'], `expected array, received ${describe(v)}`);
  const out = new Array<Entry>(v.length);
  for (let i = 0; i < v.length; i++) {
    try {
      out[i] = entry(v[i], i);
    } catch (err) {
      within(err, 'entries');
    }
  }
  return out;
}

function entry(v: unknown, i: number): Entry {
  const o = object(v, i);
  try {
    if (o.kind === 'normal') return { kind: 'normal', term: count(o.term, 'term'), index: count(o.index, 'index'), data: bytes(o.data, 'data') };
    if (o.kind === 'conf') return { kind: 'conf', term: count(o.term, 'term'), index: count(o.index, 'index'), change: confChange(o.change) };
    throw new Invalid(['kind'], `expected 'normal' or 'conf', received ${describe(o.kind)}`);
  } catch (err) {
    return within(err, i);
  }
}

function confChange(v: unknown): ConfChange {
  const o = object(v, 'change');
  try {
    if (!Array.isArray(o.changes)) throw new Invalid(['changes'], `expected array, received ${describe(o.changes)}`);
    const changes = new Array<ConfChangeSingle>(o.changes.length);
    for (let i = 0; i < o.changes.length; i++) {
      try {
        changes[i] = confChangeSingle(o.changes[i], i);
      } catch (err) {
        within(err, 'changes');
      }
    }
    const c: ConfChange = { changes };
    if ('leaveJoint' in o) c.leaveJoint = o.leaveJoint === undefined ? undefined : bool(o.leaveJoint, 'leaveJoint');
    if ('autoLeave' in o) c.autoLeave = o.autoLeave === undefined ? undefined : bool(o.autoLeave, 'autoLeave');
    if ('context' in o) c.context = o.context === undefined ? undefined : string(o.context, 'context');
    return c;
  } catch (err) {
    return within(err, 'change');
  }
}

function confChangeSingle(v: unknown, i: number): ConfChangeSingle {
  const o = object(v, i);
  try {
    if (!CONF_CHANGE_TYPES.has(o.type)) throw new Invalid(['type'], `expected 'addVoter', 'addLearner' or 'removeNode', received ${describe(o.type)}`);
    return { type: o.type as ConfChangeSingle['type'], node: id(o.node, 'node') };
  } catch (err) {
    return within(err, i);
  }
}

function snapshot(v: unknown): Snapshot {
  const o = object(v, 'snapshot');
  try {
    const meta = object(o.meta, 'meta');
    let confState: ConfState;
    let index: number;
    let term: number;
    try {
      index = count(meta.index, 'index');
      term = count(meta.term, 'term');
      confState = confStateOf(meta.confState);
    } catch (err) {
      return within(err, 'meta');
    }
    return { meta: { index, term, confState }, data: bytes(o.data, 'data') };
  } catch (err) {
    return within(err, 'snapshot');
  }
}

function confStateOf(v: unknown): ConfState {
  const o = object(v, 'confState');
  try {
    return {
      voters: ids(o.voters, 'voters'),
      votersOutgoing: ids(o.votersOutgoing, 'votersOutgoing'),
      learners: ids(o.learners, 'learners'),
      learnersNext: ids(o.learnersNext, 'learnersNext'),
      autoLeave: bool(o.autoLeave, 'autoLeave'),
    };
  } catch (err) {
    return within(err, 'confState');
  }
}
