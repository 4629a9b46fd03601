// Backups on a target (target-io.ts), in the format of backup-format.ts: written whole or not at
// all, listed, verified, pruned, read back for a restore.
//
// Atomic: a backup is written into `.partial-<id>/` (each file synced, the manifest last), and
// only then renamed to `<id>/`. A directory is a backup only under an id's name and with a
// manifest that parses, so a backup cut off at any point is never listed; a later write removes
// what such a cut left behind (once it is a few hours old: partialAgeMaxMs). An S3 target has no
// rename: there a backup is written in place, the manifest last (see writeBackup).

import {
  backupIdPattern, backupIdTime, decodeManifest, encodeManifest, fileProblem, manifestBytesMax, manifestName, partialPrefix,
  type BackupManifest,
} from './backup-format.ts';
import type { TargetIo } from './target-io.ts';

/** A stored file larger than this is refused unread (the store's snapshot file is at most 2 GiB). */
export const backupFileBytesMax = 2 * 1024 ** 3;

/**
 * A partial backup older than this is what a cut-off write left, and is removed by the next one; a
 * younger one may be another node writing to the same NAS right now (`backup now` beside the
 * schedule), and is left alone.
 */
export const partialAgeMaxMs = 6 * 3_600_000;

/** Writes a sealed backup (sealBackup) to `io`; returns its id once it is complete and renamed. */
export async function writeBackup(io: TargetIo, manifest: BackupManifest, files: readonly { name: string; bytes: Uint8Array }[]): Promise<string> {
  for (const name of await io.list()) {
    const id = name.slice(partialPrefix.length);
    if (name.startsWith(partialPrefix) && (!backupIdPattern.test(id) || backupIdTime(id) < manifest.createdAt - partialAgeMaxMs)) await io.removeDir(name);
  }
  // A target without rename (S3) is written in place: a backup is listed as good only once its
  // manifest, written last, is there; one cut off before is listed as damaged (manifest missing).
  const tmp = io.renames === false ? manifest.id : `${partialPrefix}${manifest.id}`;
  if (io.renames === false && (await io.list()).includes(manifest.id)) throw new Error(`backup ${manifest.id} is already on ${io.where}`);
  await io.makeDir(tmp);
  try {
    for (const f of files) await io.writeFile(tmp, f.name, f.bytes);
    await io.writeFile(tmp, manifestName, encodeManifest(manifest));
    if (tmp !== manifest.id) await io.renameDir(tmp, manifest.id);
  } catch (err) {
    await io.removeDir(tmp).catch(() => undefined);
    throw err;
  }
  return manifest.id;
}

export interface ListedBackup {
  id: string;
  /** The manifest, or undefined when it is missing or does not parse (then `problem` says why). */
  manifest?: BackupManifest;
  problem?: string;
}

/** Every backup directory on `io`, oldest first, each with its manifest (files are not read: see verifyBackup). */
export async function listBackups(io: TargetIo): Promise<ListedBackup[]> {
  const ids = (await io.list()).filter((n) => backupIdPattern.test(n)).sort();
  const out: ListedBackup[] = [];
  for (const id of ids) out.push(await readManifest(io, id));
  return out;
}

async function readManifest(io: TargetIo, id: string): Promise<ListedBackup> {
  let bytes: Uint8Array | undefined;
  try {
    bytes = await io.readFile(id, manifestName, manifestBytesMax);
  } catch (err) {
    return { id, problem: `${manifestName}: ${(err as Error).message}` };
  }
  if (bytes === undefined) return { id, problem: `${manifestName}: missing` };
  const m = decodeManifest(bytes);
  if ('problem' in m) return { id, problem: `${manifestName}: ${m.problem}` };
  if (m.manifest.id !== id) return { id, problem: `${manifestName}: it names backup ${m.manifest.id}, not ${id}` };
  return { id, manifest: m.manifest };
}

export interface VerifiedBackup {
  id: string;
  ok: boolean;
  manifest?: BackupManifest;
  /** Each damaged or missing file by name (the manifest too), with what is wrong. */
  problems: { file: string; problem: string }[];
  /** Bytes read back. */
  bytes: number;
  /** The files as stored, when `keep` was asked and every one is sound. */
  files?: Map<string, Uint8Array>;
}

/** Reads the whole backup back and checks every file's size and SHA-256 against the manifest. */
export async function verifyBackup(io: TargetIo, id: string, keep = false): Promise<VerifiedBackup> {
  if (!backupIdPattern.test(id)) return { id, ok: false, problems: [{ file: id, problem: 'not a backup id (YYYYMMDDTHHMMSSZ-INDEX)' }], bytes: 0 };
  if (!(await io.list()).includes(id)) return { id, ok: false, problems: [{ file: id, problem: `no such backup on ${io.where}` }], bytes: 0 };
  const listed = await readManifest(io, id);
  if (listed.manifest === undefined) return { id, ok: false, problems: [{ file: `${id}/${manifestName}`, problem: listed.problem ?? 'unreadable' }], bytes: 0 };
  const problems: { file: string; problem: string }[] = [];
  const files = new Map<string, Uint8Array>();
  let bytes = 0;
  for (const entry of listed.manifest.files) {
    let stored: Uint8Array | undefined;
    try {
      stored = await io.readFile(id, entry.name, Math.min(backupFileBytesMax, entry.bytes));
    } catch (err) {
      problems.push({ file: `${id}/${entry.name}`, problem: (err as Error).message });
      continue;
    }
    bytes += stored?.length ?? 0;
    const problem = fileProblem(entry, stored);
    if (problem !== undefined) problems.push({ file: `${id}/${entry.name}`, problem });
    else if (keep && stored !== undefined) files.set(entry.name, stored);
  }
  const ok = problems.length === 0;
  return { id, ok, manifest: listed.manifest, problems, bytes, ...(keep && ok ? { files } : {}) };
}

/**
 * Removes the backups of cluster `clusterId` that `keep` leaves out (backupsToKeep); returns their
 * ids. Another cluster's backups on the same target (the cluster this one was restored from, whose
 * targets came back with it) are never pruned here.
 */
export async function pruneBackups(io: TargetIo, clusterId: string, keep: (ids: readonly string[]) => Set<string>): Promise<string[]> {
  const ids = (await listBackups(io)).filter((b) => b.manifest?.clusterId === clusterId).map((b) => b.id);
  const kept = keep(ids);
  const removed = ids.filter((id) => !kept.has(id));
  for (const id of removed) await io.removeDir(id);
  return removed;
}
