// The frames that cross a peer connection, and the zod schemas every decoded frame passes
// before anything acts on it: bytes from the network are untrusted even from an
// authenticated peer (a bug or a version skew is as likely as malice).

import { z } from 'zod';
import type { Message, MessageType } from '../src/raft/types.ts';

/** Message types that travel between nodes; the local ones ('hup', 'beat', ...) never do. */
export const NETWORK_MESSAGE_TYPES = [
  'prop', 'app', 'appResp', 'vote', 'voteResp', 'preVote', 'preVoteResp', 'snap', 'heartbeat',
  'heartbeatResp', 'transferLeader', 'timeoutNow', 'readIndex', 'readIndexResp', 'persisted',
] as const satisfies readonly MessageType[];

const NETWORK_TYPE_SET: ReadonlySet<string> = new Set(NETWORK_MESSAGE_TYPES);

export function isNetworkMessageType(type: MessageType): boolean {
  return NETWORK_TYPE_SET.has(type);
}

const idSchema = z.string().max(256);
/** HOST:PORT as a peer announces it; the node checks the shape (src/base/host-port.ts) before using one. */
const addressSchema = z.string().min(1).max(300);
/** The most peer hints one hello carries (more are left out by the sender). */
export const peerHintsMax = 32;
const countSchema = z.number().int().nonnegative();
/**
 * msgpackr decodes binary as a Buffer that may share memory with the whole frame (or Node's
 * buffer pool); a copy detaches it and makes it a plain Uint8Array, which is what the core and
 * the state machine are written against.
 */
const bytesSchema = z.instanceof(Uint8Array).transform((b) => new Uint8Array(b));

const confChangeSchema = z.object({
  changes: z.array(z.object({ type: z.enum(['addVoter', 'addLearner', 'removeNode']), node: idSchema })),
  leaveJoint: z.boolean().optional(),
  autoLeave: z.boolean().optional(),
  context: z.string().optional(),
});

const entrySchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('normal'), term: countSchema, index: countSchema, data: bytesSchema }),
  z.object({ kind: z.literal('conf'), term: countSchema, index: countSchema, change: confChangeSchema }),
]);

const confStateSchema = z.object({
  voters: z.array(idSchema),
  votersOutgoing: z.array(idSchema),
  learners: z.array(idSchema),
  learnersNext: z.array(idSchema),
  autoLeave: z.boolean(),
});

const snapshotSchema = z.object({
  meta: z.object({ index: countSchema, term: countSchema, confState: confStateSchema }),
  data: bytesSchema,
});

/**
 * The reference definition of a valid message. Decoding checks 'msg' frames with the
 * hand-written validate-message.ts instead (it is on the hot path); the two must agree.
 */
export const messageSchema = z.object({
  type: z.enum(NETWORK_MESSAGE_TYPES),
  from: idSchema,
  to: idSchema,
  term: countSchema,
  logTerm: countSchema,
  index: countSchema,
  entries: z.array(entrySchema),
  commit: countSchema,
  reject: z.boolean(),
  rejectHint: countSchema,
  snapshot: snapshotSchema.optional(),
  context: z.string().optional(),
  /** Added after the first release, whose nodes strip it and answer the relaying follower. */
  origin: idSchema.optional(),
});

export const helloFrameSchema = z.object({
  t: z.literal('hello'),
  clusterId: idSchema,
  nodeId: idSchema,
  /** The version this node speaks. */
  protocolVersion: countSchema,
  /** The versions this node accepts from peers, so a driver can work out a common level. */
  protocolMin: countSchema,
  protocolMax: countSchema,
  softwareVersion: z.string().max(256),
  /**
   * The highest cluster feature level this node can apply (src/base/feature-level.ts). Added
   * after the first release, whose hellos lack it (level 1); its schema strips unknown keys.
   */
  featureLevelMax: countSchema.optional(),
  /**
   * Where this node wants to be dialled (its peer listener) and where its client API answers,
   * HOST:PORT, so that peers find it after its address changed (docs/operations.md, "Changing
   * addresses"). A peer takes them only for the node the connection's certificate names. Added
   * after the first release, which strips them.
   */
  peerAddress: addressSchema.optional(),
  apiAddress: addressSchema.optional(),
  /**
   * Peer addresses this node knows of for other members (its own `--peers` and addresses it
   * learned): only places to look. A receiver believes none of them until the node it meets there
   * proves its id with its certificate.
   */
  peerHints: z.array(addressSchema).max(peerHintsMax).optional(),
});

const messageFrameSchema = z.object({ t: z.literal('msg'), m: messageSchema });

/** Opens a snapshot stream: the 'snap' message with empty snapshot data, and the data's size. */
const snapBeginFrameSchema = z.object({ t: z.literal('snapBegin'), id: countSchema, bytes: countSchema, m: messageSchema });

/** Chunks arrive in order (one WebSocket), so `offset` only double-checks the reassembly. */
const snapChunkFrameSchema = z.object({
  t: z.literal('snapChunk'),
  id: countSchema,
  offset: countSchema,
  // Not copied: the receiver copies it into the reassembly buffer right away.
  data: z.instanceof(Uint8Array),
});

/** Receiver to sender: the snapshot was reassembled and handed on (ok) or abandoned. */
const snapAckFrameSchema = z.object({ t: z.literal('snapAck'), id: countSchema, ok: z.boolean(), reason: z.string().max(256).optional() });

export const frameSchema = z.discriminatedUnion('t', [
  helloFrameSchema,
  messageFrameSchema,
  snapBeginFrameSchema,
  snapChunkFrameSchema,
  snapAckFrameSchema,
]);

export type DecodedMessage = z.infer<typeof messageSchema>;
export type HelloFrame = z.infer<typeof helloFrameSchema>;
export type Frame = z.infer<typeof frameSchema>;
export type SnapBeginFrame = z.infer<typeof snapBeginFrameSchema>;
export type SnapChunkFrame = z.infer<typeof snapChunkFrameSchema>;
export type SnapAckFrame = z.infer<typeof snapAckFrameSchema>;

/** What the encoder takes: the same shapes, typed with the core's own types. */
export type OutgoingFrame =
  | HelloFrame
  | { t: 'msg'; m: Message }
  | { t: 'snapBegin'; id: number; bytes: number; m: Message }
  | { t: 'snapChunk'; id: number; offset: number; data: Uint8Array }
  | SnapAckFrame;

// Compile-time check that what the schema lets through is a Message the core accepts.
const _decodedIsMessage = (m: z.infer<typeof messageSchema>): Message => m;
void _decodedIsMessage;
