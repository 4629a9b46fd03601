// A checksummed msgpack value: the frame of every value in the key file (key-file.ts), as it
// was in LevelDB.
//
//   u32be crc32(body) | body (msgpack)
//
// The key file has its own checksum; this frame, kept from LevelDB's days (which checked its
// blocks, but not on every read by default), lets every value be verified where it is read back.

import { Packr } from 'msgpackr';
import { crc32 } from './crc32.ts';

const checksumBytes = 4;

// Plain maps rather than msgpackr's records: a record's structure table would have to be kept
// alongside the data to read it back after a restart.
export const packr = new Packr({ useRecords: false });

export function seal(value: unknown): Buffer {
  const body = packr.pack(value);
  const out = Buffer.allocUnsafe(checksumBytes + body.length);
  out.writeUInt32BE(crc32(body), 0);
  body.copy(out, checksumBytes);
  return out;
}

/** Why a sealed value could not be opened. */
export class SealError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SealError';
  }
}

/** Verifies the checksum and decodes the body. The result is untrusted: parse it with a schema. */
export function unseal(frame: Uint8Array): unknown {
  if (frame.length <= checksumBytes) throw new SealError(`value of ${frame.length} bytes is shorter than its frame`);
  const buf = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
  const body = buf.subarray(checksumBytes);
  const stored = buf.readUInt32BE(0);
  const actual = crc32(body);
  if (stored !== actual) {
    throw new SealError(`checksum mismatch (stored ${hex(stored)}, computed ${hex(actual)})`);
  }
  try {
    return packr.unpack(body);
  } catch (err) {
    throw new SealError('checksum matches but the value does not decode', { cause: err });
  }
}

const hex = (n: number): string => `0x${n.toString(16).padStart(8, '0')}`;
