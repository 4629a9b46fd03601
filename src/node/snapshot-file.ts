// The snapshot file an operator downloads (GET /v1/cluster/snapshot, `shoal snapshot save`) and
// restores from (`shoal snapshot restore`): the applied state of one node at one index, with the
// membership, and a checksum over all of it.
//
//   "SHOALBAK" | u32be crc32(body) | msgpack body {format, clusterId, index, term, members, app}

import { Packr } from 'msgpackr';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { crc32 } from '../storage/crc32.ts';
import { memberRecordSchema, type MemberRecord } from './membership.ts';

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
