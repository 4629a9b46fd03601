// A server-sent events parser (the WHATWG event-stream format) over text chunks, for streams
// read with fetch: EventSource cannot send the Authorization header the API needs.

export interface SseMessage {
  event: string;
  data: string;
  id: string | undefined;
}

export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];
  private id: string | undefined;

  /** Feeds a chunk of the stream; returns the messages it completed, in order. */
  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const nl = this.buffer.search(/\r\n|\r|\n/);
      // A CR at the very end may be the first half of a CRLF cut between chunks: wait for the next.
      if (nl === -1 || (nl === this.buffer.length - 1 && this.buffer[nl] === '\r')) break;
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith('\r\n', nl) ? 2 : 1));
      const message = this.line(line);
      if (message !== undefined) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = '';
        return undefined;
      }
      const m = { event: this.event === '' ? 'message' : this.event, data: this.data.join('\n'), id: this.id };
      this.event = '';
      this.data = [];
      return m;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    return undefined;
  }
}
