// The keys of the key file (<dir>/storage.keys, key-file.ts; LevelDB under <dir>/log up to 0.1.x).
//
//   'format'             the storage format (1, 2 or 3, see schemas.ts)
//   'm/' + key           node-layer metadata (identity, member records, the log id)
//
// Storage format 1 also kept the log here; these keys are read only to move such a log into the
// write-ahead log (migrate.ts). Entry keys sort by index because the index is big-endian, so a
// range scan reads the log in order.
//
//   'e' + u64be(index)   a log entry
//   'hs'                 the hard state (term, vote, commit)
//   'snap'               metadata of the snapshot the node restores from
//   'trunc'              the last compacted entry (index, term); the log starts after it

import { assert } from '../base/assert.ts';

const entryPrefix = 0x65; // 'e'
const entryKeyBytes = 9;
const metaKeyBytesMax = 256;

export const hardStateKey = Buffer.from('hs');
export const snapshotKey = Buffer.from('snap');
export const truncatedKey = Buffer.from('trunc');
export const formatKey = Buffer.from('format');

/** Bounds of a scan over every key with the entry prefix, well-formed or not. */
export const entryRange = { gte: Buffer.from([entryPrefix]), lt: Buffer.from([entryPrefix + 1]) };

export function entryKey(index: number): Buffer {
  assert(Number.isSafeInteger(index) && index > 0, `entry index ${index} is a positive safe integer`);
  const key = Buffer.alloc(entryKeyBytes);
  key[0] = entryPrefix;
  key.writeUInt32BE(Math.floor(index / 2 ** 32), 1);
  key.writeUInt32BE(index >>> 0, 5);
  return key;
}

/** The index an entry key names, or undefined if the key is not a well-formed entry key. */
export function entryKeyIndex(key: Uint8Array): number | undefined {
  if (key.length !== entryKeyBytes || key[0] !== entryPrefix) return undefined;
  const b = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  const index = b.readUInt32BE(1) * 2 ** 32 + b.readUInt32BE(5);
  return Number.isSafeInteger(index) && index > 0 ? index : undefined;
}

export function metaKey(key: string): Buffer {
  const k = Buffer.from(`m/${key}`);
  if (key.length === 0 || k.length > metaKeyBytesMax) {
    throw new RangeError(`meta key must be 1 to ${metaKeyBytesMax - 2} bytes, got ${k.length - 2}`);
  }
  return k;
}
