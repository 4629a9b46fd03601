// Commands: what a proposer puts in a log entry for the document store, how they are encoded
// (msgpack), and the one validator both encodeCommand (on the proposer) and apply (on every node)
// run, so a command the leader accepted is valid everywhere.
// validateStamped tries fastParseStamped (validate-command.ts) before zod: zod's per-field
// allocations were 18-23% of all bytes a node allocated under write load, and the young-generation
// GC pauses they caused showed in the write p99. The fast path only accepts what zod would; every
// rejection, and every shape it does not handle, goes to the zod schema below, which stays the
// reference (and the source of every error message).

import { Packr } from 'msgpackr';
import { z } from 'zod';
import { InvalidCommandError } from './errors.ts';
import { checkJsonObject, deepFreeze, jsonBytes, type Issue } from './json-value.ts';
import { fastParseStamped } from './validate-command.ts';
import {
  collectionNamePattern, commandBytesMax, docBytesMax, idempotencyKeyLengthMax, idLengthMax,
  principalLengthMax, retainIdsMax, txnComparesMax, txnOpsMax,
} from './limits.ts';

export type {
  Command, CompactCommand, Compare, CompareOperator, CompareTarget, DeleteOp, Expect, Op, PutOp, RetainCommand, Stamped, StampedRole, TxnCommand,
} from './command-types.ts';
export { stampedRoles } from './command-types.ts';
import { stampedRoles, type Command, type Op, type PutOp, type Stamped } from './command-types.ts';

const collectionNameRule = 'collection names are 1-63 characters of a-z, 0-9, _ . - and start with a letter or digit';
const idRules = {
  short: 'ids are at least 1 character',
  long: `ids are at most ${idLengthMax} characters`,
  slash: "ids may not contain '/'",
  control: 'ids may not contain control characters (U+0000-U+001F, U+007F-U+009F: NUL, tab, newline, DEL, ...)',
  unicode: 'ids must be well-formed Unicode (a lone surrogate cannot be written in a URL)',
};
// One regex per rule, so that each problem has its own message and the OpenAPI document
// (z.toJSONSchema) shows the patterns. In `u` mode a surrogate pair is one code point (not Cs).
const noSlash = /^[^/]*$/;
const noControl = /^\P{Cc}*$/u;
const wellFormed = /^\P{Cs}*$/u;
const idCharsSchema = (min: number, what: string) => z.string()
  .min(min, idRules.short).max(idLengthMax, `${what} at most ${idLengthMax} characters`)
  .regex(noSlash, idRules.slash).regex(noControl, idRules.control).regex(wellFormed, idRules.unicode);
// Declarative, so that the OpenAPI document (z.toJSONSchema) shows the pattern and lengths.
export const collectionSchema = z.string().regex(collectionNamePattern, collectionNameRule);
/**
 * The one id rule, on every path an id can take (URL, txn body, store, snapshot): an id that can
 * be written can be read, listed and deleted through the URL (one path segment).
 */
export const idSchema = idCharsSchema(1, 'ids are');
/** The beginning of an id (list `prefix`, watch `prefix`) or a list cursor (`after`): the id rule, and empty allowed. */
export const idPrefixSchema = idCharsSchema(0, 'a prefix or cursor is');

/** The rule collectionSchema checks, as a plain function, for hand-written checks of many rows. */
export function collectionNameProblem(v: unknown): string | undefined {
  if (typeof v !== 'string') return 'expected a collection name (a string)';
  return collectionNamePattern.test(v) ? undefined : collectionNameRule;
}

/** The rules idSchema checks, as a plain function, for hand-written checks of many rows. */
export function idProblem(v: unknown): string | undefined {
  if (typeof v !== 'string') return 'expected an id (a string)';
  if (v.length < 1) return idRules.short;
  return idCharsProblem(v, 'ids are');
}

/** The rules idPrefixSchema checks (an empty string passes). */
export function idPrefixProblem(v: unknown): string | undefined {
  if (typeof v !== 'string') return 'expected a string';
  return idCharsProblem(v, 'a prefix or cursor is');
}

function idCharsProblem(v: string, what: string): string | undefined {
  // zod counts code points; UTF-16 units are never fewer.
  if (v.length > idLengthMax && [...v].length > idLengthMax) return `${what} at most ${idLengthMax} characters`;
  if (!noSlash.test(v)) return idRules.slash;
  if (!noControl.test(v)) return idRules.control;
  return wellFormed.test(v) ? undefined : idRules.unicode;
}
/** A field path for `value` compares: 1-8 keys of letters, digits, _ and -, joined by dots. */
export const comparePathPattern = /^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$/;

/**
 * The stamped-command schema, current, or `legacy`: what the first release accepted (its id
 * rule, no fence, no value compares), for entries applied at feature level 1.
 */
function buildStampedSchema(idSchema: z.ZodType<string>, legacy: boolean) {
  const revSchema = z.number().int().min(1);
  const expectSchema = z.union([z.strictObject({ rev: revSchema }), z.strictObject({ absent: z.literal(true) })]);
  const putSchema = z.strictObject({ op: z.literal('put'), collection: collectionSchema, id: idSchema, doc: z.unknown(), expect: expectSchema.optional() });
  const deleteSchema = z.strictObject({ op: z.literal('delete'), collection: collectionSchema, id: idSchema, expect: expectSchema.optional() });
  const opSchema = z.discriminatedUnion('op', [putSchema, deleteSchema]);
  const compareSchema = z.strictObject({
    collection: collectionSchema,
    id: idSchema,
    target: z.enum(['rev', 'createRev', 'exists', 'value']),
    cmp: z.enum(['=', '!=', '<', '>', '<=', '>=']),
    value: z.union([z.number().int().min(0), z.boolean(), z.string().max(256)]),
    path: z.string().regex(comparePathPattern, 'a path is 1-8 keys of letters, digits, _ and -, joined by dots').optional(),
  }).superRefine((c, ctx) => {
    const equality = c.cmp === '=' || c.cmp === '!=';
    if (legacy && (c.target === 'value' || typeof c.value === 'string')) {
      ctx.addIssue({ code: 'custom', path: ['target'], message: 'value compares need cluster feature level 2' });
      return;
    }
    if (c.target === 'value') {
      if (c.path === undefined) ctx.addIssue({ code: 'custom', path: ['path'], message: 'target value needs the path of the field it compares' });
      if (typeof c.value !== 'number' && !equality) ctx.addIssue({ code: 'custom', path: ['cmp'], message: "a string or boolean value takes only '=' or '!='" });
      return;
    }
    if (c.path !== undefined) ctx.addIssue({ code: 'custom', path: ['path'], message: 'only target value takes a path' });
    if (c.target === 'exists' && typeof c.value !== 'boolean') ctx.addIssue({ code: 'custom', path: ['value'], message: 'target exists compares with true or false' });
    if (c.target === 'exists' && !equality) ctx.addIssue({ code: 'custom', path: ['cmp'], message: "target exists takes only '=' or '!='" });
    if (c.target !== 'exists' && typeof c.value !== 'number') ctx.addIssue({ code: 'custom', path: ['value'], message: `target ${c.target} compares with a revision number` });
  });
  const txnSchema = z.strictObject({
    op: z.literal('txn'),
    compare: z.array(compareSchema).max(txnComparesMax),
    success: z.array(opSchema).max(txnOpsMax),
    failure: z.array(opSchema).max(txnOpsMax),
  });
  const retainSchema = z.strictObject({ op: z.literal('retain'), collection: collectionSchema, ids: z.array(idSchema).max(retainIdsMax) });
  const compactSchema = z.strictObject({ op: z.literal('compact') });
  const commandSchema = z.discriminatedUnion('op', [putSchema, deleteSchema, txnSchema, retainSchema, compactSchema]);
  const shape = {
    cmd: commandSchema,
    ts: z.number().int().min(0),
    fence: z.strictObject({ term: z.number().int().min(1) }).optional(),
    principal: z.string().min(1).max(principalLengthMax).optional(),
    role: z.enum(stampedRoles).optional(),
    idempotencyKey: z.string().min(1).max(idempotencyKeyLengthMax).optional(),
  };
  // The first release knew no fence (nor role): a strict object without the key refuses it as unknown.
  if (legacy) return z.strictObject({ ...shape, fence: z.never().optional(), role: z.never().optional() });
  return z.strictObject(shape);
}

/** The reference for validate-command.ts's fast path: a change here must be made there too. */
export const stampedSchema = buildStampedSchema(idSchema, false);

/**
 * The first release's id rule (1..256 characters, no '/'), which entries of feature level 1 are
 * applied with: an older node accepts such ids, so a newer one must too until the cluster has
 * moved to level 2, or the two would apply the same entry differently during a rolling upgrade.
 * New commands are always checked with the current rule (encodeCommand), so no new id of the old
 * kind is written.
 */
export const legacyIdSchema = z.string().min(1, idRules.short).max(idLengthMax, idRules.long).refine((s) => !s.includes('/'), idRules.slash);

/**
 * The first release's id rule as a plain function. A snapshot is read with it: a store may hold
 * ids written at feature level 1 under that rule, and it must restore them, not refuse to start.
 */
export function legacyIdProblem(v: unknown): string | undefined {
  if (typeof v !== 'string') return 'expected an id (a string)';
  if (v.length < 1) return idRules.short;
  if (v.length > idLengthMax && [...v].length > idLengthMax) return idRules.long;
  return v.includes('/') ? idRules.slash : undefined;
}
const legacyStampedSchema = buildStampedSchema(legacyIdSchema, true);

/** Which id rule an entry is applied with: `legacy` for entries of feature level 1. */
export type IdRules = 'current' | 'legacy';

/** A valid command, with the JSON size of each put's document (keyed by the document object). */
export type Validated = { ok: true; stamped: Stamped; docBytes: Map<unknown, number> } | { ok: false; message: string; issues: Issue[] };

/** A one-line summary naming the first few problems; details.issues has them all. */
function invalid(issues: Issue[]): Validated {
  const shown = issues.slice(0, 3).map((i) => `${i.path === '' ? '(command)' : i.path}: ${i.message}`).join('; ');
  const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : '';
  return { ok: false, message: `invalid command: ${shown}${more}`, issues };
}

interface Checking {
  freeze: boolean;
  issues: Issue[];
  docBytes: Map<unknown, number>;
}

function checkDoc(op: PutOp, path: string, ck: Checking): void {
  if (!checkJsonObject(op.doc, path, ck.issues)) return;
  if (ck.freeze) deepFreeze(op.doc);
  const bytes = jsonBytes(op.doc);
  ck.docBytes.set(op.doc, bytes);
  if (bytes > docBytesMax) ck.issues.push({ path, message: `the document is ${bytes} bytes as JSON; the limit is ${docBytesMax}` });
}

function checkBranch(ops: Op[], path: string, ck: Checking): void {
  const seen = new Set<string>();
  ops.forEach((op, i) => {
    const key = `${op.collection}/${op.id}`;
    if (seen.has(key)) ck.issues.push({ path: `${path}.${i}`, message: `${key} appears twice in one branch; a txn changes each document at most once` });
    seen.add(key);
    if (op.op === 'put') checkDoc(op, `${path}.${i}.doc`, ck);
  });
}

/** The checks zod cannot express: documents are bounded JSON objects, txn branches touch each doc once. */
function checkSemantics(cmd: Command, ck: Checking): void {
  if (cmd.op === 'put') checkDoc(cmd, 'cmd.doc', ck);
  if (cmd.op === 'txn') {
    checkBranch(cmd.success, 'cmd.success', ck);
    checkBranch(cmd.failure, 'cmd.failure', ck);
  }
}

/** The non-zod checks on a parsed command; with `freeze`, documents are frozen in place. */
function checkParsed(stamped: Stamped, freeze: boolean): Validated {
  const ck: Checking = { freeze, issues: [], docBytes: new Map() };
  checkSemantics(stamped.cmd, ck);
  if (ck.issues.length > 0) return invalid(ck.issues);
  return { ok: true, stamped, docBytes: ck.docBytes };
}

/** validateStamped without the fast path: zod alone. Tests check the two always agree. */
export function validateStampedWithZod(value: unknown, freeze: boolean, rules: IdRules = 'current'): Validated {
  const parsed = (rules === 'legacy' ? legacyStampedSchema : stampedSchema).safeParse(value);
  if (!parsed.success) {
    return invalid(parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })));
  }
  return checkParsed(parsed.data as Stamped, freeze);
}

/**
 * Validates a decoded (or about to be encoded) stamped command and reports every problem. With
 * `freeze`, documents are frozen in place (apply does this: the store keeps them).
 */
export function validateStamped(value: unknown, freeze: boolean, rules: IdRules = 'current'): Validated {
  // The fast path accepts only what both schemas accept (the current ids, no fence, no value
  // compares); a role the legacy schema refuses is left to zod.
  const parsed = fastParseStamped(value);
  const fast = rules === 'legacy' && parsed?.role !== undefined ? undefined : parsed;
  return fast === undefined ? validateStampedWithZod(value, freeze, rules) : checkParsed(fast, freeze);
}

// Plain maps and arrays only: record structures would make bytes depend on encoder state.
const packr = new Packr({ useRecords: false });

/** Decodes and validates entry data. Never throws. `rules`: see IdRules. */
export function parseCommandBytes(data: Uint8Array, freeze: boolean, rules: IdRules = 'current'): Validated {
  if (data.length > commandBytesMax) {
    return { ok: false, message: `the command is ${data.length} bytes; the limit is ${commandBytesMax}`, issues: [{ path: '', message: 'command too large' }] };
  }
  let value: unknown;
  try {
    value = packr.unpack(data);
  } catch (err) {
    return { ok: false, message: 'the command is not valid msgpack', issues: [{ path: '', message: err instanceof Error ? err.message : String(err) }] };
  }
  return validateStamped(value, freeze, rules);
}

/** Encodes a stamped command as entry data. Throws InvalidCommandError if it would not apply. */
export function encodeCommand(s: Stamped): Uint8Array {
  const v = validateStamped(s, false);
  if (!v.ok) throw new InvalidCommandError(v.message, v.issues);
  const bytes: Uint8Array = packr.pack(s);
  if (bytes.length > commandBytesMax) {
    throw new InvalidCommandError(`the command is ${bytes.length} bytes encoded; the limit is ${commandBytesMax}`, [{ path: '', message: 'command too large' }]);
  }
  return bytes;
}

/** Decodes entry data into a validated stamped command. Throws InvalidCommandError on garbage. */
export function decodeCommand(b: Uint8Array): Stamped {
  const v = parseCommandBytes(b, false);
  if (!v.ok) throw new InvalidCommandError(v.message, v.issues);
  return v.stamped;
}
