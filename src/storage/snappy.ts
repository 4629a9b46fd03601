// Snappy decompression (the raw block format, github.com/google/snappy format_description.txt),
// for the LevelDB tables that leveldb-reader.ts reads once, to move an old data directory. Only
// decompression: shoal writes no Snappy. Written here rather than taken from npm because it is
// forty lines read a handful of times in a node's life, and checked against tables LevelDB
// compressed itself (test/fixtures/leveldb/tables.tar.gz).

export class SnappyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnappyError';
  }
}

/** The bytes `input` compresses; throws SnappyError if it is not a well-formed Snappy block. */
export function snappyUncompress(input: Uint8Array): Buffer {
  const src = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  let pos = 0;
  const byte = (): number => {
    if (pos >= src.length) throw new SnappyError(`block ends inside an element at byte ${pos}`);
    return src.readUInt8(pos++);
  };
  let length = 0;
  for (let shift = 0; ; shift += 7) {
    if (shift > 28) throw new SnappyError('the uncompressed length is not a varint32');
    const b = byte();
    length += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) break;
  }
  const out = Buffer.alloc(length);
  let o = 0;
  while (pos < src.length) {
    const tag = byte();
    const kind = tag & 3;
    if (kind === 0) {
      let len = tag >>> 2;
      if (len >= 60) {
        const bytes = len - 59;
        len = 0;
        for (let i = 0; i < bytes; i++) len += byte() * 2 ** (8 * i);
      }
      len += 1;
      if (pos + len > src.length) throw new SnappyError(`a literal of ${len} bytes runs past the end of the block`);
      if (o + len > length) throw new SnappyError(`a literal overruns the stated length ${length}`);
      src.copy(out, o, pos, pos + len);
      pos += len;
      o += len;
      continue;
    }
    let len: number;
    let offset: number;
    if (kind === 1) {
      len = ((tag >>> 2) & 7) + 4;
      offset = ((tag >>> 5) << 8) | byte();
    } else if (kind === 2) {
      len = (tag >>> 2) + 1;
      offset = byte() | (byte() << 8);
    } else {
      len = (tag >>> 2) + 1;
      offset = (byte() | (byte() << 8) | (byte() << 16)) + byte() * 2 ** 24;
    }
    if (offset === 0 || offset > o) throw new SnappyError(`a copy at output byte ${o} refers ${offset} bytes back`);
    if (o + len > length) throw new SnappyError(`a copy overruns the stated length ${length}`);
    // Byte by byte: a copy may overlap the bytes it writes (a run).
    for (let i = 0; i < len; i++, o++) out.writeUInt8(out.readUInt8(o - offset), o);
  }
  if (o !== length) throw new SnappyError(`the block decodes to ${o} bytes, its header says ${length}`);
  return out;
}
