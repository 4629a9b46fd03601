// CRC-32C (Castagnoli), the checksum of LevelDB's log records and table blocks, stored "masked"
// (rotated and offset, so a checksum of data holding checksums does not vanish). Read-side only:
// leveldb-reader.ts checks an old LevelDB directory with it.

const table = makeTable();

function makeTable(): Uint32Array {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
}

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
