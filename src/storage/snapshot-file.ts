// The format of one snapshot file. Pure: encoding and decoding only; snapshot-dir.ts does I/O.
//
//   "SHOALSNP"           8 bytes, magic
//   u32be headerBytes
//   header               msgpack {format, index, term, confState, dataBytes, dataCrc32}
//   u32be crc32(header)
//   data                 dataBytes bytes, the state machine's serialized state
//
// The length and checksum of the data are in the checksummed header, so a truncated file, a
// file with bytes appended and a flipped bit anywhere are all told apart from a good file.

import { crc32 } from './crc32.ts';
import { packr } from './sealed.ts';
import { snapshotHeaderSchema, type SnapshotHeader } from './schemas.ts';
import type { Snapshot } from '../raft/types.ts';

const magic = Buffer.from('SHOALSNP');
const u32Bytes = 4;
/** The header holds a configuration, not data: a larger length field is damage. */
const headerBytesMax = 1024 * 1024;

export function snapshotHeader(snap: Snapshot): SnapshotHeader {
  return {
    format: 1,
    index: snap.meta.index,
    term: snap.meta.term,
    confState: snap.meta.confState,
    dataBytes: snap.data.length,
    dataCrc32: crc32(snap.data),
  };
}

/** Everything in the file before the data; the data is written after it without a copy. */
export function encodeSnapshotPrefix(header: SnapshotHeader): Buffer {
  const body = packr.pack(header);
  const out = Buffer.alloc(magic.length + u32Bytes + body.length + u32Bytes);
  magic.copy(out, 0);
  out.writeUInt32BE(body.length, magic.length);
  body.copy(out, magic.length + u32Bytes);
  out.writeUInt32BE(crc32(body), magic.length + u32Bytes + body.length);
  return out;
}

export type DecodedSnapshot =
  | { ok: true; header: SnapshotHeader; snapshot: Snapshot }
  | { ok: false; detail: string };

/** Decodes and verifies a whole snapshot file. Never throws on bad input. */
export function decodeSnapshotFile(file: Uint8Array): DecodedSnapshot {
  const buf = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  const fixed = magic.length + 2 * u32Bytes;
  if (buf.length < fixed) return fail(`file is ${buf.length} bytes, shorter than any snapshot header`);
  if (!buf.subarray(0, magic.length).equals(magic)) return fail('file does not start with the snapshot magic');
  const headerBytes = buf.readUInt32BE(magic.length);
  if (headerBytes > headerBytesMax || fixed + headerBytes > buf.length) {
    return fail(`header length ${headerBytes} does not fit in the ${buf.length}-byte file (truncated?)`);
  }
  const headerStart = magic.length + u32Bytes;
  const body = buf.subarray(headerStart, headerStart + headerBytes);
  if (buf.readUInt32BE(headerStart + headerBytes) !== crc32(body)) return fail('header checksum mismatch');
  const header = parseHeader(body);
  if (header === undefined) return fail('header does not decode as a snapshot header');
  const data = buf.subarray(fixed + headerBytes);
  if (data.length !== header.dataBytes) {
    return fail(`data is ${data.length} bytes, the header says ${header.dataBytes} (truncated or appended to)`);
  }
  if (crc32(data) !== header.dataCrc32) return fail('data checksum mismatch');
  const meta = { index: header.index, term: header.term, confState: header.confState };
  return { ok: true, header, snapshot: { meta, data: new Uint8Array(data) } };
}

function parseHeader(body: Buffer): SnapshotHeader | undefined {
  try {
    const parsed = snapshotHeaderSchema.safeParse(packr.unpack(body));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // the header checksum matched, so this is a writer bug or a newer format
  }
}

const fail = (detail: string): DecodedSnapshot => ({ ok: false, detail });
