// A FIFO of encoded frames bounded both in count and in bytes: a peer that is down or slow
// costs at most `messagesMax` frames and `bytesMax` bytes of memory.

export class SendQueue {
  private items: Uint8Array[] = [];
  private head = 0;
  private bytesQueued = 0;

  constructor(
    private readonly messagesMax: number,
    private readonly bytesMax: number,
  ) {}

  get length(): number {
    return this.items.length - this.head;
  }

  get bytes(): number {
    return this.bytesQueued;
  }

  /** Appends the frame, or returns false (and keeps nothing) when either bound would be passed. */
  push(frame: Uint8Array): boolean {
    if (this.length + 1 > this.messagesMax || this.bytesQueued + frame.byteLength > this.bytesMax) return false;
    this.items.push(frame);
    this.bytesQueued += frame.byteLength;
    return true;
  }

  /** The frame `shift` would return, left in place. */
  peek(): Uint8Array | undefined {
    return this.head < this.items.length ? this.items[this.head] : undefined;
  }

  shift(): Uint8Array | undefined {
    if (this.head >= this.items.length) return undefined;
    const frame = this.items[this.head];
    this.items[this.head] = EMPTY;
    this.head++;
    // Compact once the consumed prefix dominates, so shift stays O(1) amortized.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    if (frame === undefined) return undefined;
    this.bytesQueued -= frame.byteLength;
    return frame;
  }

  /** Empties the queue; returns how many frames were discarded. */
  clear(): number {
    const n = this.length;
    this.items = [];
    this.head = 0;
    this.bytesQueued = 0;
    return n;
  }
}

const EMPTY = new Uint8Array(0);
