// The snapshots folder: one file per snapshot, named by its index so that listing the folder
// sorts them. A file is written under a temporary name, fsynced, renamed into place and the
// folder fsynced, so after a crash a snapshot file is either whole or absent (a leftover
// temporary file is removed at open).

import { open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeSnapshotFile, encodeSnapshotPrefix, snapshotHeader, type DecodedSnapshot } from './snapshot-file.ts';
import type { SnapshotHeader } from './schemas.ts';
import type { Snapshot } from '../raft/types.ts';

const namePattern = /^snap-(\d{16})\.snap$/;
const temporarySuffix = '.tmp';
const damagedSuffix = '.damaged';

export class SnapshotDir {
  constructor(readonly dir: string) {}

  fileName(index: number): string {
    return `snap-${String(index).padStart(16, '0')}.snap`;
  }

  path(index: number): string {
    return join(this.dir, this.fileName(index));
  }

  /** Writes `snap` durably and returns its header. Replaces a file of the same index. */
  async write(snap: Snapshot): Promise<SnapshotHeader> {
    const header = snapshotHeader(snap);
    const final = this.path(snap.meta.index);
    const temporary = final + temporarySuffix;
    const fh = await open(temporary, 'w');
    try {
      await fh.writeFile(encodeSnapshotPrefix(header));
      await fh.writeFile(snap.data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(temporary, final);
    await this.syncDir(); // makes the rename itself durable
    return header;
  }

  /** Reads and verifies the snapshot at `index`. A missing file is a failed read, not a throw. */
  async read(index: number): Promise<DecodedSnapshot> {
    let bytes: Buffer;
    try {
      bytes = await readFile(this.path(index));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { ok: false, detail: 'the snapshot file is missing' };
      throw err;
    }
    const decoded = decodeSnapshotFile(bytes);
    if (decoded.ok && decoded.header.index !== index) {
      return { ok: false, detail: `file holds the snapshot of index ${decoded.header.index}, not ${index}` };
    }
    return decoded;
  }

  /** Indexes of the snapshot files present, newest first. */
  async list(): Promise<number[]> {
    const out: number[] = [];
    for (const name of await readdir(this.dir)) {
      const m = namePattern.exec(name);
      if (m?.[1] !== undefined) out.push(Number(m[1]));
    }
    return out.sort((a, b) => b - a);
  }

  /** Removes temporary files left by a crash in the middle of a write. Returns their names. */
  async removeTemporary(): Promise<string[]> {
    const names = (await readdir(this.dir)).filter((n) => n.endsWith(temporarySuffix));
    for (const n of names) await rm(join(this.dir, n), { force: true });
    return names;
  }

  /** Renames a damaged file out of the way, keeping it for inspection. Returns the new path. */
  async setAside(index: number): Promise<string> {
    const to = this.path(index) + damagedSuffix;
    await rename(this.path(index), to).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    await this.syncDir();
    return to;
  }

  /**
   * Keeps the `keep` newest files at or below `current` and deletes the rest: older ones are no
   * longer needed, newer ones were never recorded (a crash between the file and its record).
   * Files in `writing` are spared: they are being written, and their record is yet to come.
   */
  async prune(current: number, keep: number, writing: ReadonlySet<number> = new Set()): Promise<number[]> {
    const all = await this.list();
    const kept = all.filter((i) => i <= current).slice(0, keep);
    const removed = all.filter((i) => !kept.includes(i) && !writing.has(i));
    for (const i of removed) await rm(this.path(i), { force: true });
    if (removed.length > 0) await this.syncDir();
    return removed;
  }

  /** Deletes every snapshot file but `keep`'s, damaged ones set aside included. Returns the names removed. */
  async removeAllBut(keep: number): Promise<string[]> {
    const keepName = this.fileName(keep);
    const names = (await readdir(this.dir)).filter((n) => n !== keepName && (namePattern.test(n) || n.endsWith(damagedSuffix)));
    for (const n of names) await rm(join(this.dir, n), { force: true });
    if (names.length > 0) await this.syncDir();
    return names;
  }

  private async syncDir(): Promise<void> {
    const fh = await open(this.dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  }
}
