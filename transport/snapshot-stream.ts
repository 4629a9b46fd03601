// Snapshots are too large for one frame, so a 'snap' message travels as a begin frame (the
// message with empty snapshot data, plus the data's size) and then chunk frames. The sender
// produces frames on demand, so backpressure decides the pace; the receiver reassembles into a
// buffer allocated once at the announced (bounded) size.

import type { Message, NodeId } from '../src/raft/types.ts';
import { encodeFrame } from './codec.ts';
import type { SnapBeginFrame, SnapChunkFrame } from './frames.ts';

const EMPTY = new Uint8Array(0);

export class OutgoingSnapshot {
  /** -1 until the begin frame went out, then the offset of the next chunk. */
  private offset = -1;

  constructor(
    readonly id: number,
    readonly message: Message & { snapshot: NonNullable<Message['snapshot']> },
    private readonly chunkBytes: number,
  ) {}

  get finished(): boolean {
    return this.offset >= this.message.snapshot.data.byteLength;
  }

  /** The next frame to write, or null once every frame was produced. */
  nextFrame(): Uint8Array | null {
    const data = this.message.snapshot.data;
    if (this.offset < 0) {
      this.offset = 0;
      const m: Message = { ...this.message, snapshot: { meta: this.message.snapshot.meta, data: EMPTY } };
      return encodeFrame({ t: 'snapBegin', id: this.id, bytes: data.byteLength, m });
    }
    if (this.finished) return null;
    const end = Math.min(data.byteLength, this.offset + this.chunkBytes);
    const frame = encodeFrame({ t: 'snapChunk', id: this.id, offset: this.offset, data: data.subarray(this.offset, end) });
    this.offset = end;
    return frame;
  }
}

/**
 * `broken`: the stream broke its own rules (too large, a chunk out of place, opened by a message
 * without a snapshot), as no correct sender does; otherwise it was cut short (the connection
 * closed, a newer snapshot superseded it).
 */
export type AssemblyEvent =
  | { kind: 'done'; id: number; message: Message }
  | { kind: 'failed'; id: number; reason: string; broken: boolean };

interface Assembly {
  id: number;
  message: Message;
  buffer: Uint8Array;
  received: number;
}

/** One per inbound connection: frames of one connection arrive in order, one stream at a time. */
export class SnapshotAssembler {
  private current: Assembly | null = null;

  constructor(
    private readonly peerId: NodeId,
    private readonly snapshotBytesMax: number,
  ) {}

  begin(frame: SnapBeginFrame): AssemblyEvent[] {
    const events = this.abort('superseded by a newer snapshot');
    const { id, bytes, m } = frame;
    if (m.type !== 'snap' || m.snapshot === undefined) {
      events.push({ kind: 'failed', id, reason: `snapshot stream opened with a '${m.type}' message without a snapshot`, broken: true });
    } else if (bytes > this.snapshotBytesMax) {
      events.push({ kind: 'failed', id, reason: `snapshot of ${bytes} bytes from ${this.peerId} exceeds snapshotBytesMax ${this.snapshotBytesMax}`, broken: true });
    } else {
      this.current = { id, message: m, buffer: new Uint8Array(bytes), received: 0 };
      const done = this.maybeComplete();
      if (done !== null) events.push(done);
    }
    return events;
  }

  chunk(frame: SnapChunkFrame): AssemblyEvent[] {
    const a = this.current;
    // Chunks of a stream refused at begin (or aborted) keep arriving until the sender hears
    // the refusal; they are ignored rather than treated as errors.
    if (a === null || a.id !== frame.id) return [];
    if (frame.offset !== a.received || a.received + frame.data.byteLength > a.buffer.byteLength) {
      this.current = null;
      return [{ kind: 'failed', id: a.id, reason: `chunk at offset ${frame.offset} (${frame.data.byteLength} bytes) does not continue ${a.received} of ${a.buffer.byteLength}`, broken: true }];
    }
    a.buffer.set(frame.data, a.received);
    a.received += frame.data.byteLength;
    const done = this.maybeComplete();
    return done === null ? [] : [done];
  }

  /** Drops a stream in progress (connection lost, superseded); returns its failure, if any. */
  abort(reason: string): AssemblyEvent[] {
    const a = this.current;
    this.current = null;
    return a === null ? [] : [{ kind: 'failed', id: a.id, reason, broken: false }];
  }

  private maybeComplete(): AssemblyEvent | null {
    const a = this.current;
    if (a === null || a.received < a.buffer.byteLength) return null;
    this.current = null;
    const snapshot = a.message.snapshot;
    if (snapshot === undefined) return { kind: 'failed', id: a.id, reason: 'snapshot vanished', broken: true };
    return { kind: 'done', id: a.id, message: { ...a.message, snapshot: { meta: snapshot.meta, data: a.buffer } } };
  }
}
