// The records of the write-ahead log and their framing in a segment file.
//
//   segment header   'SHOALWAL' | u32be version | u32be 0                        (16 bytes)
//   record           u32be bodyBytes | u32be crc32(body) | body (msgpack WalRecord)
//
// A record is one atomic change of the log: what one `save` persists (entries overwriting any
// conflicting suffix, hard state, a snapshot received from the leader), a snapshot taken here,
// or a compaction point. A segment opens with a `state` record, the whole non-entry state at that
// moment, so that the segments before it can be deleted once every entry they hold is compacted.

import { Packr } from 'msgpackr';
import { z } from 'zod';
import type { Entry, HardState } from '../raft/types.ts';
import { crc32 } from './crc32.ts';
import { entrySchema, hardStateSchema, snapshotRecordSchema, truncatedSchema, type SnapshotRecord, type Truncated } from './schemas.ts';

export type WalRecord =
  | { type: 'state'; truncated: Truncated; hardState?: HardState; snapshot?: SnapshotRecord }
  | { type: 'save'; entries: readonly Entry[]; hardState?: HardState; install?: SnapshotRecord }
  | { type: 'snapshot'; snapshot: SnapshotRecord }
  | { type: 'compact'; truncated: Truncated };

/** Everything besides entries: what a segment's opening state record carries. */
export interface LogHead {
  hardState?: HardState | undefined;
  truncated: Truncated;
  snapshot?: SnapshotRecord | undefined;
}

/** The head after `r`: the one rule for it, shared by the writer and the replay at open. */
export function nextHead(head: LogHead, r: WalRecord): LogHead {
  switch (r.type) {
    case 'state':
      return { hardState: r.hardState, truncated: r.truncated, snapshot: r.snapshot };
    case 'snapshot':
      return { ...head, snapshot: r.snapshot };
    case 'compact':
      return { ...head, truncated: r.truncated };
    case 'save': {
      let next = head;
      // Installing a snapshot received from the leader replaces the whole log.
      if (r.install !== undefined) next = { ...next, snapshot: r.install, truncated: { index: r.install.index, term: r.install.term } };
      if (r.hardState !== undefined) next = { ...next, hardState: r.hardState };
      return next;
    }
  }
}

export const walRecordSchema: z.ZodType<WalRecord, unknown> = z.discriminatedUnion('type', [
  z.object({ type: z.literal('state'), truncated: truncatedSchema, hardState: hardStateSchema.optional(), snapshot: snapshotRecordSchema.optional() }).strict(),
  z.object({ type: z.literal('save'), entries: z.array(entrySchema), hardState: hardStateSchema.optional(), install: snapshotRecordSchema.optional() }).strict(),
  z.object({ type: z.literal('snapshot'), snapshot: snapshotRecordSchema }).strict(),
  z.object({ type: z.literal('compact'), truncated: truncatedSchema }).strict(),
]);

export const segmentMagic = Buffer.from('SHOALWAL');
export const segmentVersion = 1;
export const segmentHeaderBytes = 16;
export const recordHeaderBytes = 8;
/** A record is at most this long: a save is bounded by the core's append limits, far below. */
export const recordBytesMax = 256 * 1024 * 1024;

// Plain maps, as in sealed.ts: a record structure table would have to be stored with the data.
const packr = new Packr({ useRecords: false });

export function segmentHeader(): Buffer {
  const h = Buffer.alloc(segmentHeaderBytes);
  segmentMagic.copy(h, 0);
  h.writeUInt32BE(segmentVersion, 8);
  return h;
}

/** The problem with a segment header, or undefined if it is ours. */
export function headerProblem(h: Uint8Array): string | undefined {
  if (h.length < segmentHeaderBytes) return `the file is ${h.length} bytes, shorter than a segment header`;
  const b = Buffer.from(h.buffer, h.byteOffset, segmentHeaderBytes);
  if (!b.subarray(0, 8).equals(segmentMagic)) return 'the file does not start with a write-ahead log header';
  const version = b.readUInt32BE(8);
  if (version !== segmentVersion) return `segment version ${version}, this version reads ${segmentVersion}`;
  return undefined;
}

/** A record framed for appending. Optional fields are left out rather than packed as nil. */
export function encodeRecord(record: WalRecord): Buffer {
  return frameBody(packr.pack(withoutUndefined(record)));
}

/** Frames a record body: its length and checksum, then the body. */
export function frameBody(body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(recordHeaderBytes + body.length);
  out.writeUInt32BE(body.length, 0);
  out.writeUInt32BE(crc32(body), 4);
  out.set(body, recordHeaderBytes);
  return out;
}

function withoutUndefined(record: WalRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(record)) if (v !== undefined) out[k] = v;
  return out;
}

/**
 * One step of reading a segment: a record, the clean end, a write a crash cut short (`torn`), or
 * damage (`bad`). A write is torn when it is incomplete (its header or body runs past the end of
 * the file) or when its bytes stop at a sector boundary with only zeros after it: the file grew
 * but the last sectors never reached the disk. A checksum failure with data to the end is damage,
 * even in the last record: it may have been synced and acknowledged.
 */
export type Framed =
  | { kind: 'record'; body: Buffer; end: number }
  | { kind: 'end' }
  | { kind: 'torn'; detail: string }
  | { kind: 'bad'; detail: string };

const sectorBytes = 512;

/** Reads the frame at `pos`; a body whose checksum matches is returned undecoded. */
export function readFrame(buf: Buffer, pos: number): Framed {
  const left = buf.length - pos;
  if (left === 0) return { kind: 'end' };
  if (left < recordHeaderBytes) return { kind: 'torn', detail: `${left} bytes at the end, shorter than a record header` };
  const bytes = buf.readUInt32BE(pos);
  if (bytes === 0 || bytes > recordBytesMax) {
    const detail = `a record header gives a length of ${bytes} bytes`;
    return zeroTail(buf, pos) ? { kind: 'torn', detail } : { kind: 'bad', detail };
  }
  if (bytes > left - recordHeaderBytes) {
    return { kind: 'torn', detail: `a record of ${bytes} bytes runs past the end of the file (${left - recordHeaderBytes} bytes left)` };
  }
  const end = pos + recordHeaderBytes + bytes;
  const body = buf.subarray(pos + recordHeaderBytes, end);
  if (crc32(body) !== buf.readUInt32BE(pos + 4)) {
    const detail = `a record of ${bytes} bytes fails its checksum`;
    return end === buf.length && zeroTail(buf, pos) ? { kind: 'torn', detail } : { kind: 'bad', detail };
  }
  return { kind: 'record', body, end };
}

/** Whether everything after some sector boundary past `pos` (or past `pos` itself) is zero. */
function zeroTail(buf: Buffer, pos: number): boolean {
  let lastNonZero = buf.length - 1;
  while (lastNonZero >= pos && buf[lastNonZero] === 0) lastNonZero--;
  if (lastNonZero < pos) return true;
  const boundary = Math.ceil((lastNonZero + 1) / sectorBytes) * sectorBytes;
  return boundary < buf.length;
}

/** Decodes and checks a record whose checksum matched; throws a message on failure. */
export function decodeRecord(body: Buffer): WalRecord {
  let decoded: unknown;
  try {
    decoded = packr.unpack(body);
  } catch (err) {
    throw new Error(`the checksum matches but the record does not decode (${(err as Error).message})`, { cause: err });
  }
  const parsed = walRecordSchema.safeParse(decoded);
  if (!parsed.success) throw new Error(`the record is not valid: ${parsed.error.message}`);
  return parsed.data;
}
