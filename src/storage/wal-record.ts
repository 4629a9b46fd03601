// The records of the write-ahead log and their framing in a segment file.
//
//   segment header   'SHOALWAL' | u32be version | u32be 0                        (16 bytes)
//   record           u32be bodyBytes | u32be crc32(body) | body (msgpack WalRecord)
//
// Version 2 segments (storage format 3) are preallocated: the file is extended with zeros ahead
// of the records, a few MiB at a time, so that a synced write does not change the file's size
// and its fdatasync needs no journal commit. The records end where the zeros begin. Version 1
// segments (storage format 2) end with the file; they are still read, never written.
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
/** The version this release writes; version 1 is still read. */
export const segmentVersion = 2;
/** The segment versions this release reads. */
export type SegmentVersion = 1 | 2;
export const segmentHeaderBytes = 16;
export const recordHeaderBytes = 8;
/** A record is at most this long: a save is bounded by the core's append limits, far below. */
export const recordBytesMax = 256 * 1024 * 1024;

// Plain maps, as in sealed.ts: a record structure table would have to be stored with the data.
const packr = new Packr({ useRecords: false });

export function segmentHeader(version: SegmentVersion = segmentVersion): Buffer {
  const h = Buffer.alloc(segmentHeaderBytes);
  segmentMagic.copy(h, 0);
  h.writeUInt32BE(version, 8);
  return h;
}

/** The segment's version, or the problem with its header. */
export function readHeader(h: Uint8Array): { version: SegmentVersion } | { problem: string } {
  if (h.length < segmentHeaderBytes) return { problem: `the file is ${h.length} bytes, shorter than a segment header` };
  const b = Buffer.from(h.buffer, h.byteOffset, segmentHeaderBytes);
  if (!b.subarray(0, 8).equals(segmentMagic)) return { problem: 'the file does not start with a write-ahead log header' };
  const version = b.readUInt32BE(8);
  if (version !== 1 && version !== 2) return { problem: `segment version ${version}, this version reads 1 and 2` };
  return { version };
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
 * damage (`bad`). A checksum failure with data to the record's end is damage, even in the last
 * record: it may have been synced and acknowledged.
 *
 * In a version 1 segment the file ends with the records. A write is torn when it is incomplete
 * (its header or body runs past the end of the file) or when its bytes stop at a sector
 * boundary with only zeros after it: the file grew but the last sectors never reached the disk.
 *
 * In a version 2 segment (preallocated) the records end where only zeros are left. A crash can
 * leave any of the sectors written after the last sync unwritten, in any order, so a write is
 * torn when one of its sectors is all zeros (or, for a header of zeros, the sector it starts
 * in), whatever follows it: nothing after a sector that never reached the disk was synced.
 */
export type Framed =
  | { kind: 'record'; body: Buffer; end: number }
  | { kind: 'end' }
  | { kind: 'torn'; detail: string }
  | { kind: 'bad'; detail: string };

const sectorBytes = 512;

/** Reads the frame at `pos`; a body whose checksum matches is returned undecoded. */
export function readFrame(buf: Buffer, pos: number, version: SegmentVersion = 1): Framed {
  const preallocated = version === 2;
  const left = buf.length - pos;
  if (left === 0 || (preallocated && allZero(buf, pos, buf.length))) return { kind: 'end' };
  if (left < recordHeaderBytes) return { kind: 'torn', detail: `${left} bytes at the end, shorter than a record header` };
  const bytes = buf.readUInt32BE(pos);
  if (bytes === 0 || bytes > recordBytesMax) {
    const detail = `a record header gives a length of ${bytes} bytes`;
    const torn = preallocated ? bytes === 0 && allZero(buf, pos, sectorEnd(pos, buf.length)) : zeroTail(buf, pos);
    return torn ? { kind: 'torn', detail } : { kind: 'bad', detail };
  }
  if (bytes > left - recordHeaderBytes) {
    return { kind: 'torn', detail: `a record of ${bytes} bytes runs past the end of the file (${left - recordHeaderBytes} bytes left)` };
  }
  const end = pos + recordHeaderBytes + bytes;
  const body = buf.subarray(pos + recordHeaderBytes, end);
  if (crc32(body) !== buf.readUInt32BE(pos + 4)) {
    const detail = `a record of ${bytes} bytes fails its checksum`;
    const torn = preallocated ? hasZeroSector(buf, pos, end) : end === buf.length && zeroTail(buf, pos);
    return torn ? { kind: 'torn', detail } : { kind: 'bad', detail };
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

/** The end of the sector holding byte `pos`, or `limit` if that comes first. */
function sectorEnd(pos: number, limit: number): number {
  return Math.min(limit, (Math.floor(pos / sectorBytes) + 1) * sectorBytes);
}

/** Whether one of the sectors [from, to) spans (each cut to that range) holds only zeros. */
function hasZeroSector(buf: Buffer, from: number, to: number): boolean {
  for (let at = from; at < to; at = sectorEnd(at, to)) {
    if (allZero(buf, at, sectorEnd(at, to))) return true;
  }
  return false;
}

const zeros = Buffer.alloc(64 * 1024);

/** Whether bytes [from, to) of `buf` are all zero; compared a chunk at a time. */
function allZero(buf: Buffer, from: number, to: number): boolean {
  for (let at = from; at < to; at += zeros.length) {
    const n = Math.min(zeros.length, to - at);
    if (buf.compare(zeros, 0, n, at, at + n) !== 0) return false;
  }
  return true;
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
