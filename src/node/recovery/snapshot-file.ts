// The snapshot file an operator downloads (GET /v1/cluster/snapshot, `shoal snapshot save`) and
// restores from (`shoal snapshot restore`): the applied state of one node at one index, with the
// membership, and a checksum over all of it.
//
//   "SHOALBAK" | u32be crc32(body) | msgpack body {format, clusterId, index, term, members, app}

import { Packr } from 'msgpackr';
import { z } from 'zod';
import { ShoalError } from '../../errors.ts';
import { crc32 } from '../../storage/crc32.ts';
import { memberRecordSchema, type MemberRecord } from '../../resources/membership.ts';

const magic = Buffer.from('SHOALBAK');
const packr = new Packr({ useRecords: false });
export const snapshotFileFormat = 1;

const bodySchema = z.object({
  format: z.literal(snapshotFileFormat),
  clusterId: z.string(),
  index: z.number().int().min(0),
  term: z.number().int().min(0),
  members: z.array(memberRecordSchema),
  app: z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'expected bytes'),
}).strict();
export type SnapshotFileBody = z.infer<typeof bodySchema>;

export function encodeSnapshotFile(body: Omit<SnapshotFileBody, 'format'>): Uint8Array {
  const packed = packr.pack({ format: snapshotFileFormat, ...body, members: body.members as MemberRecord[] });
  const header = Buffer.alloc(magic.length + 4);
  magic.copy(header);
  header.writeUInt32BE(crc32(packed), magic.length);
  return Buffer.concat([header, packed]);
}

/**
 * The same bytes as encodeSnapshotFile, as parts around the state machine's own snapshot parts
 * (store.snapshotInSlices), without copying them into one buffer: GET /v1/cluster/snapshot
 * streams these. The checksum comes first in the file, so it is computed over every part first,
 * with `pause()` about every `sliceBytes`.
 */
export async function encodeSnapshotFileParts(
  body: Omit<SnapshotFileBody, 'format' | 'app'>, appParts: readonly Uint8Array[], pause: () => Promise<void>, sliceBytes = 1 << 20,
): Promise<Uint8Array[]> {
  // The same keys in the same order as encodeSnapshotFile, ending with an empty bin (c4 00)
  // whose header is replaced by the real one.
  const head = packr.pack({ format: snapshotFileFormat, clusterId: body.clusterId, index: body.index, term: body.term, members: body.members as MemberRecord[], app: new Uint8Array(0) });
  if (head[head.length - 2] !== 0xc4 || head[head.length - 1] !== 0x00) throw new Error('unexpected msgpack encoding of an empty bin');
  let size = 0;
  for (const p of appParts) size += p.length;
  const parts = [head.subarray(0, head.length - 2), binHeader(size), ...appParts];
  let crc = 0;
  let sinceYield = 0;
  for (const p of parts) {
    crc = crc32(p, crc);
    sinceYield += p.length;
    if (sinceYield >= sliceBytes) {
      await pause();
      sinceYield = 0;
    }
  }
  const header = Buffer.alloc(magic.length + 4);
  magic.copy(header);
  header.writeUInt32BE(crc, magic.length);
  return [header, ...parts];
}

function binHeader(n: number): Uint8Array {
  if (n < 0x100) return Uint8Array.of(0xc4, n);
  if (n < 0x10000) return Uint8Array.of(0xc5, n >> 8, n & 0xff);
  return Uint8Array.of(0xc6, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

export function decodeSnapshotFile(bytes: Uint8Array, source: string): SnapshotFileBody {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < magic.length + 4 || !buf.subarray(0, magic.length).equals(magic)) {
    throw new ShoalError('bad_request', `${source} is not a shoal snapshot file (wrong magic bytes)`);
  }
  const body = buf.subarray(magic.length + 4);
  if (crc32(body) !== buf.readUInt32BE(magic.length)) {
    throw new ShoalError('bad_request', `${source} is damaged: its checksum does not match; download it again`);
  }
  const parsed = bodySchema.safeParse(packr.unpack(body));
  if (!parsed.success) throw new ShoalError('bad_request', `${source} has an unknown layout: ${parsed.error.message}`);
  return parsed.data;
}
