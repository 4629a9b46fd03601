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
  return Buffer.concat([...prefixOf(members, appParts), ...appParts]);
}

/**
 * The same bytes, copied in slices of `sliceBytes` with `pause()` between them: the copy of a
 * multi-megabyte snapshot into fresh memory (mostly page faults on a small VM, 10-50 ms) does not
 * hold the event loop in one piece, on every node at the same moment.
 */
export async function encodeSnapshotDataInSlices(
  members: MemberRecord[], appParts: readonly Uint8Array[], pause: () => Promise<void>, sliceBytes = 1 << 20,
): Promise<Uint8Array> {
  const parts = [...prefixOf(members, appParts), ...appParts];
  let total = 0;
  for (const p of parts) total += p.length;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  let sinceYield = 0;
  for (const p of parts) {
    for (let from = 0; from < p.length;) {
      const n = Math.min(p.length - from, sliceBytes - sinceYield);
      out.set(p.subarray(from, from + n), at);
      at += n;
      from += n;
      sinceYield += n;
      if (sinceYield >= sliceBytes) {
        await pause();
        sinceYield = 0;
      }
    }
  }
  return out;
}

/** What comes before the app's bytes: msgpack {members, app: <bin header>}. */
function prefixOf(members: MemberRecord[], appParts: readonly Uint8Array[]): Uint8Array[] {
  // {members, app: <empty bin>} ends with the empty bin's header, c4 00; put the real one there.
  const head = packr.pack({ members, app: new Uint8Array(0) });
  if (head[head.length - 2] !== 0xc4 || head[head.length - 1] !== 0x00) throw new Error('unexpected msgpack encoding of an empty bin');
  let size = 0;
  for (const p of appParts) size += p.length;
  return [head.subarray(0, head.length - 2), binHeader(size)];
}

export function decodeSnapshotData(data: Uint8Array): SnapshotData {
  return packr.unpack(data) as SnapshotData;
}

function binHeader(n: number): Uint8Array {
  if (n < 0x100) return Uint8Array.of(0xc4, n);
  if (n < 0x10000) return Uint8Array.of(0xc5, n >> 8, n & 0xff);
  return Uint8Array.of(0xc6, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}
