// The replicated document store: the Raft state machine of shoal.
//
// apply() is a pure function of the applied entries. Nothing here reads a clock, draws a random
// number or does I/O: the time a command needs (for idempotency expiry) is the leader's stamp in
// the command, and "log time" is the largest stamp applied so far, so it never goes back even
// when a new leader's clock is behind the old one's. The options below are part of the replicated
// semantics: every node of a cluster must run with the same values.
//
// Revisions: the store's revision is the index of the last entry applied; each document's rev is
// the index of its last change, createRev the index that created it. A change emits one watch
// event carrying the entry index, so list() at revision R followed by eventsSince(R) sees every
// change exactly once.

import assert from 'node:assert/strict';
import type { AppliedEntry, StateMachine } from '../src/base/state-machine.ts';
import { ShoalError } from '../src/errors.ts';
import { parseCommandBytes, collectionSchema, idPrefixProblem, idSchema, type Command, type Op, type PutOp, type DeleteOp, type Stamped, type TxnCommand } from './command.ts';
import { compareHolds } from './compare.ts';
import { auditCollection, auditId, auditRecord, isAudited } from './audit.ts';
import { featureLevelAudit, featureLevelAuditRole, featureLevelSecretsAtRest } from '../src/base/feature-level.ts';
import { DocTable } from './doc-table.ts';
import { EventLog, eventBytes, type SizedEvent } from './event-log.ts';
import { requestFingerprint } from './fingerprint.ts';
import { IdempotencyTable, type IdempotencyLimits } from './idempotency.ts';
import { deepFreeze, jsonBytes, type Issue } from './json-value.ts';
import {
  auditRetainedMaxDefault, auditRetainedMsDefault, auditTrimPerApplyMax, eventsRetainedBytesMaxDefault, eventsRetainedMaxDefault, idempotencyBytesMaxDefault, idempotencyRecordsMaxDefault,
  idempotencyWindowMsDefault, listLimitDefault, listLimitMax,
} from './limits.ts';
import { SnapshotFormatError } from './errors.ts';
import { decodeSnapshot, encodeSnapshot, encodeSnapshotInSlices, type StoreImage } from './snapshot.ts';
import type { CommandError, CommandResult, Doc, JsonObject, ListOptions, ListPage, OpResult, StoreStats, WatchEvent, WatchFilter } from './types.ts';

export interface DocumentStoreOptions {
  /** Watch events kept for eventsSince(); default 10,000. */
  eventsRetainedMax?: number;
  /** Bytes of documents the retained events may hold; default 64 MiB. */
  eventsRetainedBytesMax?: number;
  /** How long (log time) an idempotency record answers; default 24 h. */
  idempotencyWindowMs?: number;
  /** Idempotency records kept at most (oldest evicted first); default 10,000. */
  idempotencyRecordsMax?: number;
  /** Estimated bytes the records' results may hold (oldest evicted first); default 64 MiB. */
  idempotencyBytesMax?: number;
  /** Audit records kept at most, oldest trimmed first (feature level 4, fsm/audit.ts); default 10,000. */
  auditRetainedMax?: number;
  /** How long (log time) an audit record is kept before it is trimmed; default 7 days. */
  auditRetainedMs?: number;
  /**
   * Called when a subscriber (of events, or of restores: `ev` undefined) throws. The store has
   * already changed; the other subscribers are still called. Default: rethrow on a microtask, so
   * the bug is not lost and apply() is not cut short.
   */
  onListenerError?: (err: unknown, ev: WatchEvent | undefined) => void;
}

/** A change planned against the state before the entry; committed only when the whole entry succeeds. */
type Change = { type: 'put'; doc: Doc; prev: Doc | undefined; docBytes: number } | { type: 'delete'; prev: Doc };

/** Where an entry applies: its index, and the JSON sizes of its documents measured at validation. */
interface At {
  index: number;
  docBytes: Map<unknown, number>;
}

type Planned = { ok: true; change: Change } | { ok: false; error: CommandError };

function fail(error: CommandError): CommandResult {
  return { ok: false, error };
}

/** The refusal of a command that names a role in an entry applied below feature level 5. */
function roleTooEarly(index: number, level: number): CommandError {
  const message = `role needs cluster feature level ${featureLevelAuditRole}; this entry applies at level ${level}`;
  return { code: 'invalid_command', message: `invalid command: ${message}`, details: { index, issues: [{ path: 'role', message }] } };
}

function compactTooEarly(index: number, level: number): CommandError {
  const message = `compact needs cluster feature level ${featureLevelSecretsAtRest}; this entry applies at level ${level}`;
  return { code: 'invalid_command', message: `invalid command: ${message}`, details: { index, issues: [{ path: 'cmd.op', message }] } };
}

function badArgument(message: string, issues: Issue[]): ShoalError {
  return new ShoalError('bad_request', message, { issues });
}

function checkExpect(op: Op, cur: Doc | undefined): CommandError | undefined {
  const where = `${op.collection}/${op.id}`;
  if (op.expect === undefined) return undefined;
  if ('rev' in op.expect) {
    if (cur?.rev === op.expect.rev) return undefined;
    return {
      code: 'revision_mismatch',
      message: cur === undefined ? `${where} does not exist; expected rev ${op.expect.rev}` : `${where} is at rev ${cur.rev}; expected rev ${op.expect.rev}`,
      details: { collection: op.collection, id: op.id, expectedRev: op.expect.rev, currentRev: cur?.rev ?? null },
    };
  }
  if (cur === undefined) return undefined;
  return { code: 'already_exists', message: `${where} already exists (rev ${cur.rev})`, details: { collection: op.collection, id: op.id, currentRev: cur.rev } };
}

/**
 * Rough memory held by a result, for the idempotency byte cap. `docBytes` gives a document's JSON
 * size; it must agree with jsonBytes (apply passes sizes measured at validation, restore measures).
 */
function resultBytes(r: CommandResult, docBytes: (d: Doc) => number): number {
  const base = 128;
  if (!r.ok) return base + r.error.message.length;
  switch (r.kind) {
    case 'put': return base + docBytes(r.doc);
    case 'delete': return base;
    case 'txn': return r.results.reduce((n, o) => n + base + (o.kind === 'put' ? docBytes(o.doc) : 0), base);
    case 'retain': return r.deleted.reduce((n, id) => n + 16 + id.length, base);
    case 'compact': return base;
  }
}

const measureDoc = (d: Doc): number => jsonBytes(d.doc);

export class DocumentStore implements StateMachine {
  private table = new DocTable();
  private events: EventLog;
  private idempotency: IdempotencyTable;
  private rev = 0;
  private logTime = 0;
  private readonly listeners = new Set<(ev: WatchEvent) => void>();
  private readonly restoreListeners = new Set<(revision: number) => void>();
  private readonly eventLimits: { countMax: number; bytesMax: number };
  private readonly idempotencyLimits: IdempotencyLimits;
  private readonly auditLimits: { countMax: number; ageMs: number };
  private readonly onListenerError: (err: unknown, ev: WatchEvent | undefined) => void;

  constructor(opts: DocumentStoreOptions = {}) {
    this.eventLimits = { countMax: opts.eventsRetainedMax ?? eventsRetainedMaxDefault, bytesMax: opts.eventsRetainedBytesMax ?? eventsRetainedBytesMaxDefault };
    this.idempotencyLimits = {
      windowMs: opts.idempotencyWindowMs ?? idempotencyWindowMsDefault,
      recordsMax: opts.idempotencyRecordsMax ?? idempotencyRecordsMaxDefault,
      bytesMax: opts.idempotencyBytesMax ?? idempotencyBytesMaxDefault,
    };
    this.auditLimits = { countMax: opts.auditRetainedMax ?? auditRetainedMaxDefault, ageMs: opts.auditRetainedMs ?? auditRetainedMsDefault };
    for (const [name, v] of Object.entries(opts)) {
      if (name !== 'onListenerError') assert.ok(Number.isSafeInteger(v) && (v as number) >= 0, `DocumentStore option ${name} must be a non-negative integer, got ${String(v)}`);
    }
    this.onListenerError = opts.onListenerError ?? ((err) => queueMicrotask(() => { throw err; }));
    this.events = new EventLog(this.eventLimits.countMax, this.eventLimits.bytesMax);
    this.idempotency = new IdempotencyTable(this.idempotencyLimits);
  }

  // ---- the state machine ------------------------------------------------------------------

  /** Applies one committed entry. Invalid commands yield a bad_request result and change no document. */
  apply(entry: AppliedEntry): CommandResult {
    assert.ok(Number.isSafeInteger(entry.index) && entry.index > this.rev, `entries apply in index order: got ${entry.index} at revision ${this.rev}`);
    this.rev = entry.index;
    const level = entry.featureLevel ?? 1;
    const legacy = level < 2;
    const v = parseCommandBytes(entry.data, true, legacy ? 'legacy' : 'current');
    if (!v.ok) return deepFreeze(fail({ code: 'invalid_command', message: v.message, details: { index: entry.index, issues: v.issues } }));
    // A release before level 5 refuses a stamped role as an unknown key: so must this one, below it.
    if (v.stamped.role !== undefined && level < featureLevelAuditRole) return deepFreeze(fail(roleTooEarly(entry.index, level)));
    // A release before level 6 does not know the command (its schema refuses it): nor may this one, below it.
    if (v.stamped.cmd.op === 'compact' && level < featureLevelSecretsAtRest) return deepFreeze(fail(compactTooEarly(entry.index, level)));
    const stamp = entry.logTimeMs ?? (legacy ? v.stamped.ts : undefined);
    if (stamp !== undefined) this.logTime = Math.max(this.logTime, stamp);
    this.idempotency.expire(this.logTime);
    const fence = v.stamped.fence;
    if (fence !== undefined && fence.term !== entry.term) {
      // A leader loop's decision, carried by an entry of another term: a deposed leader's late
      // proposal (design.md, Fencing). Refused the same way on every node; nothing changes.
      return deepFreeze(fail({ code: 'stale_term', message: `decided by the leader of term ${fence.term} but appended in term ${entry.term}: refused`, details: { fenceTerm: fence.term, entryTerm: entry.term } }));
    }
    const at: At = { index: entry.index, docBytes: v.docBytes };
    const result = deepFreeze(v.stamped.idempotencyKey === undefined ? this.execute(v.stamped.cmd, at) : this.executeOnce(v.stamped, v.stamped.idempotencyKey, at));
    if (level >= featureLevelAudit && isAudited(v.stamped, result)) this.audit(v.stamped, result, entry);
    return result;
  }

  /**
   * Writes the entry's audit record (fsm/audit.ts) and trims the oldest records, past the count
   * or the age bound (log time), at most auditTrimPerApplyMax of them in one entry. Part of the
   * same apply, after the command's own changes, with the same revision; never itself audited.
   */
  private audit(stamped: Stamped, result: CommandResult, entry: AppliedEntry): void {
    const body = deepFreeze(auditRecord(stamped, result, { index: entry.index, term: entry.term, logTimeMs: this.logTime }));
    const doc: Doc = Object.freeze({ collection: auditCollection, id: auditId(entry.index), rev: entry.index, createRev: entry.index, doc: body });
    const changes: Change[] = [];
    let kept = this.table.count(auditCollection);
    const ageCutoff = this.logTime - this.auditLimits.ageMs;
    for (const old of this.table.docs(auditCollection)) {
      if (changes.length === auditTrimPerApplyMax) break;
      const aged = typeof old.doc.timeMs === 'number' && old.doc.timeMs < ageCutoff;
      if (kept + 1 <= this.auditLimits.countMax && !aged) break;
      changes.push({ type: 'delete', prev: old });
      kept--;
    }
    changes.push({ type: 'put', doc, prev: undefined, docBytes: jsonBytes(body) });
    this.commit(changes, entry.index);
  }

  /** Runs a keyed command at most once per (principal, key) within the window. */
  private executeOnce(stamped: Stamped, key: string, at: At): CommandResult {
    const principal = stamped.principal ?? '';
    const fingerprint = requestFingerprint(stamped.cmd);
    const rec = this.idempotency.lookup(principal, key);
    if (rec !== undefined) {
      if (rec.fingerprint === fingerprint) return { ...rec.result, replayed: true };
      return fail({
        code: 'idempotency_conflict',
        message: `idempotency key '${key}' was used at rev ${rec.index} for a different request`,
        details: { idempotencyKey: key, firstRev: rec.index },
      });
    }
    const result = deepFreeze(this.execute(stamped.cmd, at));
    const bytes = resultBytes(result, (d) => at.docBytes.get(d.doc) ?? jsonBytes(d.doc));
    this.idempotency.insert({ principal, key, fingerprint, ts: this.logTime, index: at.index, result, bytes });
    return result;
  }

  private execute(cmd: Command, at: At): CommandResult {
    switch (cmd.op) {
      case 'put':
      case 'delete': {
        const p = this.plan(cmd, at);
        if (!p.ok) return fail(p.error);
        this.commit([p.change], at.index);
        return { ok: true, ...this.opResult(p.change, at.index) };
      }
      case 'txn': return this.executeTxn(cmd, at);
      case 'retain': return this.executeRetain(cmd.collection, new Set(cmd.ids), at.index);
      case 'compact': return { ok: true, kind: 'compact', compactedRev: this.events.compactBefore(at.index), rev: at.index };
    }
  }

  private plan(op: Op, at: At): Planned {
    const cur = this.table.get(op.collection, op.id);
    const error = checkExpect(op, cur);
    if (error !== undefined) return { ok: false, error };
    return op.op === 'put' ? this.planPut(op, cur, at) : this.planDelete(op, cur);
  }

  private planPut(op: PutOp, cur: Doc | undefined, at: At): Planned {
    const body = op.doc as JsonObject;
    const doc: Doc = Object.freeze({ collection: op.collection, id: op.id, rev: at.index, createRev: cur?.createRev ?? at.index, doc: body });
    return { ok: true, change: { type: 'put', doc, prev: cur, docBytes: at.docBytes.get(body) ?? jsonBytes(body) } };
  }

  private planDelete(op: DeleteOp, cur: Doc | undefined): Planned {
    if (cur !== undefined) return { ok: true, change: { type: 'delete', prev: cur } };
    return { ok: false, error: { code: 'not_found', message: `${op.collection}/${op.id} does not exist`, details: { collection: op.collection, id: op.id } } };
  }

  private opResult(c: Change, index: number): OpResult {
    if (c.type === 'put') return { kind: 'put', doc: c.doc };
    return { kind: 'delete', collection: c.prev.collection, id: c.prev.id, rev: index };
  }

  /**
   * Compares and ops both read the state before the entry (a branch touches each document at
   * most once, so the order of ops does not matter); the first op whose expectation fails makes
   * the whole txn a no-op.
   */
  private executeTxn(cmd: TxnCommand, at: At): CommandResult {
    const { index } = at;
    const succeeded = cmd.compare.every((c) => compareHolds(c, this.table.get(c.collection, c.id)));
    const branch = succeeded ? 'success' : 'failure';
    const changes: Change[] = [];
    for (const [i, op] of cmd[branch].entries()) {
      const p = this.plan(op, at);
      if (!p.ok) return fail({ ...p.error, message: `txn ${branch}[${i}]: ${p.error.message}`, details: { ...p.error.details, branch, op: i } });
      changes.push(p.change);
    }
    this.commit(changes, index);
    return { ok: true, kind: 'txn', succeeded, results: changes.map((c) => this.opResult(c, index)), rev: index };
  }

  private executeRetain(collection: string, keep: ReadonlySet<string>, index: number): CommandResult {
    const changes: Change[] = [];
    for (const id of this.table.ids(collection)) {
      if (!keep.has(id)) changes.push({ type: 'delete', prev: this.table.get(collection, id) as Doc });
    }
    this.commit(changes, index);
    return { ok: true, kind: 'retain', deleted: changes.map((c) => (c.type === 'delete' ? c.prev.id : c.doc.id)), rev: index };
  }

  /** Writes the planned changes, records their events and tells the subscribers, in order. */
  private commit(changes: readonly Change[], index: number): void {
    if (changes.length === 0) return;
    const evs = changes.map((c): SizedEvent => {
      if (c.type === 'put') {
        this.table.set(c.doc);
        const { collection, id } = c.doc;
        const ev: WatchEvent = Object.freeze(c.prev === undefined
          ? { rev: index, type: 'put', collection, id, doc: c.doc }
          : { rev: index, type: 'put', collection, id, doc: c.doc, prevRev: c.prev.rev });
        return { ev, bytes: eventBytes(ev, c.docBytes) };
      }
      this.table.delete(c.prev.collection, c.prev.id);
      const ev: WatchEvent = Object.freeze({ rev: index, type: 'delete', collection: c.prev.collection, id: c.prev.id, prevRev: c.prev.rev });
      return { ev, bytes: eventBytes(ev, 0) };
    });
    this.events.append(evs);
    this.deliver(evs.map((e) => e.ev));
  }

  private deliver(evs: readonly WatchEvent[]): void {
    if (this.listeners.size === 0) return;
    const listeners = [...this.listeners];
    for (const ev of evs) {
      for (const l of listeners) {
        try {
          l(ev);
        } catch (err) {
          this.onListenerError(err, ev);
        }
      }
    }
  }

  /** The whole store as bytes: equal applied histories give equal bytes on every node. */
  snapshot(): Uint8Array {
    return encodeSnapshot(this.image());
  }

  /**
   * The same bytes as snapshot() once concatenated, of the state at the time of the call,
   * encoded in slices with `pause()` between them; applying entries meanwhile does not change
   * the result.
   */
  snapshotInSlices(pause: () => Promise<void>): Promise<Uint8Array[]> {
    return encodeSnapshotInSlices(this.image(), pause);
  }

  /** The state as arrays of the (frozen) documents, events and records: cheap, and unaffected by later applies. */
  private image(): StoreImage {
    return {
      revision: this.rev,
      logTimeMs: this.logTime,
      collections: this.table.names().map((name) => [name, [...this.table.docs(name)]]),
      compactedRev: this.events.compactedRev,
      events: this.events.all(),
      records: this.idempotency.all().map(({ bytes: _bytes, ...r }) => r),
    };
  }

  /** Why restore() would refuse `data` (its first problems), or undefined. Decodes it all, keeps nothing. */
  checkSnapshot(data: Uint8Array): string | undefined {
    try {
      decodeSnapshot(data);
      return undefined;
    } catch (err) {
      if (!(err instanceof SnapshotFormatError)) throw err;
      const issues = (err.details?.issues as { path: string; message: string }[] | undefined) ?? [];
      return [err.message, ...issues.slice(0, 3).map((i) => `${i.path || '(root)'}: ${i.message}`)].join('; ');
    }
  }

  /**
   * Replaces the whole store with a snapshot. Throws SnapshotFormatError and keeps the current
   * state if the data cannot be read. Subscribers of events get nothing for the jump; restore
   * subscribers are told the new revision (a watcher must list again).
   */
  restore(data: Uint8Array): void {
    const img = decodeSnapshot(data);
    this.table = DocTable.fromSorted(img.collections);
    this.events = EventLog.restore(this.eventLimits.countMax, this.eventLimits.bytesMax, img.compactedRev, img.events);
    this.idempotency = IdempotencyTable.restore(this.idempotencyLimits, img.records.map((r) => ({ ...r, bytes: resultBytes(r.result, measureDoc) })));
    this.rev = img.revision;
    this.logTime = img.logTimeMs;
    for (const l of [...this.restoreListeners]) {
      try {
        l(this.rev);
      } catch (err) {
        this.onListenerError(err, undefined);
      }
    }
  }

  // ---- reads ------------------------------------------------------------------------------

  /** The index of the last applied entry (0 before any). */
  get revision(): number {
    return this.rev;
  }

  /** Log time: the largest leader stamp (ms) applied so far; idempotency windows are measured in it. */
  get logTimeMs(): number {
    return this.logTime;
  }

  /** The oldest revision whose events are all retained: eventsSince(oldestRev - 1) is the oldest cursor that works. */
  get oldestRev(): number {
    return this.events.oldestRev;
  }

  get(collection: string, id: string): Doc | undefined {
    this.checkNames(collection, id);
    return this.table.get(collection, id);
  }

  /** A page of a collection in id order. `rev` is the store revision the page was read at. */
  list(collection: string, opts: ListOptions = {}): ListPage {
    this.checkNames(collection);
    const limit = opts.limit ?? listLimitDefault;
    const issues: Issue[] = [];
    if (!Number.isSafeInteger(limit) || limit < 1) issues.push({ path: 'limit', message: 'limit is a positive integer' });
    const prefixProblem = opts.prefix === undefined ? undefined : idPrefixProblem(opts.prefix);
    if (prefixProblem !== undefined) issues.push({ path: 'prefix', message: prefixProblem });
    const afterProblem = opts.after === undefined ? undefined : idPrefixProblem(opts.after);
    if (afterProblem !== undefined) issues.push({ path: 'after', message: afterProblem });
    if (issues.length > 0) throw badArgument('invalid list arguments', issues);
    const page = this.table.page(collection, opts.prefix ?? '', opts.after, Math.min(limit, listLimitMax));
    return { items: page.items, rev: this.rev, next: page.next };
  }

  /** Every collection that holds a document, with its document count, in name order. */
  collections(): Array<{ name: string; documents: number }> {
    return this.table.sizes();
  }

  /**
   * The retained changes of one document, oldest first: as far back as the event tail reaches
   * (oldestRev), not further; the document's earlier revisions are gone.
   */
  history(collection: string, id: string): WatchEvent[] {
    this.checkNames(collection, id);
    return this.events.since(this.events.oldestRev - 1, { collection, prefix: id }).filter((e) => e.id === id);
  }

  /**
   * Retained events with rev > afterRev matching the filter, oldest first. Throws
   * CursorExpiredError (with oldestRev) if events after afterRev were dropped.
   */
  eventsSince(afterRev: number, filter: WatchFilter = {}): WatchEvent[] {
    if (!Number.isSafeInteger(afterRev) || afterRev < 0) throw badArgument('invalid watch cursor', [{ path: 'after', message: 'after is a non-negative integer revision' }]);
    if (filter.collection !== undefined) this.checkNames(filter.collection);
    const prefixProblem = filter.prefix === undefined ? undefined : idPrefixProblem(filter.prefix);
    if (prefixProblem !== undefined) throw badArgument('invalid watch filter', [{ path: 'prefix', message: prefixProblem }]);
    return this.events.since(afterRev, filter);
  }

  /** Calls `listener` synchronously for each event, in order, as entries are applied. Returns an unsubscribe. */
  subscribe(listener: (ev: WatchEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` with the new revision after restore() replaced the state (no events are emitted for that jump). */
  subscribeRestore(listener: (revision: number) => void): () => void {
    this.restoreListeners.add(listener);
    return () => this.restoreListeners.delete(listener);
  }

  stats(): StoreStats {
    return { documents: this.table.documents, collections: this.table.collectionCount, events: this.events.size, idempotencyRecords: this.idempotency.size };
  }

  private checkNames(collection: string, id?: string): void {
    const issues: Issue[] = [];
    const c = collectionSchema.safeParse(collection);
    if (!c.success) issues.push({ path: 'collection', message: c.error.issues[0]?.message ?? 'invalid collection' });
    if (id !== undefined) {
      const i = idSchema.safeParse(id);
      if (!i.success) issues.push({ path: 'id', message: i.error.issues[0]?.message ?? 'invalid id' });
    }
    if (issues.length > 0) throw badArgument('invalid collection or id', issues);
  }
}
