// CRC-32 (IEEE 802.3, the polynomial of zlib, gzip and PNG). node:zlib's native crc32 when the
// runtime has it (Node 20.15 and later; about 20 times faster on a multi-megabyte snapshot),
// else a table-driven one written here, because the engines field promises any Node 20. It
// detects torn writes and flipped bits; it is not a defence against anyone who can write to the
// data directory.

import zlib from 'node:zlib';

const native = (zlib as { crc32?: (data: Uint8Array, value?: number) => number }).crc32;

const table = crcTable(0xedb88320);

/** The lookup table of a reflected 32-bit CRC with polynomial `poly` (reversed form); crc32c.ts uses it too. */
export function crcTable(poly: number): Uint32Array {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? poly ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
}

/** The CRC-32 of `bytes`, as an unsigned 32-bit integer. `seed` continues an earlier sum. */
export function crc32(bytes: Uint8Array, seed = 0): number {
  return native !== undefined ? native(bytes, seed) : crc32Table(bytes, seed);
}

/** The table-driven CRC-32 (exported so tests can check it against the native one). */
export function crc32Table(bytes: Uint8Array, seed = 0): number {
  let c = (seed ^ 0xffffffff) >>> 0;
  for (let i = 0; i < bytes.length; i++) {
    // The index is a byte, so the table always has the slot.
    c = (table[(c ^ (bytes[i] as number)) & 0xff] as number) ^ (c >>> 8);
  }
  return (c ^ 0xffffffff) >>> 0;
}
