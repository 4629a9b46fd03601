// A reader of LevelDB directories, in TypeScript, to move the keys a data directory of an older
// release kept in LevelDB (classic-level) into the files that replaced it (migrate.ts). It reads
// what LevelDB's own recovery reads, and nothing is written:
//
//   CURRENT               the name of the live MANIFEST
//   MANIFEST-<n>          a log (below) of version edits: the comparator, the live table files
//                         (added and deleted per level), the number of the oldest live log
//   <n>.ldb / <n>.sst     sorted tables: data blocks of internal keys (user key + 8 bytes of
//                         sequence number << 8 | type), an index block, a footer; each block
//                         with a type (0 raw, 1 Snappy) and a masked CRC-32C
//   <n>.log               the write-ahead log of batches not yet in a table: 32 KiB blocks of
//                         records (FULL, or FIRST, MIDDLE..., LAST across blocks), each with a
//                         masked CRC-32C; a batch is a sequence number, a count, and puts and
//                         deletions
//
// Every record and block is checked (LevelDB checks table blocks only on request); the value of
// a key is the one of its highest sequence number, across tables and logs, and a deletion of the
// highest sequence number removes it. A log's unfinished last record (a write a crash cut short,
// never acknowledged) is ignored, as LevelDB ignores it; any other damage is a LevelDbError.
// Format reference: github.com/google/leveldb doc/log_format.md, doc/table_format.md.

import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32c, maskCrc } from './crc32c.ts';
import { SnappyError, snappyUncompress } from './snappy.ts';

/** A LevelDB file failed a check, or the directory is not one LevelDB could have written. */
export class LevelDbError extends Error {
  constructor(readonly file: string, readonly detail: string, options?: { cause?: unknown }) {
    super(`${file}: ${detail}`, options);
    this.name = 'LevelDbError';
  }
}

export interface LevelDbContents {
  /** Every live key (its bytes as a latin1 string) and its value. */
  entries: Map<string, Buffer>;
  /** The logs' unfinished last records that were ignored, in words (empty if none). */
  torn: string[];
  /** What was read: files, and blocks and records by type (for the log line and the tests). */
  stats: LevelDbStats;
}

export interface LevelDbStats {
  tables: number;
  logs: number;
  /** Table blocks stored raw and Snappy-compressed. */
  rawBlocks: number;
  snappyBlocks: number;
  /** Log records (of the logs, not the MANIFEST) by type. */
  full: number;
  first: number;
  middle: number;
  last: number;
  /** Deletions read, in tables and logs. */
  deletions: number;
}

const newStats = (): LevelDbStats => ({ tables: 0, logs: 0, rawBlocks: 0, snappyBlocks: 0, full: 0, first: 0, middle: 0, last: 0, deletions: 0 });

/** Reads the whole database in `dir`; throws LevelDbError on damage. */
export async function readLevelDb(dir: string): Promise<LevelDbContents> {
  const currentFile = join(dir, 'CURRENT');
  const current = await readOrFail(currentFile);
  const name = current.toString('latin1');
  if (!/^MANIFEST-\d+\n$/.test(name)) throw new LevelDbError(currentFile, `does not name a MANIFEST (${JSON.stringify(name.slice(0, 40))})`);
  const manifestFile = join(dir, name.trim());
  const manifest = decodeManifest(manifestFile, await readOrFail(manifestFile));
  const merged = new Map<string, { seq: number; value: Buffer | undefined }>();
  const stats = newStats();
  const apply = (key: Buffer, seq: number, value: Buffer | undefined): void => {
    if (value === undefined) stats.deletions++;
    const k = key.toString('latin1');
    const had = merged.get(k);
    if (had === undefined || had.seq < seq) merged.set(k, { seq, value });
  };
  const names = await readdir(dir);
  for (const number of [...manifest.tables.keys()].sort((a, b) => a - b)) {
    const file = tableFile(dir, number, names);
    readTable(file, await readOrFail(file), apply, stats);
    stats.tables++;
  }
  const torn: string[] = [];
  const logs = names.map((n) => /^(\d+)\.log$/.exec(n)).filter((m) => m !== null)
    .map((m) => Number(m[1])).filter((n) => n >= manifest.logNumber || n === manifest.prevLogNumber).sort((a, b) => a - b);
  for (const number of logs) {
    const file = join(dir, `${String(number).padStart(6, '0')}.log`);
    const read = readLogRecords(file, await readOrFail(file), stats);
    stats.logs++;
    if (read.torn !== undefined) torn.push(`${file}: ${read.torn}`);
    for (const record of read.records) decodeBatch(file, record, apply);
  }
  const entries = new Map<string, Buffer>();
  for (const [k, { value }] of merged) if (value !== undefined) entries.set(k, value);
  return { entries, torn, stats };
}

async function readOrFail(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new LevelDbError(file, `cannot be read: ${(err as Error).message}`, { cause: err });
  }
}

function tableFile(dir: string, number: number, names: string[]): string {
  const base = String(number).padStart(6, '0');
  for (const ext of ['ldb', 'sst']) if (names.includes(`${base}.${ext}`)) return join(dir, `${base}.${ext}`);
  const file = join(dir, `${base}.ldb`);
  if (existsSync(file)) return file;
  throw new LevelDbError(file, `table ${number} is live in the MANIFEST but missing (neither ${base}.ldb nor ${base}.sst exists)`);
}

// ---- the log format (also the MANIFEST's) -------------------------------------------------

const logBlockBytes = 32768;
const logHeaderBytes = 7;
const recordTypes = { zero: 0, full: 1, first: 2, middle: 3, last: 4 } as const;

/** The logical records of a log file; a record cut short at the very end is reported, not returned. */
export function readLogRecords(file: string, buf: Buffer, stats = newStats()): { records: Buffer[]; torn?: string } {
  const records: Buffer[] = [];
  let pending: Buffer[] | undefined;
  let pos = 0;
  let torn: string | undefined;
  while (pos < buf.length) {
    const left = logBlockBytes - (pos % logBlockBytes);
    if (left < logHeaderBytes) {
      pos += left; // a block's trailer, too short for a header: zeros
      continue;
    }
    if (buf.length - pos < logHeaderBytes) {
      torn = `a record header cut short at byte ${pos}`;
      break;
    }
    const length = buf.readUInt16LE(pos + 4);
    const type = buf.readUInt8(pos + 6);
    if (type === recordTypes.zero && length === 0) {
      pos += left; // space a writer reserved and never used: the rest of the block is empty
      continue;
    }
    if (pos + logHeaderBytes + length > buf.length) {
      torn = `a record of ${length} bytes at byte ${pos} runs past the end of the file`;
      break;
    }
    if (logHeaderBytes + length > left) throw new LevelDbError(file, `the record at byte ${pos} (${length} bytes) runs past the end of its block`);
    const data = buf.subarray(pos + logHeaderBytes, pos + logHeaderBytes + length);
    const stored = buf.readUInt32LE(pos);
    const actual = maskCrc(crc32c(data, crc32c(buf.subarray(pos + 6, pos + 7))));
    if (stored !== actual) throw new LevelDbError(file, `checksum mismatch in the record at byte ${pos} (stored ${hex(stored)}, computed ${hex(actual)})`);
    const problem = (what: string): LevelDbError => new LevelDbError(file, `${what} at byte ${pos}`);
    if (type === recordTypes.full) stats.full++;
    else if (type === recordTypes.first) stats.first++;
    else if (type === recordTypes.middle) stats.middle++;
    else if (type === recordTypes.last) stats.last++;
    if (type === recordTypes.full) {
      if (pending !== undefined) throw problem('a whole record inside a fragmented one');
      records.push(data);
    } else if (type === recordTypes.first) {
      if (pending !== undefined) throw problem('a first fragment inside a fragmented record');
      pending = [data];
    } else if (type === recordTypes.middle || type === recordTypes.last) {
      if (pending === undefined) throw problem('a continuation fragment without its first');
      pending.push(data);
      if (type === recordTypes.last) {
        records.push(Buffer.concat(pending));
        pending = undefined;
      }
    } else {
      throw problem(`an unknown record type ${type}`);
    }
    pos += logHeaderBytes + length;
  }
  if (pending !== undefined && torn === undefined) torn = 'a fragmented record without its last fragment at the end of the file';
  return { records, ...(torn !== undefined ? { torn } : {}) };
}

/** A write batch: u64le sequence, u32le count, then count puts (1, key, value) and deletions (0, key). */
function decodeBatch(file: string, rec: Buffer, apply: (key: Buffer, seq: number, value: Buffer | undefined) => void): void {
  if (rec.length < 12) throw new LevelDbError(file, `a write batch of ${rec.length} bytes is shorter than its header`);
  const seq = Number(rec.readBigUInt64LE(0));
  const count = rec.readUInt32LE(8);
  const r = new Cursor(file, rec, 12, 'a write batch');
  for (let i = 0; i < count; i++) {
    const tag = r.byte();
    if (tag === 1) apply(r.slice(), seq + i, r.slice());
    else if (tag === 0) apply(r.slice(), seq + i, undefined);
    else throw new LevelDbError(file, `a write batch holds an operation of unknown type ${tag}`);
  }
  if (!r.done()) throw new LevelDbError(file, `a write batch at sequence ${seq} has ${rec.length - r.pos} bytes after its ${count} operations`);
}

// ---- the MANIFEST ---------------------------------------------------------------------------

interface Manifest {
  /** Live table files: number to level. */
  tables: Map<number, number>;
  logNumber: number;
  prevLogNumber: number;
}

function decodeManifest(file: string, buf: Buffer): Manifest {
  const read = readLogRecords(file, buf);
  const m: Manifest = { tables: new Map(), logNumber: 0, prevLogNumber: 0 };
  if (read.records.length === 0) throw new LevelDbError(file, 'the MANIFEST holds no version edit');
  for (const rec of read.records) {
    const r = new Cursor(file, rec, 0, 'a version edit');
    while (!r.done()) {
      const tag = r.varint();
      switch (tag) {
        case 1: {
          const comparator = r.slice().toString('latin1');
          if (comparator !== 'leveldb.BytewiseComparator') throw new LevelDbError(file, `the database sorts its keys with ${comparator}, not the bytewise comparator shoal used`);
          break;
        }
        case 2: m.logNumber = r.varint(); break;
        case 3: case 4: r.varint(); break; // next file number, last sequence
        case 5: r.varint(); r.slice(); break; // compaction pointer
        case 6: r.varint(); m.tables.delete(r.varint()); break;
        case 7: {
          const level = r.varint();
          const number = r.varint();
          r.varint(); r.slice(); r.slice(); // size, smallest and largest key
          m.tables.set(number, level);
          break;
        }
        case 9: m.prevLogNumber = r.varint(); break;
        default: throw new LevelDbError(file, `a version edit holds an unknown field ${tag}`);
      }
    }
  }
  return m;
}

// ---- tables ---------------------------------------------------------------------------------

const footerBytes = 48;
const tableMagic = 0xdb4775248b80fb57n;
const blockTrailerBytes = 5;

interface BlockHandle {
  offset: number;
  size: number;
}

function readTable(file: string, buf: Buffer, apply: (key: Buffer, seq: number, value: Buffer | undefined) => void, stats: LevelDbStats): void {
  if (buf.length < footerBytes) throw new LevelDbError(file, `the table is ${buf.length} bytes, shorter than its footer`);
  const footer = buf.subarray(buf.length - footerBytes);
  if (footer.readBigUInt64LE(40) !== tableMagic) throw new LevelDbError(file, 'the table does not end with the table magic number (truncated?)');
  const f = new Cursor(file, footer, 0, 'the table footer');
  handle(f); // the metaindex block (the filter): not needed to read every key
  const index = readBlock(file, buf, handle(f), stats);
  for (const [, value] of blockEntries(file, index)) {
    const h = handle(new Cursor(file, value, 0, 'an index entry'));
    for (const [ikey, v] of blockEntries(file, readBlock(file, buf, h, stats))) {
      if (ikey.length < 8) throw new LevelDbError(file, `a key of ${ikey.length} bytes is shorter than its sequence number`);
      const tag = ikey.readBigUInt64LE(ikey.length - 8);
      const type = Number(tag & 0xffn);
      if (type !== 0 && type !== 1) throw new LevelDbError(file, `a key has an unknown type ${type}`);
      apply(ikey.subarray(0, ikey.length - 8), Number(tag >> 8n), type === 1 ? v : undefined);
    }
  }
}

function handle(r: Cursor): BlockHandle {
  return { offset: r.varint(), size: r.varint() };
}

function readBlock(file: string, buf: Buffer, h: BlockHandle, stats: LevelDbStats): Buffer {
  if (h.offset + h.size + blockTrailerBytes > buf.length) {
    throw new LevelDbError(file, `a block at byte ${h.offset} (${h.size} bytes) runs past the end of the table`);
  }
  const data = buf.subarray(h.offset, h.offset + h.size);
  const type = buf.readUInt8(h.offset + h.size);
  const stored = buf.readUInt32LE(h.offset + h.size + 1);
  const actual = maskCrc(crc32c(buf.subarray(h.offset, h.offset + h.size + 1)));
  if (stored !== actual) throw new LevelDbError(file, `checksum mismatch in the block at byte ${h.offset} (stored ${hex(stored)}, computed ${hex(actual)})`);
  if (type === 0) {
    stats.rawBlocks++;
    return data;
  }
  if (type === 1) {
    stats.snappyBlocks++;
    try {
      return snappyUncompress(data);
    } catch (err) {
      if (err instanceof SnappyError) throw new LevelDbError(file, `the Snappy block at byte ${h.offset} does not decompress: ${err.message}`, { cause: err });
      throw err;
    }
  }
  throw new LevelDbError(file, `the block at byte ${h.offset} has an unknown compression type ${type}`);
}

/** A block's key/value entries, keys rebuilt from their shared prefixes (restart points are not needed to read it all). */
function blockEntries(file: string, block: Buffer): [Buffer, Buffer][] {
  if (block.length < 4) throw new LevelDbError(file, `a block of ${block.length} bytes has no restart count`);
  const restarts = block.readUInt32LE(block.length - 4);
  const end = block.length - 4 - 4 * restarts;
  if (restarts === 0 || end < 0) throw new LevelDbError(file, `a block of ${block.length} bytes claims ${restarts} restart points`);
  const r = new Cursor(file, block.subarray(0, end), 0, 'a block entry');
  const out: [Buffer, Buffer][] = [];
  let key = Buffer.alloc(0);
  while (!r.done()) {
    const shared = r.varint();
    const unshared = r.varint();
    const valueBytes = r.varint();
    if (shared > key.length) throw new LevelDbError(file, `a block entry shares ${shared} bytes with a ${key.length}-byte key`);
    key = Buffer.concat([key.subarray(0, shared), r.bytes(unshared)]);
    out.push([key, r.bytes(valueBytes)]);
  }
  return out;
}

// ---- bytes ----------------------------------------------------------------------------------

class Cursor {
  constructor(private readonly file: string, private readonly buf: Buffer, public pos: number, private readonly what: string) {}

  done(): boolean {
    return this.pos >= this.buf.length;
  }

  byte(): number {
    if (this.pos >= this.buf.length) throw this.short();
    return this.buf.readUInt8(this.pos++);
  }

  /** A varint of up to 64 bits, as a number (exact up to 2^53, beyond any count or offset here). */
  varint(): number {
    let value = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const b = this.byte();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    throw new LevelDbError(this.file, `${this.what} holds a varint longer than 64 bits`);
  }

  bytes(n: number): Buffer {
    if (this.pos + n > this.buf.length) throw this.short();
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** A length-prefixed byte string. */
  slice(): Buffer {
    return this.bytes(this.varint());
  }

  private short(): LevelDbError {
    return new LevelDbError(this.file, `${this.what} ends early (at byte ${this.pos} of ${this.buf.length})`);
  }
}

const hex = (n: number): string => `0x${n.toString(16).padStart(8, '0')}`;
