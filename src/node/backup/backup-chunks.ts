// A backup's large files (the volume streams) encrypted as they flow, in fixed-size chunks, so a
// backup or a restore of a volume holds a chunk or two in memory whatever the volume's size (issue
// 43; the format is described at the top of backup-format.ts).
//
// The `chunked` encoding: the plaintext cut into chunks of chunkPlainBytes (the last one shorter,
// possibly empty: an empty file is one empty final chunk), each stored as
// IV (12 random bytes) | ciphertext | tag (16 bytes), AES-256-GCM under the backup's data key with
// the associated data `shoal backup ID/FILE chunk INDEX final|more`. A reader knows a record ends
// where the next begins (every record but the last is exactly chunkRecordBytes long), and that the
// last one is final only from the stored bytes ending there: so a file cut at a chunk boundary
// ends on a chunk sealed as `more` and is refused, a chunk moved elsewhere opens under no other
// index, and a file moved to another name or backup opens nowhere.
//
// The `whole` encoding (formats 1 and 2, and every small file): IV | ciphertext | tag over the
// whole file. WholeOpener reads it as it flows too (GCM decrypts as it goes and checks the tag at
// the end): what it hands out before the end is unauthenticated, so a caller that acts on the
// plaintext (a restore) checks the whole file once (verify pass) before it acts.
//
// Both sides are push-style (push(bytes) → output, end() → the rest) so the same object serves a
// stream pipeline and a verify pass that taps the bytes it hashes.

import { createCipheriv, createDecipheriv, randomBytes, type DecipherGCM } from 'node:crypto';

/** Plaintext bytes per chunk. */
export const chunkPlainBytes = 1024 * 1024;
const ivBytes = 12;
const tagBytes = 16;
/** A full chunk as stored. */
export const chunkRecordBytes = ivBytes + chunkPlainBytes + tagBytes;

const chunkAad = (id: string, file: string, index: number, final: boolean): Buffer => Buffer.from(`shoal backup ${id}/${file} chunk ${index} ${final ? 'final' : 'more'}`);
const wholeAad = (id: string, file: string): Buffer => Buffer.from(`shoal backup ${id}/${file}`);

/** The stored size of a `chunked` file of `plainBytes` bytes. */
export function chunkedStoredBytes(plainBytes: number): number {
  const chunks = Math.max(1, Math.ceil(plainBytes / chunkPlainBytes));
  return plainBytes + chunks * (ivBytes + tagBytes);
}

/** Pushes and ends; each call returns the bytes it makes ready. */
export interface ByteStep {
  push(bytes: Uint8Array): Buffer[];
  end(): Buffer[];
}

/** Bytes kept in order, with the first `n` taken off cheaply (no copy of what stays). */
class ByteQueue {
  private parts: Buffer[] = [];
  length = 0;

  add(b: Uint8Array): void {
    if (b.length === 0) return;
    this.parts.push(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
    this.length += b.length;
  }

  take(n: number): Buffer {
    const out: Buffer[] = [];
    let need = n;
    while (need > 0) {
      const head = this.parts[0];
      if (head === undefined) break;
      if (head.length <= need) {
        out.push(head);
        this.parts.shift();
        need -= head.length;
      } else {
        out.push(head.subarray(0, need));
        this.parts[0] = head.subarray(need);
        need = 0;
      }
    }
    this.length -= n - need;
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }
}

function sealChunk(key: Buffer, id: string, file: string, index: number, final: boolean, plain: Buffer): Buffer {
  const iv = randomBytes(ivBytes);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(chunkAad(id, file, index, final));
  return Buffer.concat([iv, c.update(plain), c.final(), c.getAuthTag()]);
}

/** Encrypts a file into the `chunked` encoding as it flows. A chunk is sealed only once it is known whether more follows. */
export class ChunkSealer implements ByteStep {
  private readonly queue = new ByteQueue();
  private index = 0;
  private ended = false;
  constructor(private readonly key: Buffer, private readonly id: string, private readonly file: string) {}

  push(bytes: Uint8Array): Buffer[] {
    if (this.ended) throw new Error(`${this.file}: written after its end`);
    this.queue.add(bytes);
    const out: Buffer[] = [];
    // Strictly more than a chunk: the one taken is not the last.
    while (this.queue.length > chunkPlainBytes) out.push(sealChunk(this.key, this.id, this.file, this.index++, false, this.queue.take(chunkPlainBytes)));
    return out;
  }

  end(): Buffer[] {
    if (this.ended) return [];
    this.ended = true;
    return [sealChunk(this.key, this.id, this.file, this.index++, true, this.queue.take(this.queue.length))];
  }
}

/** Decrypts the `chunked` encoding as it flows; throws at the first chunk that does not open (named by index). */
export class ChunkOpener implements ByteStep {
  private readonly queue = new ByteQueue();
  private index = 0;
  private ended = false;
  constructor(private readonly key: Buffer, private readonly id: string, private readonly file: string) {}

  private open(record: Buffer, final: boolean): Buffer {
    if (record.length < ivBytes + tagBytes) throw new Error(`${this.file}: chunk ${this.index} is ${record.length} bytes, shorter than an IV and a tag (the file is cut short)`);
    const d = createDecipheriv('aes-256-gcm', this.key, record.subarray(0, ivBytes));
    d.setAAD(chunkAad(this.id, this.file, this.index, final));
    d.setAuthTag(record.subarray(record.length - tagBytes));
    try {
      const plain = Buffer.concat([d.update(record.subarray(ivBytes, record.length - tagBytes)), d.final()]);
      this.index++;
      return plain;
    } catch {
      throw new Error(`${this.file}: chunk ${this.index} does not open (damaged, moved, cut short, or another key)`);
    }
  }

  push(bytes: Uint8Array): Buffer[] {
    if (this.ended) throw new Error(`${this.file}: read after its end`);
    this.queue.add(bytes);
    const out: Buffer[] = [];
    // A full record is not the last while more bytes follow it.
    while (this.queue.length > chunkRecordBytes) out.push(this.open(this.queue.take(chunkRecordBytes), false));
    return out;
  }

  end(): Buffer[] {
    if (this.ended) return [];
    this.ended = true;
    return [this.open(this.queue.take(this.queue.length), true)];
  }
}

/** Decrypts the `whole` encoding as it flows, holding back the last 16 bytes (the tag, checked at the end). */
export class WholeOpener implements ByteStep {
  private readonly queue = new ByteQueue();
  private decipher: DecipherGCM | undefined;
  private ended = false;
  constructor(private readonly key: Buffer, private readonly id: string, private readonly file: string) {}

  push(bytes: Uint8Array): Buffer[] {
    if (this.ended) throw new Error(`${this.file}: read after its end`);
    this.queue.add(bytes);
    if (this.decipher === undefined) {
      if (this.queue.length < ivBytes) return [];
      this.decipher = createDecipheriv('aes-256-gcm', this.key, this.queue.take(ivBytes));
      this.decipher.setAAD(wholeAad(this.id, this.file));
    }
    if (this.queue.length <= tagBytes) return [];
    return [this.decipher.update(this.queue.take(this.queue.length - tagBytes))];
  }

  end(): Buffer[] {
    if (this.ended) return [];
    this.ended = true;
    const d = this.decipher;
    if (d === undefined || this.queue.length !== tagBytes) throw new Error(`${this.file}: shorter than an IV and a tag`);
    d.setAuthTag(this.queue.take(tagBytes));
    try {
      return [d.final()];
    } catch {
      throw new Error(`${this.file}: does not open (damaged, moved, or another key)`);
    }
  }
}

/** A step that passes bytes as they are (an unencrypted backup). */
export const passThrough = (): ByteStep => ({ push: (b) => [Buffer.from(b.buffer, b.byteOffset, b.byteLength)], end: () => [] });

/** `source` through `step`, as an async iterable (a failure of either ends it with that error). */
export async function* through(source: AsyncIterable<Uint8Array>, step: ByteStep): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    for (const out of step.push(chunk)) if (out.length > 0) yield out;
  }
  for (const out of step.end()) if (out.length > 0) yield out;
}
