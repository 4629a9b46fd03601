// Scheduled snapshot files (config `snapshot`: intervalMs, keep, dir): every intervalMs, each node
// writes the snapshot file of its applied state (the format `shoal snapshot save` downloads and
// `shoal snapshot restore` starts a new cluster from) to a local directory, keeping the newest
// `keep`. Every node keeps its own, so losing any one machine loses no backup; the files of a
// follower may be a few entries behind the leader's, as its applied state is.
//
// A file is written whole or not at all: FILE.tmp, synced, renamed, the directory synced. The
// name says what it holds and sorts by age: shoal-<cluster id>-<index, 12 digits>-<UTC time>.snap.

import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import path from 'node:path';
import type { DocumentStore } from '../../../fsm/index.ts';
import type { Logger } from '../../log.ts';
import type { MembershipView } from '../../ports/membership-view.ts';
import type { TermSource } from '../../ports/term-source.ts';
import { encodeSnapshotFileParts } from './snapshot-file.ts';

const pause = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/** `shoal-<cluster>-<index>-<time>.snap`, the files this module writes and prunes, and nothing else. */
export const backupFilePattern = /^shoal-([A-Za-z0-9_-]+)-(\d{12})-(\d{8}T\d{6}Z)\.snap$/;

/**
 * The snapshot file of `node`'s applied state, as parts (encoded the way the node snapshots
 * itself, in slices with the event loop free between them). Index, term, members and the store's
 * image are taken in one synchronous step.
 */
export async function snapshotFileParts(node: Pick<TermSource, 'currentTerm'> & Pick<MembershipView, 'membership'> & { readonly appliedIndex: number }, store: DocumentStore, clusterId: string): Promise<{ index: number; parts: Uint8Array[] }> {
  const meta = { clusterId, index: node.appliedIndex, term: node.currentTerm, members: node.membership.list() };
  const parts = await encodeSnapshotFileParts(meta, await store.snapshotInSlices(pause), pause);
  return { index: meta.index, parts };
}

export function backupFileName(clusterId: string, index: number, at: Date): string {
  const time = at.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}Z$/, 'Z');
  return `shoal-${clusterId}-${String(index).padStart(12, '0')}-${time}.snap`;
}

/** Writes `parts` to `dir/name` whole or not at all. */
export async function writeFileDurably(dir: string, name: string, parts: readonly Uint8Array[]): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  const tmp = `${file}.tmp`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    for (const p of parts) await fh.write(p);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
  return file;
}

/** The backup files in `dir`, oldest first (their names sort by index, then time). */
export function listBackups(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return names.filter((n) => backupFilePattern.test(n)).sort();
}

export interface BackupOptions {
  dir: string;
  intervalMs: number;
  keep: number;
  clusterId: string;
  take: () => Promise<{ index: number; parts: Uint8Array[] }>;
  log: Logger;
  now?: () => Date;
}

export class ScheduledBackups {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private lastIndex = -1;

  constructor(private readonly opts: BackupOptions) {}

  start(): void {
    if (this.opts.intervalMs <= 0 || this.timer !== undefined) return;
    this.timer = setInterval(() => { this.running ??= this.runOnce().then(() => undefined).finally(() => { this.running = undefined; }); }, this.opts.intervalMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /**
   * Writes one file unless nothing was applied since the last one, then prunes beyond `keep`.
   * A failure is logged, not thrown: a full backup disk must not stop the node.
   */
  async runOnce(): Promise<string | undefined> {
    try {
      const { index, parts } = await this.opts.take();
      if (index === this.lastIndex) return undefined;
      const name = backupFileName(this.opts.clusterId, index, (this.opts.now ?? (() => new Date()))());
      const file = await writeFileDurably(this.opts.dir, name, parts);
      this.lastIndex = index;
      const all = listBackups(this.opts.dir);
      for (const old of all.slice(0, Math.max(0, all.length - this.opts.keep))) rmSync(path.join(this.opts.dir, old), { force: true });
      this.opts.log.info(`wrote snapshot file ${file} (index ${index}); keeping the newest ${this.opts.keep}`);
      return file;
    } catch (err) {
      this.opts.log.warn(`scheduled snapshot to ${this.opts.dir} failed: ${(err as Error).message}; the next one is in ${this.opts.intervalMs} ms`);
      return undefined;
    }
  }
}
