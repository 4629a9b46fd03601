// Reading write-ahead log frames: a record, the clean end, a write a crash cut short (torn, cut
// off at open) or damage (refused). In a segment of version 1, torn means incomplete, or
// stopping at a sector boundary with only zeros after it; in a preallocated one (version 2), a
// record with a sector of zeros. A checksum failure with data to the record's end is damage,
// even in the last record.

import { describe, expect, it } from 'vitest';
import { decodeRecord, encodeRecord, readFrame, readHeader, segmentHeader, type WalRecord } from '../../src/storage/wal-record.ts';
import { packr } from '../../src/storage/sealed.ts';
import { run } from './helpers.ts';

/** A segment: header, then the frames, starting at byte 16. */
function segment(...records: WalRecord[]): Buffer {
  return Buffer.concat([segmentHeader(), ...records.map(encodeRecord)]);
}

const big: WalRecord = { type: 'save', entries: run(1, 40, 3), hardState: { term: 3, vote: 'a', commit: 2 } };
const small: WalRecord = { type: 'compact', truncated: { index: 2, term: 3 } };

describe('write-ahead log frames', () => {
  it('reads back what was written, record by record, then the end', () => {
    const seg = segment(big, small);
    const first = readFrame(seg, 16);
    expect(first.kind).toBe('record');
    if (first.kind !== 'record') return;
    const back = decodeRecord(first.body);
    expect(back).toMatchObject({ type: 'save', hardState: big.type === 'save' ? big.hardState : undefined });
    expect(back.type === 'save' && back.entries.map((e) => e.index)).toEqual(run(1, 40, 3).map((e) => e.index));
    const second = readFrame(seg, first.end);
    expect(second.kind === 'record' && decodeRecord(second.body)).toEqual(small);
    expect(second.kind === 'record' && readFrame(seg, second.end)).toEqual({ kind: 'end' });
  });

  it('an incomplete last record is torn, wherever it was cut', () => {
    const seg = segment(big);
    for (const cut of [seg.length - 1, seg.length - 100, 16 + 9, 16 + 3]) {
      expect(readFrame(seg.subarray(0, cut), 16).kind, `cut at ${cut}`).toBe('torn');
    }
  });

  it('a last record whose sectors from some boundary on are zeros is torn: the file grew, the data never landed', () => {
    const seg = segment(big);
    expect(seg.length).toBeGreaterThan(1024);
    const zeroed = Buffer.from(seg);
    zeroed.fill(0, 1024);
    expect(readFrame(zeroed, 16)).toMatchObject({ kind: 'torn', detail: expect.stringMatching(/fails its checksum/) });
    const allZero = Buffer.from(seg);
    allZero.fill(0, 16);
    expect(readFrame(allZero, 16)).toMatchObject({ kind: 'torn', detail: expect.stringMatching(/length of 0 bytes/) });
  });

  it('a flipped byte is damage, in the last record as anywhere else', () => {
    const seg = Buffer.from(segment(big));
    seg[seg.length - 3] = (seg[seg.length - 3] as number) ^ 0x40;
    expect(readFrame(seg, 16)).toMatchObject({ kind: 'bad', detail: expect.stringMatching(/fails its checksum/) });
    const zerosInside = Buffer.from(segment(big));
    zerosInside.fill(0, 600, 1100); // zeros, but whole data after them: not a write that stopped
    expect(readFrame(zerosInside, 16).kind).toBe('bad');
  });

  it('a zero length followed by data is damage, not an end', () => {
    const seg = Buffer.from(segment(small, big));
    seg.fill(0, 16, 20);
    expect(readFrame(seg, 16)).toMatchObject({ kind: 'bad', detail: expect.stringMatching(/length of 0 bytes/) });
  });

  describe('in a preallocated segment (version 2), the records end where the zeros begin', () => {
    /** A segment of version 2: header, the frames, then zeros up to `length`. */
    function preallocated(length: number, ...records: WalRecord[]): Buffer {
      const out = Buffer.alloc(length);
      Buffer.concat([segmentHeader(2), ...records.map(encodeRecord)]).copy(out);
      return out;
    }

    it('reads the records, then the zeros are the clean end, even straight after the header', () => {
      const seg = preallocated(8192, big, small);
      const first = readFrame(seg, 16, 2);
      const second = first.kind === 'record' ? readFrame(seg, first.end, 2) : first;
      expect(second.kind === 'record' && decodeRecord(second.body)).toEqual(small);
      expect(second.kind === 'record' && readFrame(seg, second.end, 2)).toEqual({ kind: 'end' });
      expect(readFrame(preallocated(4096), 16, 2)).toEqual({ kind: 'end' });
      // A version 1 segment ending the same way was a write that never landed.
      expect(second.kind === 'record' && readFrame(seg, second.end, 1).kind).toBe('torn');
    });

    it('a record with a sector that never reached the disk is torn, whatever landed after it', () => {
      const seg = preallocated(8192, big, small);
      const first = readFrame(seg, 16, 2);
      expect(first.kind === 'record' && first.end).toBeGreaterThan(1024);
      const holed = Buffer.from(seg);
      holed.fill(0, 512, 1024); // the second sector of the first record; the second record is whole
      expect(readFrame(holed, 16, 2)).toMatchObject({ kind: 'torn', detail: expect.stringMatching(/fails its checksum/) });
      // The record's first sector never landed, later ones did: its header reads as zeros.
      const headless = preallocated(8192);
      const at = 1024;
      encodeRecord(big).copy(headless, at);
      headless.fill(0, at, 1536);
      expect(readFrame(headless, at, 2)).toMatchObject({ kind: 'torn', detail: expect.stringMatching(/length of 0 bytes/) });
    });

    it('a flipped byte, or a zero length with data after it in its sector, is damage', () => {
      const seg = preallocated(8192, big);
      const first = readFrame(seg, 16, 2);
      if (first.kind !== 'record') throw new Error('the record did not read');
      const flipped = Buffer.from(seg);
      flipped[first.end - 3] = (flipped[first.end - 3] as number) ^ 0x40;
      expect(readFrame(flipped, 16, 2)).toMatchObject({ kind: 'bad', detail: expect.stringMatching(/fails its checksum/) });
      const zeroLength = Buffer.from(seg);
      zeroLength.fill(0, 16, 20);
      expect(readFrame(zeroLength, 16, 2)).toMatchObject({ kind: 'bad', detail: expect.stringMatching(/length of 0 bytes/) });
    });
  });

  it('refuses a file that is not a segment, or of another version', () => {
    expect(readHeader(Buffer.from('short'))).toEqual({ problem: expect.stringMatching(/shorter than a segment header/) });
    expect(readHeader(Buffer.alloc(16))).toEqual({ problem: expect.stringMatching(/does not start with a write-ahead log header/) });
    const other = segmentHeader();
    other.writeUInt32BE(3, 8);
    expect(readHeader(other)).toEqual({ problem: expect.stringMatching(/segment version 3, this version reads 1 and 2/) });
    expect(readHeader(segmentHeader())).toEqual({ version: 2 });
    expect(readHeader(segmentHeader(1))).toEqual({ version: 1 });
  });

  it('a record that decodes but breaks the schema is refused with what is wrong', () => {
    expect(() => decodeRecord(packr.pack({ type: 'compact', truncated: { index: -1, term: 0 } }))).toThrow(/the record is not valid/);
    expect(() => decodeRecord(packr.pack({ type: 'rename', from: 'a' }))).toThrow(/the record is not valid/);
    expect(() => decodeRecord(packr.pack({ type: 'compact', truncated: { index: 1, term: 1 }, extra: 1 }))).toThrow(/the record is not valid/);
    expect(() => decodeRecord(Buffer.from([0xc1]))).toThrow();
  });
});
