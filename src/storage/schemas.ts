// Schemas for everything read back from disk. A value that passed its checksum can still be
// wrong (written by a buggy or newer version), so each is parsed before it reaches the core.

import { z } from 'zod';
import type { ConfChange, ConfState, Entry, HardState } from '../raft/types.ts';

/** What reading a record needs of a schema; zod's schemas fit, so callers may pass their own. */
export interface SafeParser<T> {
  safeParse(v: unknown): { success: true; data: T } | { success: false; error: { message: string } };
}

const index = z.int().nonnegative();
const nodeId = z.string();

// Copied out of the decoded buffer: msgpackr hands back a Buffer viewing the whole value, and
// the log must hold plain Uint8Arrays equal to what was appended.
const bytes = z.instanceof(Uint8Array).transform((b) => new Uint8Array(b));

export const confStateSchema: z.ZodType<ConfState> = z.object({
  voters: z.array(nodeId),
  votersOutgoing: z.array(nodeId),
  learners: z.array(nodeId),
  learnersNext: z.array(nodeId),
  autoLeave: z.boolean(),
});

const confChangeSchema: z.ZodType<ConfChange> = z.object({
  changes: z.array(z.object({ type: z.enum(['addVoter', 'addLearner', 'removeNode']), node: nodeId })),
  leaveJoint: z.boolean().optional(),
  autoLeave: z.boolean().optional(),
  context: z.string().optional(),
});

export const entrySchema: z.ZodType<Entry, unknown> = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('normal'), term: index, index, data: bytes }),
  z.object({ kind: z.literal('conf'), term: index, index, change: confChangeSchema }),
]);

export const hardStateSchema: z.ZodType<HardState> = z.object({ term: index, vote: nodeId, commit: index });

/** The last compacted entry; the log holds the entries after it. */
export const truncatedSchema = z.object({ index, term: index });
export type Truncated = z.infer<typeof truncatedSchema>;

/** The 'snap' record: which snapshot file the node restores from, and what it must contain. */
export const snapshotRecordSchema = z.object({
  index,
  term: index,
  confState: confStateSchema,
  file: z.string(),
  dataBytes: index,
  dataCrc32: z.int().nonnegative(),
});
export type SnapshotRecord = z.infer<typeof snapshotRecordSchema>;

/** The header of a snapshot file. */
export const snapshotHeaderSchema = z.object({
  format: z.literal(1),
  index,
  term: index,
  confState: confStateSchema,
  dataBytes: index,
  dataCrc32: z.int().nonnegative(),
});
export type SnapshotHeader = z.infer<typeof snapshotHeaderSchema>;

/**
 * 1: the log in LevelDB; 2: the log in the write-ahead log (wal/), LevelDB (the key file since
 * classic-level went) keeping node metadata; 3: as 2, and new write-ahead log segments are preallocated (segment
 * version 2), which releases reading format 2 do not read.
 */
export const storageFormat = 3;
export type StorageFormat = 1 | 2 | 3;
export const formatSchema = z.object({ format: z.int() });
