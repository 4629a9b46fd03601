// CRC-32C (Castagnoli), the checksum of LevelDB's log records and table blocks, stored "masked"
// (rotated and offset, so a checksum of data holding checksums does not vanish). Read-side only:
// leveldb-reader.ts checks an old LevelDB directory with it.

import { crcTable } from './crc32.ts';

const table = crcTable(0x82f63b78);

/** The CRC-32C of `bytes`; `seed` continues an earlier sum. */
export function crc32c(bytes: Uint8Array, seed = 0): number {
  let c = (seed ^ 0xffffffff) >>> 0;
  for (let i = 0; i < bytes.length; i++) c = (table[(c ^ (bytes[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** LevelDB's masked form of a CRC-32C (leveldb/util/crc32c.h, Mask). */
export function maskCrc(crc: number): number {
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}
