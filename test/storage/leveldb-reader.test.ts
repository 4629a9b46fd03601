// The TypeScript LevelDB reader against directories LevelDB itself wrote (classic-level, with
// and without Snappy: test/fixtures/leveldb/make-fixtures.ts), and against damage done to them.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LevelDbError, readLevelDb, readLogRecords } from '../../src/storage/leveldb-reader.ts';
import { crc32c, maskCrc } from '../../src/storage/crc32c.ts';
import { SnappyError, snappyUncompress } from '../../src/storage/snappy.ts';
import { tempDir } from './helpers.ts';

const fixture = new URL('../fixtures/leveldb/tables.tar.gz', import.meta.url).pathname;

async function unpacked(): Promise<string> {
  const dir = await tempDir();
  execFileSync('tar', ['xzf', fixture, '-C', dir]);
  return dir;
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const key = (s: string): string => Buffer.from(s).toString('latin1');

/** The live keys in LevelDB's order, as in expected.json: [hex key, sha256 of the value]. */
function listing(entries: Map<string, Buffer>): [string, string][] {
  return [...entries].map(([k, v]) => [Buffer.from(k, 'latin1'), v] as const).sort((a, b) => Buffer.compare(a[0], b[0]))
    .map(([k, v]) => [k.toString('hex'), sha(v)]);
}

async function failure(p: Promise<unknown>): Promise<LevelDbError> {
  const err: unknown = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(LevelDbError);
  return err as LevelDbError;
}

describe('readLevelDb, on directories LevelDB wrote', () => {
  it('reads every live key and value as LevelDB\'s own iterator did, with Snappy tables and plain ones', async () => {
    const dir = await unpacked();
    const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as Record<string, [string, string][]>;
    const snappy = await readLevelDb(join(dir, 'snappy'));
    const plain = await readLevelDb(join(dir, 'plain'));
    expect(listing(snappy.entries)).toEqual(expected.snappy);
    expect(listing(plain.entries)).toEqual(expected.plain);
    expect(snappy.torn).toEqual([]);
    // Every kind of block and record was read: compressed and raw table blocks, whole log
    // records and a value (100,000 bytes) fragmented over 32 KiB blocks, deletions.
    expect(snappy.stats).toMatchObject({ rawBlocks: 0, logs: 2 });
    expect(snappy.stats.snappyBlocks).toBeGreaterThan(10);
    expect(plain.stats.rawBlocks).toBeGreaterThan(10);
    expect(plain.stats.tables).toBe(2);
    for (const t of ['full', 'first', 'middle', 'last'] as const) expect(snappy.stats[t]).toBeGreaterThan(0);
    expect(snappy.stats.deletions).toBeGreaterThan(0);
    expect(plain.stats.deletions).toBeGreaterThan(0);
    expect(snappy.entries.get(key('big'))).toEqual(Buffer.alloc(100_000, 'x'));
    expect(snappy.entries.get(key('binary\u0000key'))).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(snappy.entries.get(key('empty'))).toEqual(Buffer.alloc(0));
  });

  it('takes the newest value of a key written in a table and again in the log, and honours deletions of either', async () => {
    const dir = await unpacked();
    const { entries } = await readLevelDb(join(dir, 'snappy'));
    // k0001 was written three times into the tables, then overwritten in the log.
    expect(entries.get(key('k0001'))?.toString()).toBe('overwritten 1');
    expect(entries.get(key('k0002'))?.toString()).toMatch(/^value 2 of round 2 /);
    // k0000 and k0009 were in the tables, then deleted in the log.
    expect(entries.has(key('k0000'))).toBe(false);
    expect(entries.has(key('k0009'))).toBe(false);
    expect(entries.has(key('k0008'))).toBe(true);
  });

  it('ignores a record cut short at the end of the newest log, as LevelDB does, and says so', async () => {
    const dir = await unpacked();
    const log = join(dir, 'snappy', '000006.log');
    await truncate(log, (await readFile(log)).length - 1);
    const read = await readLevelDb(join(dir, 'snappy'));
    expect(read.torn).toHaveLength(1);
    expect(read.torn[0]).toMatch(/000006\.log: a record of \d+ bytes at byte \d+ runs past the end of the file/);
    expect(read.entries.has(key('empty'))).toBe(false); // the cut batch
    expect(read.entries.get(key('binary\u0000key'))).toEqual(Buffer.from([0, 1, 2, 255])); // the one before it
  });

  it('refuses a log record whose checksum does not match', async () => {
    const dir = await unpacked();
    const log = join(dir, 'snappy', '000006.log');
    const b = await readFile(log);
    b.writeUInt8(b.readUInt8(0x16) ^ 0x01, 0x16); // inside the first record's key
    await writeFile(log, b);
    const err = await failure(readLevelDb(join(dir, 'snappy')));
    expect(err.file).toBe(log);
    expect(err.detail).toMatch(/checksum mismatch in the record at byte 0 \(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)/);
  });

  it('refuses a table block whose checksum does not match', async () => {
    const dir = await unpacked();
    const table = join(dir, 'plain', '000005.ldb');
    const b = await readFile(table);
    b.writeUInt8(b.readUInt8(100) ^ 0x40, 100);
    await writeFile(table, b);
    const err = await failure(readLevelDb(join(dir, 'plain')));
    expect(err.file).toBe(table);
    expect(err.detail).toMatch(/checksum mismatch in the block at byte 0/);
  });

  it('refuses a table the MANIFEST lists but the directory lacks, and a CURRENT that names no MANIFEST', async () => {
    const dir = await unpacked();
    execFileSync('rm', [join(dir, 'plain', '000005.ldb')]);
    expect((await failure(readLevelDb(join(dir, 'plain')))).detail).toMatch(/table 5 is live in the MANIFEST but missing/);
    await writeFile(join(dir, 'snappy', 'CURRENT'), 'garbage');
    expect((await failure(readLevelDb(join(dir, 'snappy')))).detail).toMatch(/does not name a MANIFEST/);
  });
});

describe('readLogRecords', () => {
  /** One physical record: masked crc32c(type + data), u16le length, type, data. */
  const physical = (type: number, data: Buffer): Buffer => {
    const h = Buffer.alloc(7);
    h.writeUInt16LE(data.length, 4);
    h.writeUInt8(type, 6);
    h.writeUInt32LE(maskCrc(crc32c(data, crc32c(Buffer.from([type])))), 0);
    return Buffer.concat([h, data]);
  };

  it('joins FIRST, MIDDLE and LAST fragments, skips a block trailer and zeroed space', () => {
    const first = physical(2, Buffer.from('ab'));
    const log = Buffer.concat([physical(1, Buffer.from('whole')), first, physical(3, Buffer.from('cd')), physical(4, Buffer.from('ef'))]);
    // Zeros to the end of the block: a zero header (space never written) and then a trailer
    // shorter than a header.
    const trailer = Buffer.alloc(32768 - log.length);
    const next = physical(1, Buffer.from('next block'));
    const read = readLogRecords('x.log', Buffer.concat([log, trailer, next]));
    expect(read.records.map((r) => r.toString())).toEqual(['whole', 'abcdef', 'next block']);
    expect(read.torn).toBeUndefined();
  });

  it('skips a block trailer too short for a header', () => {
    const filling = physical(1, Buffer.alloc(32768 - 7 - 3, 'f')); // leaves 3 bytes in the block
    const read = readLogRecords('x.log', Buffer.concat([filling, Buffer.alloc(3), physical(1, Buffer.from('after'))]));
    expect(read.records.map((r) => r.length)).toEqual([32758, 5]);
    expect(read.records[1]?.toString()).toBe('after');
  });

  it('reports a fragmented record without its last fragment at the end as torn, and refuses one in the middle', () => {
    const torn = readLogRecords('x.log', Buffer.concat([physical(1, Buffer.from('a')), physical(2, Buffer.from('b'))]));
    expect(torn.records.map((r) => r.toString())).toEqual(['a']);
    expect(torn.torn).toMatch(/without its last fragment/);
    expect(() => readLogRecords('x.log', Buffer.concat([physical(2, Buffer.from('b')), physical(1, Buffer.from('a'))]))).toThrow(/a whole record inside a fragmented one/);
    expect(() => readLogRecords('x.log', physical(4, Buffer.from('b')))).toThrow(/continuation fragment without its first/);
    expect(() => readLogRecords('x.log', physical(7, Buffer.from('b')))).toThrow(/unknown record type 7/);
  });
});

describe('snappyUncompress', () => {
  it('decodes literals (short and long) and copies with 1-, 2- and 4-byte offsets, overlapping ones too', () => {
    const long = Buffer.alloc(70, 'L');
    const block = Buffer.concat([
      Buffer.from([3 + 6 + 70 + 4 + 5]), // the uncompressed length: 88
      Buffer.from([(3 - 1) << 2]), Buffer.from('abc'), // literal of 3
      Buffer.from([((6 - 4) << 2) | 1, 3]), // copy 6 from 3 back: abcabc (overlapping)
      Buffer.from([60 << 2, 70 - 1]), long, // literal of 70, its length in one more byte
      Buffer.from([((4 - 1) << 2) | 2, 79, 0]), // copy 4 from 79 back (2-byte offset): abca
      Buffer.from([((5 - 1) << 2) | 3, 5, 0, 0, 0]), // copy 5 from 5 back (4-byte offset)
    ]);
    expect(snappyUncompress(block).toString()).toBe(`abcabcabc${'L'.repeat(70)}abcaLabca`);
  });

  it('refuses a copy from before the start, and a length that does not match', () => {
    expect(() => snappyUncompress(Buffer.from([4, ((4 - 4) << 2) | 1, 1]))).toThrow(SnappyError);
    expect(() => snappyUncompress(Buffer.from([5, 0, 0x61]))).toThrow(/decodes to 1 bytes, its header says 5/);
  });
});
