// The write-ahead log's segment files under <data>/wal: reading them back at open, and appending.
//
//   wal/seg-<16-digit sequence>.wal     (framing and records: wal-record.ts)
//
// Appending is one write(2) from the event loop's thread, a few hundred bytes into the page
// cache, and for a synced save one fdatasync on the thread pool. fdatasync covers every earlier
// write to the file, so an unsynced record (a compaction, a Ready that needs no sync) becomes
// durable with the next synced one, and a crash can only lose what was written to the last
// segment after its last sync. That may leave half a record (a torn write): it is cut off at
// open. Damage anywhere else refuses the log.
//
// The segment being written is kept extended with zeros (ftruncate: a sparse file, no data
// written) a few MiB past its last record, so a write lands inside the file and its fdatasync
// flushes only data: a write that grows the file also makes the fdatasync commit the file
// system's journal for the new size. On this VM's ext4 that took the sync of a few hundred bytes
// from 0.24 to 0.16 ms alone and from 0.44 to 0.38 ms with three writers. The first write to a
// block of the hole is journaled too (its allocation), so zeros are also written a 64 KiB chunk
// ahead of the records: a sync allocates a chunk's blocks at once, and the writes of several
// KiB each of 16 or 64 clients then sync as pure data (docs/architecture.md).
//
// A new segment is written under a temporary name with its header and state record, synced and
// renamed into place, after the previous segment was synced; so every segment but the last is
// whole, and a crash while starting one leaves only a temporary file, removed at open.

import fs from 'node:fs';
import { readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { StorageCorruptionError, rebuildNodeRecovery } from './errors.ts';
import type { StoragePaths } from './paths.ts';
import {
  decodeRecord, encodeRecord, nextHead, readFrame, readHeader, segmentHeader, segmentHeaderBytes, type LogHead, type SegmentVersion,
  type WalRecord,
} from './wal-record.ts';
import { syncDirSync } from './sync-dir.ts';
import { LogReplay, ReplayError, type LogState } from './wal-replay.ts';
import type { Entry } from '../raft/types.ts';

const fdatasync = promisify(fs.fdatasync);

const namePattern = /^seg-(\d{16})\.wal$/;
const temporarySuffix = '.tmp';

export function segmentName(seq: number): string {
  return `seg-${String(seq).padStart(16, '0')}.wal`;
}

export interface SegmentInfo {
  seq: number;
  path: string;
  /** The highest entry index any record in the segment wrote (0: none). */
  maxIndex: number;
  /** 1: the file ends with its records; 2: preallocated, the records end where the zeros begin. */
  version: SegmentVersion;
}

export interface WalContents {
  state: LogState;
  /** Every segment, oldest first, numbered without gaps. */
  segments: SegmentInfo[];
  /** Bytes of the last segment that hold whole records. */
  validBytes: number;
  /** What follows validBytes in the last segment, if anything: a write a crash cut short. */
  torn?: string;
}

/** Reads and checks every segment; changes nothing on disk. */
export async function readWal(paths: StoragePaths): Promise<WalContents> {
  const corrupt = (file: string, detail: string): StorageCorruptionError =>
    new StorageCorruptionError(file, detail, rebuildNodeRecovery(paths.dir));
  if (!fs.existsSync(paths.wal)) throw corrupt(paths.wal, 'the write-ahead log is missing, but the key file says the log is kept there');
  const found = await listSegments(paths.wal);
  if (found.length === 0) throw corrupt(paths.wal, 'the write-ahead log has no segment files');
  const firstSeq = (found[0] as SegmentInfo).seq;
  found.forEach((s, i) => {
    const expected = firstSeq + i;
    if (s.seq !== expected) throw corrupt(join(paths.wal, segmentName(expected)), `segment ${expected} is missing between ${firstSeq} and ${s.seq}`);
  });
  const replay = new LogReplay();
  let validBytes = 0;
  let torn: string | undefined;
  for (const [i, seg] of found.entries()) {
    const last = i === found.length - 1;
    const buf = await readFile(seg.path);
    const header = readHeader(buf);
    if ('problem' in header) throw corrupt(seg.path, header.problem);
    seg.version = header.version;
    let pos = segmentHeaderBytes;
    for (;;) {
      const f = readFrame(buf, pos, seg.version);
      if (f.kind === 'end') break;
      if (f.kind === 'bad') throw corrupt(seg.path, `${f.detail}, at byte ${pos}`);
      if (f.kind === 'torn') {
        if (!last) throw corrupt(seg.path, `${f.detail}, at byte ${pos} of a segment that is not the last`);
        torn = `${f.detail}, at byte ${pos}`;
        break;
      }
      let record: WalRecord;
      try {
        record = decodeRecord(f.body);
        if (pos === segmentHeaderBytes && record.type !== 'state') throw new Error(`the segment opens with a '${record.type}' record, not its state record`);
        seg.maxIndex = Math.max(seg.maxIndex, replay.apply(record));
      } catch (err) {
        throw corrupt(seg.path, `at byte ${pos}: ${(err as Error).message}`);
      }
      pos = f.end;
    }
    if (pos === segmentHeaderBytes) throw corrupt(seg.path, 'the segment has no state record');
    validBytes = pos;
  }
  try {
    return { state: replay.finish(), segments: found, validBytes, ...(torn !== undefined ? { torn } : {}) };
  } catch (err) {
    if (err instanceof ReplayError) throw corrupt(paths.wal, err.message);
    throw err;
  }
}

async function listSegments(dir: string): Promise<SegmentInfo[]> {
  const out: SegmentInfo[] = [];
  for (const name of await readdir(dir)) {
    const m = namePattern.exec(name);
    if (m !== null) out.push({ seq: Number(m[1]), path: join(dir, name), maxIndex: 0, version: 1 });
  }
  return out.sort((a, b) => a.seq - b.seq);
}

/** Removes temporary files of segments a crash interrupted; returns their names. */
export async function removeTemporarySegments(dir: string): Promise<string[]> {
  const names = (await readdir(dir)).filter((n) => n.endsWith(temporarySuffix));
  for (const n of names) await rm(join(dir, n), { force: true });
  return names;
}

export interface WalWriterOptions {
  /** A new segment is started once the current one reaches this size. */
  segmentBytes: number;
  /**
   * How far past its last record the segment being written is extended with zeros, at most
   * (never past segmentBytes ahead). Default 4 MiB.
   */
  preallocateBytes?: number;
}

const preallocateDefault = 4 * 1024 * 1024;
const zeroChunk = Buffer.alloc(64 * 1024);

function preallocation(opts: WalWriterOptions): number {
  return Math.max(1, Math.min(opts.preallocateBytes ?? preallocateDefault, opts.segmentBytes));
}

export class WalWriter {
  private closed = false;

  private readonly preallocateBytes: number;
  /** Up to here the file holds records, or zeros written by writeZerosAhead: not a hole. */
  private written: number;

  private constructor(
    private readonly dir: string,
    private fd: number,
    private size: number,
    /** The file's length: the records' `size` bytes, then zeros. */
    private allocated: number,
    private readonly segments: SegmentInfo[],
    private head: LogHead,
    private readonly opts: WalWriterOptions,
  ) {
    this.preallocateBytes = preallocation(opts);
    this.written = size;
  }

  /** Starts a new log in `dir` (which must hold no segments) from `state`. */
  static create(dir: string, state: LogState, opts: WalWriterOptions): WalWriter {
    fs.mkdirSync(dir, { recursive: true });
    const head = headOf(state);
    const { fd, size, length } = startSegment(dir, 1, head, preallocation(opts));
    const w = new WalWriter(dir, fd, size, length, [{ seq: 1, path: join(dir, segmentName(1)), maxIndex: 0, version: 2 }], head, opts);
    if (state.entries.length > 0) w.appendEntriesInRecords(state.entries);
    return w;
  }

  /**
   * Continues the log read by readWal. A torn tail is cut off: the file is cut at the last whole
   * record, so that what the crash left after it is gone too, and extended with zeros again. A
   * last segment of version 1 (written before preallocation) is left as it is, synced, and a new
   * segment started, so that every write from now on is preallocated.
   */
  static openForAppend(dir: string, contents: WalContents, opts: WalWriterOptions): WalWriter {
    const last = contents.segments[contents.segments.length - 1];
    if (last === undefined) throw new Error('openForAppend: no segments');
    const fd = fs.openSync(last.path, 'r+');
    const w = new WalWriter(dir, fd, contents.validBytes, contents.validBytes, contents.segments, headOf(contents.state), opts);
    if (contents.torn !== undefined) {
      fs.ftruncateSync(fd, contents.validBytes);
      if (last.version === 2) w.extend(contents.validBytes);
      fs.fsyncSync(fd);
    } else if (last.version === 2) {
      w.allocated = fs.fstatSync(fd).size;
    }
    if (last.version === 1) w.startNextSegment();
    return w;
  }

  /** Writes a record to the page cache (starting a new segment first if this one is full). */
  append(record: WalRecord): number {
    if (this.closed) throw new Error(`the write-ahead log in ${this.dir} is closed`);
    if (this.size >= this.opts.segmentBytes) this.startNextSegment();
    const frame = encodeRecord(record);
    this.reserve(this.size + frame.length);
    writeAll(this.fd, frame, this.size);
    this.size += frame.length;
    this.track(record);
    return frame.length;
  }

  /**
   * Makes the file reach at least `end`, extending it with zeros up to preallocateBytes past it:
   * the new length becomes durable with the next sync, once per extension instead of once per
   * write.
   */
  private reserve(end: number): void {
    if (end > this.allocated) this.extend(end);
    if (end > this.written) this.writeZerosAhead(end);
  }

  /**
   * Writes zeros over the hole for a chunk past `end`, where the record about to be written
   * ends (the record covers the rest). The file system allocates a hole's blocks when they are
   * first written back, and the sync must journal that; with the zeros written a chunk ahead,
   * the next records land on blocks the sync after this write already allocated, so that
   * happens once per chunk rather than once per write of a few KiB (a Ready at 16 or 64
   * clients). The zeros cost about 25 µs per 64 KiB here.
   */
  private writeZerosAhead(end: number): void {
    // Called with end > written and end <= allocated, so the zeros start at `end`: one write.
    const to = Math.min(this.allocated, end + zeroChunk.length);
    writeAll(this.fd, zeroChunk.subarray(0, to - end), end);
    this.written = to;
  }

  private extend(end: number): void {
    this.allocated = end + this.preallocateBytes;
    fs.ftruncateSync(this.fd, this.allocated);
  }

  /** Makes every record appended so far durable. */
  sync(): Promise<void> {
    return fdatasync(this.fd);
  }

  /**
   * Deletes the oldest segments whose entries are all compacted (their state is repeated by the
   * newer segments' state records), after syncing the compaction that made them obsolete.
   * Returns the names removed.
   */
  async removeObsolete(): Promise<string[]> {
    let n = 0;
    while (n < this.segments.length - 1 && (this.segments[n] as SegmentInfo).maxIndex <= this.head.truncated.index) n++;
    if (n === 0) return [];
    await this.sync();
    const gone = this.segments.splice(0, n);
    for (const s of gone) await rm(s.path, { force: true });
    return gone.map((s) => segmentName(s.seq));
  }

  /**
   * Rewrites the log into one new segment: its state record, then `entries` (the log after the
   * compaction point, as the cache holds it), written under a temporary name, synced and renamed
   * into place; then every older segment is deleted. So nothing the older segments held beyond
   * what is still in the log stays on disk (the entries a compaction dropped, in full), and a
   * crash at any point leaves either the old segments whole or the new one whole. Returns the
   * names removed.
   */
  async rewrite(entries: readonly Entry[]): Promise<string[]> {
    if (this.closed) throw new Error(`the write-ahead log in ${this.dir} is closed`);
    fs.fdatasyncSync(this.fd);
    const current = this.segments[this.segments.length - 1] as SegmentInfo;
    const seq = current.seq + 1;
    const frames = [segmentHeader(), encodeRecord({ type: 'state', ...this.head })];
    let from = 0;
    let bytes = 0;
    for (const [i, e] of entries.entries()) {
      bytes += 64 + (e.kind === 'normal' ? e.data.length : 256);
      if (bytes >= 1024 * 1024 || i === entries.length - 1) {
        frames.push(encodeRecord({ type: 'save', entries: entries.slice(from, i + 1) }));
        from = i + 1;
        bytes = 0;
      }
    }
    const body = Buffer.concat(frames);
    const final = join(this.dir, segmentName(seq));
    const temporary = final + temporarySuffix;
    const tfd = fs.openSync(temporary, 'w');
    try {
      writeAll(tfd, body, 0);
      fs.ftruncateSync(tfd, body.length + this.preallocateBytes);
      fs.fdatasyncSync(tfd);
    } finally {
      fs.closeSync(tfd);
    }
    fs.renameSync(temporary, final);
    syncDirSync(this.dir);
    fs.closeSync(this.fd);
    this.fd = fs.openSync(final, 'r+');
    this.size = body.length;
    this.allocated = body.length + this.preallocateBytes;
    this.written = body.length;
    const gone = this.segments.splice(0, this.segments.length);
    const last = entries[entries.length - 1];
    this.segments.push({ seq, path: final, maxIndex: last?.index ?? 0, version: 2 });
    for (const g of gone) await rm(g.path, { force: true });
    syncDirSync(this.dir);
    return gone.map((g) => segmentName(g.seq));
  }

  /** The segments on disk, oldest first (for tests and metrics). */
  segmentNames(): string[] {
    return this.segments.map((s) => segmentName(s.seq));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.fd);
  }

  private appendEntriesInRecords(entries: LogState['entries']): void {
    const recordBytesTarget = 1024 * 1024;
    let from = 0;
    let bytes = 0;
    for (const [i, e] of entries.entries()) {
      bytes += 64 + (e.kind === 'normal' ? e.data.length : 256);
      if (bytes >= recordBytesTarget || i === entries.length - 1) {
        this.append({ type: 'save', entries: entries.slice(from, i + 1) });
        from = i + 1;
        bytes = 0;
      }
    }
  }

  private startNextSegment(): void {
    fs.fdatasyncSync(this.fd);
    const current = this.segments[this.segments.length - 1] as SegmentInfo;
    const seq = current.seq + 1;
    const { fd, size, length } = startSegment(this.dir, seq, this.head, this.preallocateBytes);
    fs.closeSync(this.fd);
    this.fd = fd;
    this.size = size;
    this.allocated = length;
    this.written = size;
    this.segments.push({ seq, path: join(this.dir, segmentName(seq)), maxIndex: 0, version: 2 });
  }

  private track(r: WalRecord): void {
    this.head = nextHead(this.head, r);
    const last = r.type === 'save' ? r.entries[r.entries.length - 1] : undefined;
    const seg = this.segments[this.segments.length - 1] as SegmentInfo;
    if (last !== undefined) seg.maxIndex = Math.max(seg.maxIndex, last.index);
  }
}

function headOf(state: LogState): LogHead {
  return { hardState: state.hardState, truncated: state.truncated, snapshot: state.record };
}

/**
 * Writes a segment's header and state record under a temporary name, extended with
 * `preallocateBytes` of zeros, then puts it in place.
 */
function startSegment(dir: string, seq: number, head: LogHead, preallocateBytes: number): { fd: number; size: number; length: number } {
  const final = join(dir, segmentName(seq));
  const temporary = final + temporarySuffix;
  const bytes = Buffer.concat([segmentHeader(), encodeRecord({ type: 'state', ...head })]);
  const length = bytes.length + preallocateBytes;
  const tfd = fs.openSync(temporary, 'w');
  try {
    writeAll(tfd, bytes, 0);
    fs.ftruncateSync(tfd, length);
    fs.fdatasyncSync(tfd);
  } finally {
    fs.closeSync(tfd);
  }
  fs.renameSync(temporary, final);
  syncDirSync(dir);
  return { fd: fs.openSync(final, 'r+'), size: bytes.length, length };
}

function writeAll(fd: number, buf: Buffer, position: number): void {
  let done = 0;
  while (done < buf.length) done += fs.writeSync(fd, buf, done, buf.length - done, position + done);
}
