// The node's snapshot data: msgpack {members, app}, where app is the state machine's snapshot as
// bin. Built here around the state machine's parts with a single copy: the bytes are those of
// packr.pack({members, app}), but copying a multi-megabyte snapshot into a fresh buffer costs
// tens of milliseconds of page faults on a small VM, once per copy.

import { Packr } from 'msgpackr';
import type { MemberRecord } from './membership.ts';

const packr = new Packr({ useRecords: false });

export interface SnapshotData {
  members: MemberRecord[];
  app: Uint8Array;
}

export function encodeSnapshotData(members: MemberRecord[], appParts: readonly Uint8Array[]): Uint8Array {
  // {members, app: <empty bin>} ends with the empty bin's header, c4 00; put the real one there.
  const head = packr.pack({ members, app: new Uint8Array(0) });
  if (head[head.length - 2] !== 0xc4 || head[head.length - 1] !== 0x00) throw new Error('unexpected msgpack encoding of an empty bin');
  let size = 0;
  for (const p of appParts) size += p.length;
  return Buffer.concat([head.subarray(0, head.length - 2), binHeader(size), ...appParts]);
}

export function decodeSnapshotData(data: Uint8Array): SnapshotData {
  return packr.unpack(data) as SnapshotData;
}

function binHeader(n: number): Uint8Array {
  if (n < 0x100) return Uint8Array.of(0xc4, n);
  if (n < 0x10000) return Uint8Array.of(0xc5, n >> 8, n & 0xff);
  return Uint8Array.of(0xc6, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}
