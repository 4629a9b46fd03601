// A hand-written fast path in front of the zod stampedSchema in command.ts. zod allocates a
// payload and an issues array per field on every parse, and every command is parsed on the
// proposer and on every node that applies it; that was 18-23% of all bytes allocated under write
// load. This accepts only what it is certain zod accepts and returns what zod's parsed.data would
// be (new objects in the schema's key order, absent optional keys left out, `doc` by reference).
// Anything else, valid or not, returns undefined and goes to zod, which stays the reference for
// every rejection and its messages. A change to a schema in command.ts must be made here too.

import type { Command, Compare, DeleteOp, Expect, Op, PutOp, RetainCommand, Stamped, StampedRole, TxnCommand } from './command-types.ts';
import {
  collectionNamePattern, idempotencyKeyLengthMax, idLengthMax, principalLengthMax, retainIdsMax, txnComparesMax, txnOpsMax,
} from './limits.ts';

type Obj = Record<string, unknown>;

const stampedKeys = new Set(['cmd', 'ts', 'principal', 'role', 'idempotencyKey']);
const putKeys = new Set(['op', 'collection', 'id', 'doc', 'expect']);
const deleteKeys = new Set(['op', 'collection', 'id', 'expect']);
const txnKeys = new Set(['op', 'compare', 'success', 'failure']);
const retainKeys = new Set(['op', 'collection', 'ids']);
const compareKeys = new Set(['collection', 'id', 'target', 'cmp', 'value']);
const revKeys = new Set(['rev']);
const absentKeys = new Set(['absent']);
const compareOperators = new Set(['=', '!=', '<', '>', '<=', '>=']);

/**
 * A plain object (or null-prototype one) whose enumerable keys are all in `keys`: what
 * z.strictObject checks with for...in. Class instances, Maps and the like go to zod.
 */
function isStrictObject(v: unknown, keys: Set<string>): v is Obj {
  if (typeof v !== 'object' || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const k in v) if (!keys.has(k)) return false;
  return true;
}

/** A real array (no subclass) no longer than `max`. */
function isArrayMax(v: unknown, max: number): v is unknown[] {
  return Array.isArray(v) && Object.getPrototypeOf(v) === Array.prototype && v.length <= max;
}

/** z.number().int().min(min): finite, an integer and a safe one. */
function isIntMin(v: unknown, min: number): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= min;
}

/**
 * zod (4.6) measures strings in code points, which are never more than UTF-16 units: a string of
 * at most `max` units fits, a longer one may still fit, and that is left to zod.
 */
function isStringBetween(v: unknown, min: number, max: number): v is string {
  return typeof v === 'string' && v.length >= min && v.length <= max;
}

function isCollection(v: unknown): v is string {
  return typeof v === 'string' && collectionNamePattern.test(v);
}

/** What idSchema refuses inside an id: '/', a control character (Cc), a lone surrogate (Cs in `u` mode). */
const idForbidden = /[/\p{Cc}\p{Cs}]/u;

function isId(v: unknown): v is string {
  return isStringBetween(v, 1, idLengthMax) && !idForbidden.test(v);
}

function parseId(v: unknown): string | undefined {
  return isId(v) ? v : undefined;
}

function parseExpect(v: unknown): Expect | undefined {
  if (isStrictObject(v, revKeys)) {
    const rev = v.rev;
    return isIntMin(rev, 1) ? { rev } : undefined;
  }
  if (isStrictObject(v, absentKeys) && v.absent === true) return { absent: true };
  return undefined;
}

/** Marks an `expect` that is there and invalid (undefined means absent, or present as undefined). */
const badExpect = Symbol('bad expect');

function parseOptionalExpect(v: unknown): Expect | undefined | typeof badExpect {
  if (v === undefined) return undefined;
  return parseExpect(v) ?? badExpect;
}

function parsePut(v: unknown): PutOp | undefined {
  if (!isStrictObject(v, putKeys)) return undefined;
  const { collection, id, doc } = v;
  // An absent or undefined doc is refused (by zod or by checkSemantics); leave both to zod.
  if (v.op !== 'put' || !isCollection(collection) || !isId(id) || doc === undefined) return undefined;
  const expect = parseOptionalExpect(v.expect);
  if (expect === badExpect) return undefined;
  const out: PutOp = { op: 'put', collection, id, doc: doc as PutOp['doc'] };
  // zod keeps an optional key that is present with the value undefined, so this does too.
  if ('expect' in v) out.expect = expect;
  return out;
}

function parseDelete(v: unknown): DeleteOp | undefined {
  if (!isStrictObject(v, deleteKeys)) return undefined;
  const { collection, id } = v;
  if (v.op !== 'delete' || !isCollection(collection) || !isId(id)) return undefined;
  const expect = parseOptionalExpect(v.expect);
  if (expect === badExpect) return undefined;
  const out: DeleteOp = { op: 'delete', collection, id };
  if ('expect' in v) out.expect = expect;
  return out;
}

/** compareSchema, with its superRefine: exists takes a boolean and = or !=, the others a revision. */
function parseCompare(v: unknown): Compare | undefined {
  if (!isStrictObject(v, compareKeys)) return undefined;
  const { collection, id, target, cmp, value } = v;
  if (!isCollection(collection) || !isId(id) || typeof cmp !== 'string' || !compareOperators.has(cmp)) return undefined;
  if (target === 'exists') {
    if (typeof value !== 'boolean' || (cmp !== '=' && cmp !== '!=')) return undefined;
  } else if (target === 'rev' || target === 'createRev') {
    if (!isIntMin(value, 0)) return undefined;
  } else {
    return undefined;
  }
  return { collection, id, target, cmp: cmp as Compare['cmp'], value };
}

function parseOp(v: unknown): Op | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const op = (v as Obj).op;
  if (op === 'put') return parsePut(v);
  if (op === 'delete') return parseDelete(v);
  return undefined;
}

/**
 * A new array of each element parsed, or undefined if `v` is not an array or any element fails.
 * Copied element by element: slice() would follow an own `constructor` key on the input.
 */
function parseArray<T>(v: unknown, max: number, parse: (e: unknown) => T | undefined): T[] | undefined {
  if (!isArrayMax(v, max)) return undefined;
  const out: T[] = [];
  for (let i = 0; i < v.length; i++) {
    const e = parse(v[i]);
    if (e === undefined) return undefined;
    out.push(e);
  }
  return out;
}

function parseTxn(v: unknown): TxnCommand | undefined {
  if (!isStrictObject(v, txnKeys) || v.op !== 'txn') return undefined;
  const compare = parseArray(v.compare, txnComparesMax, parseCompare);
  if (compare === undefined) return undefined;
  const success = parseArray(v.success, txnOpsMax, parseOp);
  if (success === undefined) return undefined;
  const failure = parseArray(v.failure, txnOpsMax, parseOp);
  if (failure === undefined) return undefined;
  return { op: 'txn', compare, success, failure };
}

function parseRetain(v: unknown): RetainCommand | undefined {
  if (!isStrictObject(v, retainKeys) || v.op !== 'retain') return undefined;
  const { collection, ids } = v;
  if (!isCollection(collection)) return undefined;
  const out = parseArray(ids, retainIdsMax, parseId);
  return out === undefined ? undefined : { op: 'retain', collection, ids: out };
}

function parseCommand(v: unknown): Command | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  switch ((v as Obj).op) {
    case 'put': return parsePut(v);
    case 'delete': return parseDelete(v);
    case 'txn': return parseTxn(v);
    case 'retain': return parseRetain(v);
    default: return undefined;
  }
}

/** An optional bounded string: undefined (absent or present as undefined), or 1..max code units. */
function isOptionalString(v: unknown, max: number): v is string | undefined {
  return v === undefined || isStringBetween(v, 1, max);
}

const stampedRoleSet = new Set<unknown>(['admin', 'operator', 'reader']);

function isRole(v: unknown): v is StampedRole {
  return stampedRoleSet.has(v);
}

/**
 * What `stampedSchema.safeParse(value).data` would be, when this is certain the parse succeeds;
 * undefined otherwise (invalid, or a shape this does not handle), and the caller asks zod.
 */
export function fastParseStamped(value: unknown): Stamped | undefined {
  if (!isStrictObject(value, stampedKeys)) return undefined;
  const { ts, principal, role, idempotencyKey } = value;
  if (!isIntMin(ts, 0)) return undefined;
  if (role !== undefined && !isRole(role)) return undefined;
  if (!isOptionalString(principal, principalLengthMax) || !isOptionalString(idempotencyKey, idempotencyKeyLengthMax)) return undefined;
  const cmd = parseCommand(value.cmd);
  if (cmd === undefined) return undefined;
  const out: Stamped = { cmd, ts };
  if ('principal' in value) out.principal = principal;
  if ('role' in value) out.role = role;
  if ('idempotencyKey' in value) out.idempotencyKey = idempotencyKey;
  return out;
}
