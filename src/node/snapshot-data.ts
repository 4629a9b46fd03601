// The node's snapshot data: msgpack {members, featureLevel, removed, app}, where app is the
// state machine's snapshot as bin and comes last. featureLevel and removed were added after the
// first release, which wrote {members, app}: a missing featureLevel is 1, missing removed is
// empty, and a first-release node reading a newer snapshot ignores the keys it does not know. Built here around the state machine's parts with a single copy: the bytes are those of
// packr.pack({members, app}), but copying a multi-megabyte snapshot into a fresh buffer costs
// tens of milliseconds of page faults on a small VM, once per copy.

import { Packr } from 'msgpackr';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { memberRecordSchema, type MemberRecord } from '../resources/membership.ts';

const packr = new Packr({ useRecords: false });

export interface SnapshotData {
  members: MemberRecord[];
  /** The committed cluster feature level (src/base/feature-level.ts). */
  featureLevel: number;
  /** Ids removed from the cluster: their handshakes are refused with the reason `removed`. */
  removed: string[];
  app: Uint8Array;
}

/** The node-level state a snapshot carries besides the state machine's. */
export interface NodeState {
  members: MemberRecord[];
  featureLevel: number;
  removed: string[];
}

export function encodeSnapshotData(state: NodeState, appParts: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat([...prefixOf(state, appParts), ...appParts]);
}

/**
 * The same bytes, copied in slices of `sliceBytes` with `pause()` between them: the copy of a
 * multi-megabyte snapshot into fresh memory (mostly page faults on a small VM, 10-50 ms) does not
 * hold the event loop in one piece, on every node at the same moment.
 */
export async function encodeSnapshotDataInSlices(
  state: NodeState, appParts: readonly Uint8Array[], pause: () => Promise<void>, sliceBytes = 1 << 20,
): Promise<Uint8Array> {
  const parts = [...prefixOf(state, appParts), ...appParts];
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

/** What comes before the app's bytes: msgpack {members, featureLevel, removed, app: <bin header>}. */
function prefixOf(state: NodeState, appParts: readonly Uint8Array[]): Uint8Array[] {
  // {..., app: <empty bin>} ends with the empty bin's header, c4 00; put the real one there.
  // Level 1 with nothing removed is written as the first release wrote it, so a cluster that
  // has not moved past level 1 makes snapshots the first release reads byte for byte.
  const extra = state.featureLevel > 1 || state.removed.length > 0 ? { featureLevel: state.featureLevel, removed: state.removed } : {};
  const head = packr.pack({ members: state.members, ...extra, app: new Uint8Array(0) });
  if (head[head.length - 2] !== 0xc4 || head[head.length - 1] !== 0x00) throw new Error('unexpected msgpack encoding of an empty bin');
  let size = 0;
  for (const p of appParts) size += p.length;
  return [head.subarray(0, head.length - 2), binHeader(size)];
}

const snapshotDataSchema = z.object({
  members: z.array(memberRecordSchema),
  featureLevel: z.number().int().min(1).default(1),
  removed: z.array(z.string().max(256)).default([]),
  app: z.instanceof(Uint8Array),
});

/** Decodes and checks snapshot data; throws a storage_corrupt ShoalError on anything malformed. */
export function decodeSnapshotData(data: Uint8Array): SnapshotData {
  let raw: unknown;
  try {
    raw = packr.unpack(data);
  } catch (err) {
    throw new ShoalError('storage_corrupt', `snapshot data is not valid msgpack: ${(err as Error).message}`);
  }
  const parsed = snapshotDataSchema.safeParse(raw);
  if (!parsed.success) throw new ShoalError('storage_corrupt', `snapshot data is malformed: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/**
 * Why `data`, a snapshot's payload from a peer, cannot be restored; undefined when it can. Run
 * before the core accepts the snapshot: once accepted it is written to disk and restored, and a
 * payload that does not decode would stop the node then and at every start after. Empty data
 * restores nothing (restoreState), as for the snapshot a joining node starts from.
 *
 * The outer {members, app} map is decoded here (the app's bytes stay a view into `data`, not a
 * copy) and the member records checked; `checkApp`, the state machine's check of its part, may
 * decode the whole store once, and keeps nothing of it.
 */
export function checkSnapshotData(data: Uint8Array, checkApp?: (app: Uint8Array) => string | undefined): string | undefined {
  if (data.length === 0) return undefined;
  let value: unknown;
  try {
    value = packr.unpack(data);
  } catch (err) {
    return `snapshot data is not msgpack: ${(err as Error).message}`;
  }
  const parsed = snapshotDataSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `snapshot data is not {members, featureLevel, removed, app}: ${issue === undefined ? 'invalid' : `${issue.path.join('.') || '(root)'}: ${issue.message}`}`;
  }
  const app = checkApp?.(parsed.data.app);
  return app === undefined ? undefined : `the state machine cannot restore the snapshot: ${app}`;
}

function binHeader(n: number): Uint8Array {
  if (n < 0x100) return Uint8Array.of(0xc4, n);
  if (n < 0x10000) return Uint8Array.of(0xc5, n >> 8, n & 0xff);
  return Uint8Array.of(0xc6, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}
