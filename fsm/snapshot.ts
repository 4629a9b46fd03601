// The snapshot format of the document store: one msgpack map, everything in a fixed order
// (collections by name, documents by id, events and idempotency records in log order), so two
// nodes with the same applied history write the same bytes. Reading checks the structure with
// zod and the invariants the in-memory structures rely on, and keeps the decoded objects as they
// are, so restoring and snapshotting again gives the same bytes.

import { Packr } from 'msgpackr';
import { z } from 'zod';
import { collectionNameProblem, collectionSchema, legacyIdProblem as idProblem, legacyIdSchema as idSchema } from './command.ts';
import { SnapshotFormatError } from './errors.ts';
import { checkJsonObject, deepFreeze, type Issue } from './json-value.ts';
import type { IdempotencyRecord } from './idempotency.ts';
import type { CommandResult, Doc, JsonObject, WatchEvent } from './types.ts';

export const snapshotFormat = 'shoal.fsm/1';

export interface StoreImage {
  revision: number;
  logTimeMs: number;
  /** Collections by name, each with its documents by id. */
  collections: [string, Doc[]][];
  compactedRev: number;
  events: WatchEvent[];
  records: Omit<IdempotencyRecord, 'bytes'>[];
}

type DocRow = [id: string, rev: number, createRev: number, doc: JsonObject];
type EventRow = [rev: number, type: 'put' | 'delete', collection: string, id: string, prevRev: number | null, createRev: number | null, doc: JsonObject | null];
type RecordRow = [principal: string, key: string, fingerprint: string, ts: number, index: number, result: CommandResult];

const packr = new Packr({ useRecords: false });

function eventRow(ev: WatchEvent): EventRow {
  return [ev.rev, ev.type, ev.collection, ev.id, ev.prevRev ?? null, ev.doc?.createRev ?? null, ev.doc?.doc ?? null];
}

const docRow = (d: Doc): DocRow => [d.id, d.rev, d.createRev, d.doc];
const recordRow = (r: Omit<IdempotencyRecord, 'bytes'>): RecordRow => [r.principal, r.key, r.fingerprint, r.ts, r.index, r.result];

/** Marks the end of a slice of rows in snapshotParts: where the sliced encoder may pause. */
const sliceEnd = Symbol('slice end');

/**
 * The snapshot's bytes as parts to concatenate: one msgpack map of seven fields (the order below
 * is the format), each row array written as a header and then slices of at most `rowsPerSlice`
 * rows. Built by hand rather than by packing one object so that it can be produced a slice at a
 * time; test/fsm/snapshot.test.ts checks it equals msgpackr's packing of the same value.
 */
function* snapshotParts(img: StoreImage, rowsPerSlice: number): Generator<Uint8Array | typeof sliceEnd> {
  function* rows<T>(items: readonly T[], row: (item: T) => unknown): Generator<Uint8Array | typeof sliceEnd> {
    yield arrayHeader(items.length);
    for (let i = 0; i < items.length; i += rowsPerSlice) {
      const n = Math.min(rowsPerSlice, items.length - i);
      // Pack the slice as an array and keep its elements: the same bytes they have inside the whole.
      yield packr.pack(items.slice(i, i + n).map(row)).subarray(arrayHeader(n).length);
      yield sliceEnd;
    }
  }
  // msgpackr writes an object's map as map16, whatever its size.
  yield Uint8Array.of(0xde, 0x00, 0x07);
  yield packr.pack('format'); yield packr.pack(snapshotFormat);
  yield packr.pack('revision'); yield packr.pack(img.revision);
  yield packr.pack('logTimeMs'); yield packr.pack(img.logTimeMs);
  yield packr.pack('collections');
  yield arrayHeader(img.collections.length);
  for (const [name, docs] of img.collections) {
    yield arrayHeader(2);
    yield packr.pack(name);
    yield* rows(docs, docRow);
  }
  yield packr.pack('compactedRev'); yield packr.pack(img.compactedRev);
  yield packr.pack('events');
  yield* rows(img.events, eventRow);
  yield packr.pack('idempotency');
  yield* rows(img.records, recordRow);
}

export function encodeSnapshot(img: StoreImage): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const part of snapshotParts(img, 4096)) if (part !== sliceEnd) parts.push(part);
  return Buffer.concat(parts);
}

/**
 * The same bytes as encodeSnapshot, as parts to be concatenated, with `pause()` after each slice
 * of rows, so a large store does not hold the event loop (and with it the node's Raft loop) for
 * the whole encoding. Parts rather than one buffer: copying megabytes into a fresh buffer costs
 * milliseconds per megabyte here (page faults), so the caller concatenates once, with whatever it
 * wraps around them. The image must not change meanwhile; the store's documents, events and
 * records are frozen, so an image of copied arrays is enough.
 */
export async function encodeSnapshotInSlices(img: StoreImage, pause: () => Promise<void>, rowsPerSlice = 512): Promise<Uint8Array[]> {
  const parts: Uint8Array[] = [];
  for (const part of snapshotParts(img, rowsPerSlice)) {
    if (part === sliceEnd) await pause();
    else parts.push(part);
  }
  return parts;
}

/** A msgpack array header for `n` elements. */
function arrayHeader(n: number): Uint8Array {
  if (n < 16) return Uint8Array.of(0x90 | n);
  if (n < 0x10000) return Uint8Array.of(0xdc, n >> 8, n & 0xff);
  return Uint8Array.of(0xdd, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

const count = z.number().int().min(0);
const docSchema = z.strictObject({ collection: collectionSchema, id: idSchema, rev: count, createRev: count, doc: z.record(z.string(), z.unknown()) });
const opResultSchema = z.union([
  z.strictObject({ kind: z.literal('put'), doc: docSchema }),
  z.strictObject({ kind: z.literal('delete'), collection: collectionSchema, id: idSchema, rev: count }),
]);
const resultSchema = z.union([
  z.strictObject({ ok: z.literal(true), kind: z.literal('put'), doc: docSchema }),
  z.strictObject({ ok: z.literal(true), kind: z.literal('delete'), collection: collectionSchema, id: idSchema, rev: count }),
  z.strictObject({ ok: z.literal(true), kind: z.literal('txn'), succeeded: z.boolean(), results: z.array(opResultSchema), rev: count }),
  z.strictObject({ ok: z.literal(true), kind: z.literal('retain'), deleted: z.array(idSchema), rev: count }),
  z.strictObject({ ok: z.literal(true), kind: z.literal('compact'), compactedRev: count, rev: count }),
  z.strictObject({
    ok: z.literal(false),
    error: z.strictObject({ code: z.enum(['revision_mismatch', 'already_exists', 'not_found']), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
  }),
]);
const rowArray = z.custom<unknown[]>((v) => Array.isArray(v), 'expected an array');
// The rows of documents and events, nearly all of a snapshot, are checked by hand as they are
// read (readDocs, readEvents): zod took 40 % of a restore of 100,000 documents, most of it
// building copies that are thrown away.
const imageSchema = z.strictObject({
  format: z.literal(snapshotFormat),
  revision: count,
  logTimeMs: count,
  collections: rowArray,
  compactedRev: count,
  events: rowArray,
  idempotency: z.array(z.tuple([z.string(), z.string().min(1), z.string(), count, count, resultSchema])),
});

type RawImage = {
  format: string; revision: number; logTimeMs: number; compactedRev: number;
  collections: unknown[]; events: unknown[]; idempotency: RecordRow[];
};

function corrupt(message: string, issues: Issue[]): SnapshotFormatError {
  return new SnapshotFormatError('storage_corrupt', `document store snapshot: ${message}`, { issues: issues.slice(0, 20) });
}

/** Reading stops after this many issues: a report needs no more, and garbage could hold millions. */
const issuesMax = 20;

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** `v` as an array of exactly `n` elements, or undefined after recording an issue. */
function tuple(v: unknown, n: number, what: string, path: string, issues: Issue[]): unknown[] | undefined {
  if (Array.isArray(v) && v.length === n) return v;
  issues.push({ path, message: `expected ${what}` });
  return undefined;
}

function readDocs(raw: RawImage, issues: Issue[]): [string, Doc[]][] {
  const out: [string, Doc[]][] = [];
  for (let ci = 0; ci < raw.collections.length && issues.length < issuesMax; ci++) {
    const entry = tuple(raw.collections[ci], 2, '[collection, rows]', `collections.${ci}`, issues);
    if (entry === undefined) continue;
    const [collection, rows] = entry;
    const badName = collectionNameProblem(collection);
    if (badName !== undefined) issues.push({ path: `collections.${ci}.0`, message: badName });
    if (!Array.isArray(rows)) issues.push({ path: `collections.${ci}.1`, message: 'expected an array of documents' });
    if (badName !== undefined || !Array.isArray(rows)) continue;
    const name = collection as string;
    if (ci > 0 && (out.at(-1)?.[0] ?? '') >= name) issues.push({ path: `collections.${ci}`, message: 'collections out of order' });
    const docs: Doc[] = [];
    for (let i = 0; i < rows.length && issues.length < issuesMax; i++) {
      const path = `collections.${ci}.${i}`;
      const row = tuple(rows[i], 4, '[id, rev, createRev, document]', path, issues);
      if (row === undefined) continue;
      const [id, rev, createRev, doc] = row;
      const badId = idProblem(id);
      if (badId !== undefined) {
        issues.push({ path: `${path}.0`, message: badId });
        continue;
      }
      if (!isCount(rev) || !isCount(createRev)) {
        issues.push({ path, message: 'revisions must be whole numbers, 0 or more' });
        continue;
      }
      if (i > 0 && (docs.at(-1)?.id ?? '') >= (id as string)) issues.push({ path, message: 'ids out of order' });
      if (createRev > rev || rev > raw.revision) issues.push({ path, message: 'revisions out of range' });
      if (!checkJsonObject(doc, `${path}.doc`, issues)) continue;
      docs.push(Object.freeze({ collection: name, id: id as string, rev, createRev, doc: deepFreeze(doc) }));
    }
    out.push([name, docs]);
  }
  return out;
}

/** The document stored under collection/id, found in the sorted rows readDocs returned. */
function findDoc(byCollection: Map<string, Doc[]>, collection: string, id: string): Doc | undefined {
  const docs = byCollection.get(collection);
  if (docs === undefined) return undefined;
  let lo = 0;
  let hi = docs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const d = docs[mid] as Doc;
    if (d.id === id) return d;
    if (d.id < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}

function readEvents(raw: RawImage, byCollection: Map<string, Doc[]>, issues: Issue[]): WatchEvent[] {
  const out: WatchEvent[] = [];
  let prevRev = -1;
  for (let i = 0; i < raw.events.length && issues.length < issuesMax; i++) {
    const path = `events.${i}`;
    const row = tuple(raw.events[i], 7, '[rev, type, collection, id, prevRev, createRev, document]', path, issues);
    if (row === undefined) continue;
    const [rev, type, collection, id, prev, createRev, doc] = row;
    const problem = !isCount(rev) ? 'the revision must be a whole number, 0 or more'
      : type !== 'put' && type !== 'delete' ? "the type must be 'put' or 'delete'"
      : collectionNameProblem(collection) ?? idProblem(id)
        ?? (prev !== null && !isCount(prev) ? 'prevRev must be null or a whole number'
          : createRev !== null && !isCount(createRev) ? 'createRev must be null or a whole number' : undefined);
    if (problem !== undefined) {
      issues.push({ path, message: problem });
      continue;
    }
    const r = rev as number;
    const c = collection as string;
    const k = id as string;
    if (r <= raw.compactedRev || r > raw.revision || prevRev > r) issues.push({ path, message: 'event revisions out of order' });
    prevRev = r;
    if (type === 'delete') {
      if (prev === null || createRev !== null || doc !== null) issues.push({ path, message: 'a delete event has prevRev only' });
      out.push(Object.freeze({ rev: r, type, collection: c, id: k, prevRev: (prev as number | null) ?? 0 }));
      continue;
    }
    if (createRev === null || !checkJsonObject(doc, `${path}.doc`, issues)) {
      issues.push({ path, message: 'a put event needs createRev and a document' });
      out.push(Object.freeze({ rev: r, type: 'put', collection: c, id: k }));
      continue;
    }
    // Share the stored document when the event still describes it.
    const current = findDoc(byCollection, c, k);
    const d = current?.rev === r ? current : Object.freeze({ collection: c, id: k, rev: r, createRev: createRev as number, doc: deepFreeze(doc) });
    out.push(Object.freeze(prev === null ? { rev: r, type: 'put', collection: c, id: k, doc: d } : { rev: r, type: 'put', collection: c, id: k, doc: d, prevRev: prev as number }));
  }
  return out;
}

function readRecords(raw: RawImage, issues: Issue[]): Omit<IdempotencyRecord, 'bytes'>[] {
  return raw.idempotency.map(([principal, key, fingerprint, ts, index, result], i) => {
    const prev = raw.idempotency[i - 1];
    if (prev !== undefined && (prev[4] >= index || prev[3] > ts)) issues.push({ path: `idempotency.${i}`, message: 'records out of log order' });
    return { principal, key, fingerprint, ts, index, result: deepFreeze(result) };
  });
}

/** Decodes snapshot bytes. Throws SnapshotFormatError (storage_corrupt or storage_format). */
export function decodeSnapshot(data: Uint8Array): StoreImage {
  let value: unknown;
  try {
    value = packr.unpack(data);
  } catch (err) {
    throw corrupt('not valid msgpack', [{ path: '', message: err instanceof Error ? err.message : String(err) }]);
  }
  const format = typeof value === 'object' && value !== null ? (value as { format?: unknown }).format : undefined;
  if (typeof format === 'string' && format !== snapshotFormat) {
    throw new SnapshotFormatError('storage_format', `document store snapshot format '${format}' is not known to this version (it reads '${snapshotFormat}')`, { format });
  }
  const parsed = imageSchema.safeParse(value);
  if (!parsed.success) throw corrupt('bad structure', parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })));
  // Keep the decoded objects, not zod's copies: their key order is what the next snapshot writes.
  const raw = value as RawImage;
  const issues: Issue[] = [];
  const collections = readDocs(raw, issues);
  const events = issues.length > 0 ? [] : readEvents(raw, new Map(collections), issues);
  const records = issues.length > 0 ? [] : readRecords(raw, issues);
  if (issues.length > 0) throw corrupt('invariants broken', issues);
  return { revision: raw.revision, logTimeMs: raw.logTimeMs, collections, compactedRev: raw.compactedRev, events, records };
}
