// Every queue, buffer, frame and wait of the transport has a bound, named here with its unit
// last. Raft tolerates a lost append or heartbeat; it does not tolerate unbounded memory.

const MiB = 1024 * 1024;

export interface TransportLimits {
  /** Messages waiting for one peer; past it, `send` drops. */
  queuedMessagesMax: number;
  /** Encoded bytes waiting for one peer; past it, `send` drops. */
  queuedBytesMax: number;
  /** Largest encoded frame sent or accepted (ws `maxPayload`); larger messages are dropped. */
  frameBytesMax: number;
  /**
   * Queued messages coalesced into one WebSocket message (protocol 2 peers; never above
   * `frameBytesMax`). A frame larger than this travels alone.
   */
  batchBytesMax: number;
  /** Snapshot data per chunk frame. */
  snapshotChunkBytes: number;
  /** Largest snapshot a receiver reassembles. */
  snapshotBytesMax: number;
  /** Snapshots queued or streaming to one peer (Raft sends one at a time; one spare). */
  snapshotsQueuedMax: number;
  /** Stop handing frames to a socket while its `bufferedAmount` is above this. */
  socketBufferedBytesMax: number;
  /** From TCP connect to both hellos exchanged. */
  handshakeTimeoutMs: number;
  /** How often each outbound connection pings, to measure rtt and notice a dead peer. */
  pingIntervalMs: number;
  /** A connection that heard nothing (no frame, ping or pong) for this long is torn down. */
  silenceTimeoutMs: number;
  /** Reconnect backoff: first delay, doubled per failed attempt up to the max, ± the jitter ratio. */
  reconnectDelayMinMs: number;
  reconnectDelayMaxMs: number;
  reconnectJitterRatio: number;
  /** `close()` waits this long for close frames to be acknowledged before cutting sockets. */
  closeGraceMs: number;
}

export const TRANSPORT_LIMITS_DEFAULT: Readonly<TransportLimits> = Object.freeze({
  queuedMessagesMax: 4096,
  queuedBytesMax: 64 * MiB,
  frameBytesMax: 16 * MiB,
  batchBytesMax: 1 * MiB,
  snapshotChunkBytes: 1 * MiB,
  snapshotBytesMax: 1024 * MiB,
  snapshotsQueuedMax: 2,
  socketBufferedBytesMax: 4 * MiB,
  handshakeTimeoutMs: 5_000,
  pingIntervalMs: 1_000,
  silenceTimeoutMs: 10_000,
  reconnectDelayMinMs: 50,
  reconnectDelayMaxMs: 2_000,
  reconnectJitterRatio: 0.2,
  closeGraceMs: 250,
});

/** Fills in defaults and rejects combinations that cannot work (programmer errors). */
export function resolveLimits(partial: Partial<TransportLimits> = {}): TransportLimits {
  const limits: TransportLimits = { ...TRANSPORT_LIMITS_DEFAULT, ...partial };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isFinite(value) || value < 0) throw new RangeError(`limits.${name} must be a finite number >= 0, got ${value}`);
  }
  if (limits.queuedMessagesMax < 1 || limits.snapshotsQueuedMax < 1 || limits.batchBytesMax < 1) {
    throw new RangeError('limits.queuedMessagesMax, limits.snapshotsQueuedMax and limits.batchBytesMax must be at least 1');
  }
  // A chunk frame is the chunk plus a small header; it must fit in a frame.
  if (limits.snapshotChunkBytes < 1 || limits.snapshotChunkBytes + 1024 > limits.frameBytesMax) {
    throw new RangeError('limits.snapshotChunkBytes must be at least 1 and leave 1 KiB of room under limits.frameBytesMax');
  }
  if (limits.reconnectDelayMinMs > limits.reconnectDelayMaxMs || limits.reconnectJitterRatio >= 1) {
    throw new RangeError('reconnect backoff: min must be <= max and the jitter ratio below 1');
  }
  return limits;
}
