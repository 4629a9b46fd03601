// Docker's log stream (GET /containers/{id}/logs, a container without a TTY, timestamps on) as
// log lines. Pure: bytes in, LogLines out, tested without a daemon.
//
// The stream is multiplexed ("stdcopy" framing): each frame is an 8-byte header (byte 0 the
// stream: 1 stdout, 2 stderr; bytes 4-7 the payload's length, big-endian) and a payload. With
// timestamps each payload is one log message: `<RFC 3339 nanosecond time> <text>`, ending in a
// newline unless Docker split a long line into partial messages (at 16 KiB), whose pieces then
// follow each other, each with its own timestamp; a line keeps the time of its first piece.
// Frames arrive cut anywhere by the socket, so bytes are kept until a frame is whole.

import type { LogLine, LogStream } from './runtime.ts';

const headerBytes = 8;
/** A frame longer than this is not Docker's log framing: the stream is refused rather than buffered. */
export const logFrameBytesMax = 1 << 20;
/** A line longer than this is cut, and the rest continues as another line (memory stays bounded). */
export const logLineBytesMax = 64 * 1024;

const streams: Record<number, LogStream | 'stdin'> = { 0: 'stdin', 1: 'stdout', 2: 'stderr' };

export class LogFrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LogFrameError';
  }
}

interface Partial {
  at: number;
  bytes: Buffer[];
  length: number;
}

export class DockerLogDecoder {
  private pending: Buffer = Buffer.alloc(0);
  private readonly partial = new Map<LogStream, Partial>();

  /** `now`: the wall-clock ms to stamp a message that carries no readable time (never seen from Docker). */
  constructor(private readonly now: () => number) {}

  /** The lines completed by `chunk`; throws LogFrameError on bytes that are not log frames. */
  push(chunk: Buffer): LogLine[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const out: LogLine[] = [];
    while (this.pending.length >= headerBytes) {
      const kind = streams[this.pending[0] ?? -1];
      const size = this.pending.readUInt32BE(4);
      if (kind === undefined) throw new LogFrameError(`a log frame of unknown stream ${String(this.pending[0])}`);
      if (size > logFrameBytesMax) throw new LogFrameError(`a log frame of ${size} bytes (at most ${logFrameBytesMax})`);
      if (this.pending.length < headerBytes + size) break;
      const payload = this.pending.subarray(headerBytes, headerBytes + size);
      this.pending = this.pending.subarray(headerBytes + size);
      if (kind !== 'stdin') this.message(kind, payload, out);
    }
    return out;
  }

  /** The stream ended: lines without their newline yet, as they are. */
  end(): LogLine[] {
    const out: LogLine[] = [];
    for (const stream of [...this.partial.keys()]) this.flush(stream, out);
    return out;
  }

  private message(stream: LogStream, payload: Buffer, out: LogLine[]): void {
    const space = payload.indexOf(0x20);
    const stamp = space > 0 ? Date.parse(payload.subarray(0, space).toString('latin1')) : Number.NaN;
    // Without a readable stamp, the whole payload is text, stamped now.
    const at = Number.isFinite(stamp) ? stamp : this.now();
    let text = Number.isFinite(stamp) ? payload.subarray(space + 1) : payload;
    for (;;) {
      const nl = text.indexOf(0x0a);
      if (nl < 0) break;
      this.append(stream, at, text.subarray(0, nl), out);
      this.flush(stream, out);
      text = text.subarray(nl + 1);
    }
    if (text.length > 0) this.append(stream, at, text, out);
  }

  private append(stream: LogStream, at: number, piece: Buffer, out: LogLine[]): void {
    let p = this.partial.get(stream);
    if (p === undefined) {
      p = { at, bytes: [], length: 0 };
      this.partial.set(stream, p);
    }
    let rest = piece;
    while (p.length + rest.length > logLineBytesMax) {
      const room = logLineBytesMax - p.length;
      p.bytes.push(rest.subarray(0, room));
      p.length += room;
      rest = rest.subarray(room);
      this.flush(stream, out);
      p = { at, bytes: [], length: 0 };
      this.partial.set(stream, p);
    }
    p.bytes.push(rest);
    p.length += rest.length;
  }

  private flush(stream: LogStream, out: LogLine[]): void {
    const p = this.partial.get(stream);
    if (p === undefined) return;
    this.partial.delete(stream);
    const text = Buffer.concat(p.bytes).toString('utf8');
    out.push({ stream, at: p.at, text: text.endsWith('\r') ? text.slice(0, -1) : text });
  }
}

/** One frame as Docker writes it (tests build streams with it). */
export function encodeLogFrame(stream: LogStream, payload: string | Buffer): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  const header = Buffer.alloc(headerBytes);
  header[0] = stream === 'stdout' ? 1 : 2;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}
