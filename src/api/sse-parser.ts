// Reading the server-sent events that sse-stream.ts writes (/v1/watch, /v1/events), chunk by
// chunk: the CLI's followers and the web console share it, so it stays free of Node's modules.
// An `id` belongs to the message that carries it (the server sets one only on the last event of
// a revision, and a follower resumes after the last id it saw).

export interface SseMessage {
  event: string;
  data: string;
  id?: string;
}

/** Incremental SSE parser (the subset the server writes: event, data, id, comments). */
export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];
  private id: string | undefined;

  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const nl = this.buffer.search(/\r\n|\r|\n/);
      // A CR at the end of a chunk may be the first half of a CRLF: wait for the next chunk.
      if (nl < 0 || (nl === this.buffer.length - 1 && this.buffer[nl] === '\r')) break;
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith('\r\n', nl) ? 2 : 1));
      const msg = this.line(line);
      if (msg !== undefined) out.push(msg);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') {
      const msg = this.data.length > 0 || this.event !== ''
        ? { event: this.event || 'message', data: this.data.join('\n'), ...(this.id !== undefined ? { id: this.id } : {}) }
        : undefined;
      this.event = '';
      this.data = [];
      this.id = undefined;
      return msg;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id') this.id = value;
    return undefined;
  }
}
