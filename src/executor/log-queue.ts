// A LogReader fed by pushes: the memory runtime's log reads and follows (and tests' fakes). The
// writer pushes lines and ends the queue (with an error or not); the reader iterates, waiting
// for lines while the queue is open. Bounded: past `linesMax` unread lines the oldest are
// dropped, so a reader that stops reading cannot make the writer hold its whole history.

import type { RuntimeError, LogLine, LogReader } from './runtime.ts';

export class LogQueue implements LogReader {
  private lines: LogLine[] = [];
  private ended = false;
  private closed = false;
  private failure: RuntimeError | null = null;
  private wake: (() => void) | null = null;
  private droppedCount = 0;

  /** `onClose` runs once, when the reader closes or the queue ends (to unsubscribe the writer). */
  constructor(private readonly linesMax: number, private readonly onClose: () => void = () => undefined) {
    if (!(Number.isInteger(linesMax) && linesMax > 0)) throw new RangeError('LogQueue needs a positive linesMax');
  }

  /** Lines dropped because the reader fell more than linesMax behind. */
  get dropped(): number {
    return this.droppedCount;
  }

  push(line: LogLine): void {
    if (this.ended) return;
    this.lines.push(line);
    if (this.lines.length > this.linesMax) {
      this.lines.shift();
      this.droppedCount++;
    }
    this.notify();
  }

  /** No more lines: the reader gets those queued, then the end (or `err`). Idempotent. */
  end(err: RuntimeError | null = null): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = err;
    this.onClose();
    this.notify();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.lines = [];
    this.end();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<LogLine, void, undefined> {
    try {
      for (;;) {
        const line = this.lines.shift();
        if (line !== undefined) {
          yield line;
          continue;
        }
        if (this.ended) {
          if (this.failure !== null && !this.closed) throw this.failure;
          return;
        }
        await new Promise<void>((resolve) => { this.wake = resolve; });
      }
    } finally {
      this.close();
    }
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}
