// The history a fault test records: one JSON object per line, an `invoke` when a client starts an
// operation on a register and an `ok`, `fail` or `info` when it learns the outcome. The format is
// described in README-history.md. Bytes come in from a file, so every line goes through zod, on
// the write path as well as on the read-back path.

import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { z } from 'zod';

/** Register operations. `cas` sets `value` only when the register holds `from`. */
export type OpKind = 'write' | 'read' | 'cas';

interface EventBase {
  /** A client's id. A process runs one operation at a time and none after an `info`. */
  process: number;
  key: string;
  /** Monotonic milliseconds (performance.now()), from one clock shared by all clients. */
  time: number;
  /** The node the client talked to; informational. */
  node?: string;
}

/** Why an outcome is `fail` or `info`; informational. */
interface Outcome {
  error?: string;
}

type WriteFields = { op: 'write'; value: string };
type CasFields = { op: 'cas'; from: string | null; value: string };
type ReadFields = { op: 'read' };

export type InvokeEvent = EventBase & { type: 'invoke' } & (WriteFields | ReadFields | CasFields);
export type OkEvent = EventBase & { type: 'ok' } & (WriteFields | CasFields | { op: 'read'; value: string | null });
/** The operation definitely did not take effect; for `cas`, the compare failed. */
export type FailEvent = EventBase & Outcome & { type: 'fail' } & (WriteFields | ReadFields | CasFields);
/** The outcome is unknown: the operation may take effect at any point after its invocation, or never. */
export type InfoEvent = EventBase & Outcome & { type: 'info' } & (WriteFields | ReadFields | CasFields);
export type CompletionEvent = OkEvent | FailEvent | InfoEvent;
export type HistoryEvent = InvokeEvent | CompletionEvent;

/** Longest key, node name or error text, in characters. */
export const nameLengthMax = 256;
/** Longest register value, in characters. */
export const valueLengthMax = 4096;

const name = z.string().min(1).max(nameLengthMax);
const value = z.string().max(valueLengthMax);
const base = {
  process: z.number().int().nonnegative(),
  key: name,
  time: z.number().finite().nonnegative(),
  node: name.optional(),
};
const outcome = { error: name.optional() };
const writeFields = { op: z.literal('write'), value };
const casFields = { op: z.literal('cas'), from: value.nullable(), value };
const readFields = { op: z.literal('read') };

/** The three shapes of an operation for one event type, told apart by `op`. */
function byOp<T extends string, E extends z.ZodRawShape>(type: T, extra: E) {
  const head = { ...base, ...extra, type: z.literal(type) };
  return z.discriminatedUnion('op', [
    z.strictObject({ ...head, ...writeFields }),
    z.strictObject({ ...head, ...readFields }),
    z.strictObject({ ...head, ...casFields }),
  ]);
}

const okSchema = z.discriminatedUnion('op', [
  z.strictObject({ ...base, type: z.literal('ok'), ...writeFields }),
  z.strictObject({ ...base, type: z.literal('ok'), op: z.literal('read'), value: value.nullable() }),
  z.strictObject({ ...base, type: z.literal('ok'), ...casFields }),
]);

export const historyEventSchema = z.discriminatedUnion('type', [
  byOp('invoke', {}),
  okSchema,
  byOp('fail', outcome),
  byOp('info', outcome),
]);

// The schema and the types above describe the same events, both ways.
type SchemaEvent = z.infer<typeof historyEventSchema>;
const _schemaCoversType = (e: HistoryEvent): SchemaEvent => e;
const _typeCoversSchema = (e: SchemaEvent): HistoryEvent => e;

/** Events in the order the history file lists them, and the lines that could not be read. */
export interface ParsedHistory {
  events: HistoryEvent[];
  /** 1-based line numbers. Blank lines are skipped, not reported. */
  errors: { line: number; message: string }[];
}

/** Parses a JSON-lines history. A malformed line is reported and skipped; the rest still parse. */
export function parseHistory(text: string): ParsedHistory {
  const events: HistoryEvent[] = [];
  const errors: ParsedHistory['errors'] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] ?? '').trim();
    if (line === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (e) {
      errors.push({ line: i + 1, message: `not JSON: ${(e as Error).message}` });
      continue;
    }
    const parsed = historyEventSchema.safeParse(json);
    if (parsed.success) events.push(parsed.data);
    else errors.push({ line: i + 1, message: z.prettifyError(parsed.error).replace(/\n/g, '; ') });
  }
  return { events, errors };
}

export function readHistory(path: string): ParsedHistory {
  return parseHistory(readFileSync(path, 'utf8'));
}

/** One line of a history file, its fields in a fixed order so the file reads easily. */
export function formatEvent(e: HistoryEvent): string {
  const { type, process, op, key, time, node } = e;
  const from = 'from' in e ? { from: e.from } : {};
  const value = 'value' in e ? { value: e.value } : {};
  const error = 'error' in e ? { error: e.error } : {};
  return JSON.stringify({ type, process, op, key, ...from, ...value, time, ...(node === undefined ? {} : { node }), ...error });
}

/**
 * Appends events to a history file, one line each, synchronously: a test that crashes keeps
 * every event recorded before the crash, and concurrent clients in one process never interleave
 * within a line.
 */
export class HistoryWriter {
  private fd: number | undefined;
  private written = 0;

  private constructor(readonly path: string, fd: number) {
    this.fd = fd;
  }

  /** Opens `path` for appending, creating it when missing. */
  static open(path: string): HistoryWriter {
    return new HistoryWriter(path, openSync(path, 'a'));
  }

  /** Events appended so far by this writer. */
  get count(): number {
    return this.written;
  }

  append(event: HistoryEvent): void {
    if (this.fd === undefined) throw new Error(`HistoryWriter(${this.path}): append after close`);
    const parsed = historyEventSchema.safeParse(event);
    if (!parsed.success) {
      throw new TypeError(`HistoryWriter(${this.path}): invalid event: ${z.prettifyError(parsed.error)}`);
    }
    writeSync(this.fd, formatEvent(parsed.data) + '\n');
    this.written++;
  }

  /** Idempotent. */
  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/** An operation: an invocation and, unless the history ended first, its completion. */
export interface Operation {
  process: number;
  key: string;
  op: OpKind;
  /** `write`, `cas`: the value to write. `read` with outcome `ok`: the value read. */
  value?: string | null;
  /** `cas` only. */
  from?: string | null;
  /** `pending`: the history ended before the operation completed; it counts as `info`. */
  outcome: 'ok' | 'fail' | 'info' | 'pending';
  invokeTime: number;
  /** Absent when the outcome is `info` or `pending`: the operation may take effect any time after. */
  completeTime?: number;
  /** Positions in the event array, to find the lines in the file. */
  invokeIndex: number;
  completeIndex?: number;
  node?: string;
}

/** The history breaks the recording rules (not the register's): the recorder has a bug. */
export class HistoryError extends Error {
  constructor(readonly eventIndex: number, message: string) {
    super(`event ${eventIndex}: ${message}`);
    this.name = 'HistoryError';
  }
}

/**
 * Pairs each invocation with its completion, in invocation order. Throws a HistoryError when a
 * process has two operations open, reuses its id after an `info`, completes an operation it never
 * invoked, completes it with different arguments, or completes it before invoking it.
 */
export function pairOperations(events: readonly HistoryEvent[]): Operation[] {
  const ops: Operation[] = [];
  const open = new Map<number, Operation>();
  const retired = new Set<number>();
  events.forEach((e, i) => {
    if (e.type === 'invoke') {
      if (open.has(e.process)) throw new HistoryError(i, `process ${e.process} invoked while its previous operation is open`);
      if (retired.has(e.process)) throw new HistoryError(i, `process ${e.process} invoked after an info; use a new process id`);
      const op: Operation = {
        process: e.process, key: e.key, op: e.op, outcome: 'pending', invokeTime: e.time, invokeIndex: i,
        ...(e.op === 'read' ? {} : { value: e.value }),
        ...(e.op === 'cas' ? { from: e.from } : {}),
        ...(e.node === undefined ? {} : { node: e.node }),
      };
      open.set(e.process, op);
      ops.push(op);
      return;
    }
    const op = open.get(e.process);
    if (op === undefined) throw new HistoryError(i, `process ${e.process} completed an operation it did not invoke`);
    const mismatch = op.op !== e.op || op.key !== e.key
      || (e.op !== 'read' && e.value !== op.value)
      || (e.op === 'cas' && e.from !== op.from);
    if (mismatch) throw new HistoryError(i, `process ${e.process}: ${e.type} does not match its invoke at event ${op.invokeIndex}`);
    if (e.time < op.invokeTime) throw new HistoryError(i, `process ${e.process}: completed at ${e.time} before its invoke at ${op.invokeTime}`);
    open.delete(e.process);
    op.outcome = e.type;
    op.completeIndex = i;
    if (e.type === 'info') {
      retired.add(e.process);
      return;
    }
    op.completeTime = e.time;
    if (e.type === 'ok' && e.op === 'read') op.value = e.value;
  });
  return ops;
}
