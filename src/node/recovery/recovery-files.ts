// The files `shoal recover --force-new-cluster` leaves in a data directory: the marker that
// refuses a second run, and the old storage moved aside (renamed, never deleted).
//
//   <data>/recovered.json             what was done, when, by which release; its presence refuses
//                                     another run
//   <data>/pre-recover-<time>/        the old log/, wal/, snapshots/, log.id and node.json
//   <data>/recover-<time>.tmp/        the new log while it is written (renamed into place)

import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, open, rename, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { storagePaths } from '../../storage/index.ts';
import { syncDir } from '../../storage/sync-dir.ts';
import { logIdPath } from '../../storage/log-incarnation.ts';

export const recoveryMarkerName = 'recovered.json';

const markerSchema = z.object({
  version: z.literal(1),
  /** `started`: the old storage may be half moved (an interrupted run); `done`: complete. */
  state: z.enum(['started', 'done']),
  at: z.string(),
  softwareVersion: z.string(),
  nodeId: z.string(),
  name: z.string(),
  oldClusterId: z.string(),
  clusterId: z.string(),
  commitIndex: z.number().int().min(0),
  lastIndex: z.number().int().min(0),
  index: z.number().int().min(0),
  removed: z.array(z.string()),
  backup: z.string(),
}).strict();
export type RecoveryMarker = z.infer<typeof markerSchema>;

export function markerPath(dataDir: string): string {
  return path.join(dataDir, recoveryMarkerName);
}

/**
 * The marker, if the directory has one: `ok` false when it cannot be read or parsed (it still
 * refuses a second run: its presence is what counts).
 */
export function readMarker(dataDir: string): { ok: true; marker: RecoveryMarker } | { ok: false; problem: string } | undefined {
  const file = markerPath(dataDir);
  if (!existsSync(file)) return undefined;
  try {
    const parsed = markerSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? { ok: true, marker: parsed.data } : { ok: false, problem: parsed.error.message };
  } catch (err) {
    return { ok: false, problem: (err as Error).message };
  }
}

/** Writes the marker durably (temporary name, fsync, rename, directory fsync). */
export async function writeMarker(dataDir: string, marker: RecoveryMarker): Promise<void> {
  const file = markerPath(dataDir);
  const fh = await open(`${file}.tmp`, 'w');
  try {
    await fh.writeFile(`${JSON.stringify(markerSchema.parse(marker), null, 2)}\n`);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(`${file}.tmp`, file);
  await syncDir(dataDir);
}

/** The names, inside a data directory, of what DiskStorage owns. */
function storageNames(dataDir: string): string[] {
  const p = storagePaths(dataDir);
  return [p.log, p.wal, p.snapshots, logIdPath(p)].map((f) => path.basename(f));
}

/**
 * Moves the storage in `dataDir` (and a copy of node.json) into `backup`, then the storage
 * written in `staging` into `dataDir`. Renames within one directory: nothing is copied but the
 * small node.json, and nothing is deleted.
 */
export async function swapStorage(dataDir: string, staging: string, backup: string): Promise<void> {
  await mkdir(backup, { mode: 0o700 });
  for (const name of storageNames(dataDir)) {
    if (existsSync(path.join(dataDir, name))) await rename(path.join(dataDir, name), path.join(backup, name));
  }
  await copyFile(path.join(dataDir, 'node.json'), path.join(backup, 'node.json'));
  await writeFile(path.join(backup, 'README'), 'The storage of this node before `shoal recover --force-new-cluster` (see ../recovered.json).\n' +
    'Kept for inspection; nothing reads it. Remove it once the recovered cluster runs as it should.\n');
  await syncDir(backup);
  for (const name of storageNames(staging)) await rename(path.join(staging, name), path.join(dataDir, name));
  await rmdir(staging);
  await syncDir(dataDir);
}
