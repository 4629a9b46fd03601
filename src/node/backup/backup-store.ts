// Backups on a target (target-io.ts), in the format of backup-format.ts: written whole or not at
// all, listed, verified, pruned, read back for a restore.
//
// Atomic: a backup is written into `.partial-<id>/` (each file synced, the manifest last), and
// only then renamed to `<id>/`. A directory is a backup only under an id's name and with a
// manifest that parses, so a backup cut off at any point is never listed; a later write removes
// what such a cut left behind (once it is a few hours old: partialAgeMaxMs). An S3 target has no
// rename: there a backup is written in place, the manifest last (see writeBackup).

import { createHash } from 'node:crypto';
import {
  backupIdPattern, backupIdTime, decodeManifest, encodeManifest, manifestBytesMax, manifestName, partialPrefix, sha256,
  type BackupFile, type BackupManifest,
} from './backup-format.ts';
import type { TargetIo } from './target-io.ts';
import { chainBackups, keptForChains, volumeChain, type ChainLink, type ManifestLookup } from './backup-chain.ts';

/** A stored file larger than this is refused unread (the store's snapshot file is at most 2 GiB). */
export const backupFileBytesMax = 2 * 1024 ** 3;

/**
 * A partial backup older than this is what a cut-off write left, and is removed by the next one; a
 * younger one may be another node writing to the same NAS right now (`backup now` beside the
 * schedule), and is left alone.
 */
export const partialAgeMaxMs = 6 * 3_600_000;

/** A file of a backup to write: whole bytes, or a body that flows (a volume stream), each as stored. */
export type BackupFileSource = { name: string; bytes: Uint8Array } | { name: string; body: AsyncIterable<Uint8Array>; encoding?: 'chunked' };

/** `body`, counting its bytes and hashing them as they pass; `done()` says what passed once it has ended. */
export function measured(body: AsyncIterable<Uint8Array>): { body: AsyncGenerator<Uint8Array>; done: () => { bytes: number; sha256: string } } {
  const hash = createHash('sha256');
  let bytes = 0;
  let result: { bytes: number; sha256: string } | undefined;
  async function* pass(): AsyncGenerator<Uint8Array> {
    for await (const chunk of body) {
      hash.update(chunk);
      bytes += chunk.length;
      yield chunk;
    }
    result = { bytes, sha256: hash.digest('hex') };
  }
  return {
    body: pass(),
    done: () => {
      if (result === undefined) throw new Error('the file was not written to its end');
      return result;
    },
  };
}

/** Writes a sealed backup (sealBackup) to `io`; returns its id once it is complete and renamed. */
export async function writeBackup(io: TargetIo, manifest: BackupManifest, files: readonly { name: string; bytes: Uint8Array }[]): Promise<string> {
  await writeBackupFiles(io, { id: manifest.id, createdAt: manifest.createdAt }, files, () => manifest);
  return manifest.id;
}

/**
 * Writes the files of backup `b` to `io`, the streamed ones as they flow (their sizes and digests
 * counted on the way), then the manifest `manifestFor` makes of what was stored, last; returns
 * that manifest once the backup is complete (renamed into place). Any failure, a source's
 * included, leaves nothing listed.
 */
export async function writeBackupFiles(
  io: TargetIo, b: { id: string; createdAt: number }, files: readonly BackupFileSource[], manifestFor: (stored: BackupFile[]) => BackupManifest,
): Promise<BackupManifest> {
  for (const name of await io.list()) {
    const id = name.slice(partialPrefix.length);
    if (name.startsWith(partialPrefix) && (!backupIdPattern.test(id) || backupIdTime(id) < b.createdAt - partialAgeMaxMs)) await io.removeDir(name);
  }
  // A target without rename (S3) is written in place: a backup is listed as good only once its
  // manifest, written last, is there; one cut off before is listed as damaged (manifest missing).
  const tmp = io.renames === false ? b.id : `${partialPrefix}${b.id}`;
  if (io.renames === false && (await io.list()).includes(b.id)) throw new Error(`backup ${b.id} is already on ${io.where}`);
  await io.makeDir(tmp);
  try {
    const stored: BackupFile[] = [];
    for (const f of files) {
      if ('bytes' in f) {
        await io.writeFile(tmp, f.name, f.bytes);
        stored.push({ name: f.name, bytes: f.bytes.length, sha256: sha256(f.bytes) });
        continue;
      }
      const m = measured(f.body);
      await io.writeStream(tmp, f.name, m.body);
      stored.push({ name: f.name, ...m.done(), ...(f.encoding !== undefined ? { encoding: f.encoding } : {}) });
    }
    const manifest = manifestFor(stored);
    await io.writeFile(tmp, manifestName, encodeManifest(manifest));
    if (tmp !== b.id) await io.renameDir(tmp, b.id);
    return manifest;
  } catch (err) {
    await io.removeDir(tmp).catch(() => undefined);
    throw err;
  }
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

/** A lookup over a listing (backup-chain.ts): a backup not listed is missing; one without a manifest, damaged. */
export function lookupIn(listed: readonly ListedBackup[], where: string): ManifestLookup {
  const byId = new Map(listed.map((b) => [b.id, b]));
  return (id) => {
    const b = byId.get(id);
    if (b === undefined) return { problem: `no such backup on ${where}` };
    return b.manifest ?? { problem: `damaged (${b.problem ?? 'unreadable'})` };
  };
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
  /** The files as stored that were asked to be kept, when every file is sound. */
  files?: Map<string, Uint8Array>;
  /** Each volume's chain (backup-chain.ts), the whole stream first, when every backup of it is there. */
  chains?: Map<string, ChainLink[]>;
  /** The manifests of the older backups the chains pass through, by id. */
  parents?: Map<string, BackupManifest>;
  /** The backups a chain needs that are missing from the target or damaged. */
  missing?: string[];
}

/** What a verify pass does besides checking digests: files to keep whole (small ones), and taps on the bytes of others. */
export interface VerifyOptions {
  /** true: every file (small backups only); or the names to keep. */
  keep?: boolean | readonly string[];
  /** Called with the manifest before any file is read: the bytes of each file as they are read go to its tap, if any. */
  tap?: (m: BackupManifest, entry: BackupFile) => ((chunk: Uint8Array) => void) | undefined;
}

/**
 * Reads the whole backup back, streamed (a file is never held whole unless kept), and checks every
 * file's size and SHA-256 against the manifest; then each volume's chain (format 4): every older
 * backup it passes through must be on the target with a manifest that holds the version, and the
 * stream files of the chain are read and checked the same way (a missing backup is named).
 */
export async function verifyBackup(io: TargetIo, id: string, options: boolean | VerifyOptions = false): Promise<VerifiedBackup> {
  const o: VerifyOptions = typeof options === 'boolean' ? { keep: options } : options;
  if (!backupIdPattern.test(id)) return { id, ok: false, problems: [{ file: id, problem: 'not a backup id (YYYYMMDDTHHMMSSZ-INDEX)' }], bytes: 0 };
  if (!(await io.list()).includes(id)) return { id, ok: false, problems: [{ file: id, problem: `no such backup on ${io.where}` }], bytes: 0 };
  const listed = await readManifest(io, id);
  if (listed.manifest === undefined) return { id, ok: false, problems: [{ file: `${id}/${manifestName}`, problem: listed.problem ?? 'unreadable' }], bytes: 0 };
  const m = listed.manifest;
  const problems: { file: string; problem: string }[] = [];
  const files = new Map<string, Uint8Array>();
  let bytes = 0;
  for (const entry of m.files) {
    const keep = o.keep === true || (Array.isArray(o.keep) && o.keep.includes(entry.name));
    const r = await checkFile(io, id, entry, keep, o.tap?.(m, entry));
    bytes += r.bytes;
    if (r.problem !== undefined) problems.push({ file: `${id}/${entry.name}`, problem: r.problem });
    else if (r.kept !== undefined) files.set(entry.name, r.kept);
  }
  const chain = await verifyChains(io, m, o);
  problems.push(...chain.problems);
  bytes += chain.bytes;
  const ok = problems.length === 0;
  const kept = o.keep !== undefined && o.keep !== false;
  return { id, ok, manifest: m, problems, bytes, ...(kept && ok ? { files } : {}), ...(ok ? { chains: chain.chains, parents: chain.parents } : {}), missing: chain.missing };
}

/** The chains of backup `m`'s volumes: their older backups' manifests read, and their stream files checked (each once). */
async function verifyChains(io: TargetIo, m: BackupManifest, o: VerifyOptions): Promise<{ problems: VerifiedBackup['problems']; bytes: number; chains: Map<string, ChainLink[]>; parents: Map<string, BackupManifest>; missing: string[] }> {
  const out = { problems: [] as VerifiedBackup['problems'], bytes: 0, chains: new Map<string, ChainLink[]>(), parents: new Map<string, BackupManifest>(), missing: [] as string[] };
  if (!m.volumes.some((v) => v.parent !== undefined)) {
    for (const v of m.volumes) out.chains.set(v.name, v.version === null ? [] : [{ backupId: m.id, version: v.version, file: v.file, parent: null }]);
    return out;
  }
  const names = new Set(await io.list());
  const read = new Map<string, ListedBackup>([[m.id, { id: m.id, manifest: m }]]);
  // Read every manifest the chains pass through first (small), then walk them from the listing.
  for (let grew = true; grew;) {
    grew = false;
    const lookup = lookupIn([...read.values()], io.where);
    for (const need of chainBackups(m, lookup)) {
      if (read.has(need) || !names.has(need)) continue;
      read.set(need, await readManifest(io, need));
      grew = true;
    }
  }
  const lookup = lookupIn([...read.values()], io.where);
  const checked = new Set<string>();
  for (const v of m.volumes) {
    const chain = volumeChain(m, v.name, lookup);
    if ('problem' in chain) {
      if (!out.missing.includes(chain.problem.backupId)) out.missing.push(chain.problem.backupId);
      out.problems.push({ file: chain.problem.backupId, problem: `volume ${v.name}'s chain needs it: ${chain.problem.problem}` });
      continue;
    }
    out.chains.set(v.name, chain.links);
    for (const link of chain.links) {
      const lm = link.backupId === m.id ? undefined : read.get(link.backupId)?.manifest;
      const entry = link.file === null ? undefined : lm?.files.find((f) => f.name === link.file);
      if (lm === undefined || entry === undefined || checked.has(`${link.backupId}/${entry.name}`)) continue;
      checked.add(`${link.backupId}/${entry.name}`);
      out.parents.set(lm.id, lm);
      const r = await checkFile(io, lm.id, entry, false, o.tap?.(lm, entry));
      out.bytes += r.bytes;
      if (r.problem !== undefined) out.problems.push({ file: `${lm.id}/${entry.name}`, problem: `${r.problem} (volume ${v.name}'s chain needs it)` });
    }
  }
  return out;
}

/** One file read as it flows: its size and digest against `entry`, kept whole when asked, each chunk to `tap`. */
async function checkFile(io: TargetIo, id: string, entry: BackupFile, keep: boolean, tap: ((chunk: Uint8Array) => void) | undefined): Promise<{ bytes: number; problem?: string; kept?: Uint8Array }> {
  let got = 0;
  const hash = createHash('sha256');
  const parts: Buffer[] = [];
  try {
    const body = await io.readStream(id, entry.name, Math.min(backupFileBytesMax, entry.bytes));
    if (body === undefined) return { bytes: 0, problem: 'missing' };
    for await (const chunk of body) {
      got += chunk.length;
      // Longer than the manifest says: the rest is not read (a file's size is known by then).
      if (got > entry.bytes) return { bytes: got, problem: `more than the ${entry.bytes} bytes the manifest says` };
      hash.update(chunk);
      if (keep) parts.push(Buffer.from(chunk));
      tap?.(chunk);
    }
  } catch (err) {
    return { bytes: got, problem: (err as Error).message };
  }
  if (got !== entry.bytes) return { bytes: got, problem: `${got} bytes, the manifest says ${entry.bytes}` };
  const digest = hash.digest('hex');
  if (digest !== entry.sha256) return { bytes: got, problem: `sha256 ${digest.slice(0, 16)}..., the manifest says ${entry.sha256.slice(0, 16)}...` };
  return { bytes: got, ...(keep ? { kept: Buffer.concat(parts) } : {}) };
}

/** What a prune did: the backups removed, and those kept only because a kept backup's volume chain needs them. */
export interface PruneResult {
  removed: string[];
  keptForChains: string[];
}

/**
 * Removes the backups of cluster `clusterId` that `keep` leaves out (backupsToKeep), but never one
 * that a kept backup's volume chain needs (backup-chain.ts: it is kept, and said so). Another
 * cluster's backups on the same target (the cluster this one was restored from, whose targets
 * came back with it) are never pruned here.
 */
export async function pruneBackups(io: TargetIo, clusterId: string, keep: (ids: readonly string[]) => Set<string>): Promise<PruneResult> {
  const listed = await listBackups(io);
  const ids = listed.filter((b) => b.manifest?.clusterId === clusterId).map((b) => b.id);
  const kept = keep(ids);
  const needed = keptForChains(kept, lookupIn(listed, io.where));
  const removed = ids.filter((id) => !kept.has(id) && !needed.has(id));
  for (const id of removed) await io.removeDir(id);
  return { removed, keptForChains: ids.filter((id) => !kept.has(id) && needed.has(id)) };
}
