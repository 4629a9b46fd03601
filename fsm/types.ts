// The shapes the document store hands out: documents, watch events and command results.
// Everything handed out is frozen: the store shares one object between its table, its event
// tail, idempotency records and callers, so nobody may change it in place.

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** A stored document. `rev` is the log index of its last change, `createRev` of its creation. */
export interface Doc {
  readonly collection: string;
  readonly id: string;
  readonly rev: number;
  readonly createRev: number;
  readonly doc: JsonObject;
}

/**
 * One change, addressed by the log index that made it. A txn or retain that changes several
 * documents emits several events with the same rev, in op order (txn) or id order (retain).
 * `doc` is the new document of a put; `prevRev` is the rev the document had before (absent when
 * a put created it).
 */
export interface WatchEvent {
  readonly rev: number;
  readonly type: 'put' | 'delete';
  readonly collection: string;
  readonly id: string;
  readonly doc?: Doc;
  readonly prevRev?: number;
}

export interface WatchFilter {
  collection?: string;
  /** Id prefix; with no collection it matches ids in every collection. */
  prefix?: string;
}

export interface ListOptions {
  prefix?: string;
  /** Page size, default 100; values above 1000 are clamped to 1000. */
  limit?: number;
  /** Start after this id (exclusive): pass the previous page's `next`. */
  after?: string;
}

export interface ListPage {
  items: Doc[];
  /** The store revision the page was read at: watch with after=rev to see every later change. */
  rev: number;
  /** The id to pass as `after` for the next page, or null when this page is the last. */
  next: string | null;
}

export type CommandErrorCode = 'revision_mismatch' | 'already_exists' | 'not_found' | 'idempotency_conflict' | 'bad_request' | 'invalid_command' | 'stale_term';

export interface CommandError {
  code: CommandErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

export type OpResult =
  | { kind: 'put'; doc: Doc }
  | { kind: 'delete'; collection: string; id: string; rev: number };

/** What apply() returns. `replayed: true` marks an answer taken from an idempotency record. */
export type CommandResult = (
  | { ok: true; kind: 'put'; doc: Doc }
  | { ok: true; kind: 'delete'; collection: string; id: string; rev: number }
  | { ok: true; kind: 'txn'; succeeded: boolean; results: OpResult[]; rev: number }
  | { ok: true; kind: 'retain'; deleted: string[]; rev: number }
  /** A compaction: `compactedRev`, the newest revision whose events are gone from now on. */
  | { ok: true; kind: 'compact'; compactedRev: number; rev: number }
  | { ok: false; error: CommandError }
) & { replayed?: true };

export interface StoreStats {
  documents: number;
  collections: number;
  events: number;
  idempotencyRecords: number;
}
