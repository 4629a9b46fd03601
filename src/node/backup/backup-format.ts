// The backup format (docs/operations.md, "Backups"): one directory per backup on a target, named
// by its id, holding the files of the backup and `manifest.json`, written last. The manifest says
// what the backup is (format, ids, feature level, raft index and term, time) and lists every other
// file with its size and SHA-256, as stored: `shoal backup verify` checks those without any key.
//
//   <id>/manifest.json   the manifest (plain JSON, never encrypted: it holds no secret)
//   <id>/store.snap      the store's snapshot file (src/node/recovery/snapshot-file.ts); secrets
//                        in it stay encrypted under the cluster keys
//   <id>/keys.json       the keyring's public keys and each cluster key sealed to the recovery key
//                        (never a cluster key in the clear)
//
// Encryption (targets outside the homelab: SFTP always, a directory with --encrypt): one random
// 256-bit data key per backup, sealed to the recovery key's public half the way a secret's data
// key is sealed to a cluster key (X25519 + HKDF-SHA256 + AES-256-GCM, secret-crypto.ts), and each
// file encrypted with it: AES-256-GCM, a random 96-bit IV, the associated data `shoal backup
// <id>/<file>` (a file cannot be swapped for another's); stored as IV | ciphertext | 16-byte tag.
// The cluster writes such a backup with the public half only; only the recovery key reads it.
//
//   <id>/volume-<n>.stream  the newest complete copy of the n-th replicated volume (by name), as a
//                        whole `btrfs send` stream, or (format 4) an increment on the version an
//                        older backup on the same target holds (backup-chain.ts)
//
// Volumes (issue 43): `volumes` has one entry per replicated volume: its record's settings, the
// version the stream holds and the stream's file (listed in `files` too, so verify checks it like
// any other), or version null when no node held a complete copy at the time (it is restored
// empty). Format 2 is a manifest that lists volumes; one without is still written as format 1,
// which every release reads. A reader refuses a format newer than it knows, saying which.
//
// Streamed volume files (issue 43, a decision): a volume stream flows from its holder to the
// target, and from the target into verify and restore, never whole in memory (a 1 GiB volume on a
// Raspberry Pi). Whole-file GCM cannot be written that way (one tag at the end, nothing
// authenticated before it), so an ENCRYPTED backup stores each volume stream in the `chunked`
// encoding (backup-chunks.ts): 1 MiB plaintext chunks, each AES-256-GCM with its own random IV
// and the associated data `shoal backup <id>/<file> chunk <index> final|more`, stored as
// IV | ciphertext | tag one after the other; a truncated file (its last chunk says `more`), a
// chunk moved or swapped (its index), or a file renamed (its name) does not open. The file's
// entry says `"encoding": "chunked"`, and such a manifest is format 3 (a release that reads only
// 1 and 2 refuses it by name instead of failing to decrypt). An unencrypted backup stores a volume
// stream as its plain bytes, the same as format 2, and stays format 2. Small files (manifest,
// store.snap, keys.json) stay whole. The manifest's size and SHA-256 of a streamed file are
// counted as it is written, of the stored bytes, so verify still needs no key.
//
// Incremental volume streams (issue 43, format 4): a volume's entry may name a `parent`, an older
// backup on the same target and the version its entry for that volume holds; the entry's stream
// is then `btrfs send -p` against that version, and a restore needs the whole chain (backup-chain.ts).
// An entry with a parent and no file holds the parent's version unchanged (nothing new was sent).
// A release before format 4 would take an increment for a whole stream, so any manifest with a
// parent is format 4, which such a release refuses by name.

import { createCipheriv, createHash, randomBytes, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { unwrapDataKey, wrapDataKey, wrappedKeySchema, type PublicClusterKey } from '../../resources/secret-crypto.ts';
import { ChunkOpener, ChunkSealer, passThrough, through, WholeOpener, type ByteStep } from './backup-chunks.ts';

/** The newest format this release writes and reads (4: volume streams that are increments on an older backup's). */
export const backupFormat = 4;
/** The format of a manifest whose volume streams are all whole, one of them at least in the `chunked` encoding. */
export const backupFormatChunked = 3;
/** The format of a manifest with volumes whose files are all stored whole (unencrypted, or written before format 3). */
export const backupFormatVolumes = 2;
/** The format of a manifest without volumes (every release reads it). */
export const backupFormatPlain = 1;
export const manifestName = 'manifest.json';
export const storeFileName = 'store.snap';
export const keysFileName = 'keys.json';
export const encryptionAlgorithm = 'aes-256-gcm';
/** A backup's directory name: its UTC time, then the raft index it holds (sorts by age). */
export const backupIdPattern = /^\d{8}T\d{6}Z-\d{12}$/;
/** The prefix of a backup directory being written: never listed, removed by the next backup. */
export const partialPrefix = '.partial-';
const fileNamePattern = /^[a-z][a-z0-9.-]{0,62}$/;
/** Manifests larger than this are refused unread (a manifest is a few hundred bytes). */
export const manifestBytesMax = 1024 * 1024;

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/);

export const backupFileSchema = z.object({
  name: z.string().regex(fileNamePattern),
  bytes: z.number().int().min(0),
  sha256: sha256Hex,
  /** How the file is encrypted: absent, whole (IV | ciphertext | tag); `chunked` (format 3): backup-chunks.ts. */
  encoding: z.literal('chunked').optional(),
}).strict();
export type BackupFile = z.infer<typeof backupFileSchema>;

/** The stream file of the n-th volume (0-based, by name): a name the file pattern takes, whatever the volume's name. */
export function volumeStreamFileName(n: number): string {
  return `volume-${n + 1}.stream`;
}

const versionNamePattern = /^s[1-9]\d{0,14}-e(0|[1-9]\d{0,14})-[A-Za-z0-9_.-]{1,128}$/;

/** What a volume's stream is an increment on (format 4): the backup on the same target and the version its entry holds. */
export const volumeParentSchema = z.object({
  backupId: z.string().regex(backupIdPattern),
  version: z.string().regex(versionNamePattern),
}).strict();
export type VolumeParent = z.infer<typeof volumeParentSchema>;

export const backupVolumeSchema = z.object({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/),
  service: z.string().min(1).max(63),
  sizeBytes: z.number().int().min(1),
  copies: z.number().int().min(1),
  everyMs: z.number().int().min(1),
  /** The version the stream holds (s<seq>-e<epoch>-<node>); null: no complete copy then, restored empty. */
  version: z.string().regex(versionNamePattern).nullable(),
  /** The stream's file, listed in `files`; null with version null, or when the parent holds this very version (nothing new). */
  file: z.string().regex(fileNamePattern).nullable(),
  /** Format 4: the stream is an increment on this (absent: a whole stream). */
  parent: volumeParentSchema.optional(),
}).strict();
export type BackupVolume = z.infer<typeof backupVolumeSchema>;

export const manifestSchema = z.object({
  format: z.union([z.literal(backupFormatPlain), z.literal(backupFormatVolumes), z.literal(backupFormatChunked), z.literal(backupFormat)]),
  id: z.string().regex(backupIdPattern),
  clusterId: z.string().min(1).max(128),
  featureLevel: z.number().int().min(1),
  /** Unix milliseconds. */
  createdAt: z.number().int().min(0),
  index: z.number().int().min(0),
  term: z.number().int().min(0),
  /** The software version that wrote it. */
  writtenBy: z.string().max(64),
  /** null: files stored as they are; else the data key, sealed to the recovery key `recoveryKeyId`. */
  encryption: z.object({ alg: z.literal(encryptionAlgorithm), recoveryKeyId: z.string().regex(/^[0-9a-f]{16}$/), dataKey: wrappedKeySchema }).strict().nullable(),
  files: z.array(backupFileSchema).min(1).max(64),
  /** The replicated volumes, each with its stream's file (format 2); empty in format 1. */
  volumes: z.array(backupVolumeSchema).max(64),
}).strict().superRefine((m, ctx) => {
  if (m.format === backupFormatPlain && m.volumes.length > 0) ctx.addIssue({ code: 'custom', path: ['volumes'], message: 'format 1 lists no volumes' });
  m.files.forEach((f, i) => {
    if (f.encoding === 'chunked' && (m.format < backupFormatChunked || m.encryption === null)) ctx.addIssue({ code: 'custom', path: ['files', i, 'encoding'], message: 'only an encrypted backup of format 3 has chunked files' });
  });
  m.volumes.forEach((v, i) => {
    const problem = volumeEntryProblem(m.id, m.format, v);
    if (problem !== null) ctx.addIssue({ code: 'custom', path: ['volumes', i], message: problem });
    if (v.file !== null && !m.files.some((f) => f.name === v.file)) ctx.addIssue({ code: 'custom', path: ['volumes', i, 'file'], message: `${v.file} is not among the files` });
  });
});
export type BackupManifest = z.infer<typeof manifestSchema>;

/** What is wrong with a volume's entry in manifest `id` of `format`, or null. */
function volumeEntryProblem(id: string, format: number, v: BackupVolume): string | null {
  if (v.parent === undefined) return (v.version === null) !== (v.file === null) ? 'a volume has both a version and a file, or neither' : null;
  if (format < backupFormat) return `a volume with a parent is format ${backupFormat}`;
  if (v.version === null) return 'a volume with no version has no parent';
  if (v.parent.backupId >= id) return `its parent ${v.parent.backupId} is not older than the backup`;
  // No file: the parent's version, unchanged; a file: an increment on an older version.
  if (v.file === null && v.parent.version !== v.version) return `no file, so it holds its parent's version ${v.parent.version}, not ${v.version}`;
  if (v.file !== null && v.parent.version === v.version) return `its stream is an increment on the version it holds (${v.version})`;
  return null;
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function backupIdOf(at: Date, index: number): string {
  const time = at.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}Z$/, 'Z');
  return `${time}-${String(index).padStart(12, '0')}`;
}

/** The time a backup id names (UTC, seconds), as Unix milliseconds. */
export function backupIdTime(id: string): number {
  const t = id.slice(0, 15);
  return Date.UTC(Number(t.slice(0, 4)), Number(t.slice(4, 6)) - 1, Number(t.slice(6, 8)), Number(t.slice(9, 11)), Number(t.slice(11, 13)), Number(t.slice(13, 15)));
}

const aad = (id: string, file: string): Buffer => Buffer.from(`shoal backup ${id}/${file}`);
const ivBytes = 12;

function encryptFile(key: Buffer, id: string, file: string, plain: Uint8Array): Buffer {
  const iv = randomBytes(ivBytes);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(aad(id, file));
  return Buffer.concat([iv, c.update(plain), c.final(), c.getAuthTag()]);
}

/** What a backup is, apart from its files. */
export interface BackupHeader {
  id: string;
  clusterId: string;
  featureLevel: number;
  createdAt: number;
  index: number;
  term: number;
  writtenBy: string;
}

export interface BackupContent extends BackupHeader {
  /** The files, in the clear, by name (store.snap, keys.json, the volumes' streams). */
  files: { name: string; bytes: Uint8Array }[];
  /** The replicated volumes (their `file`s are among `files`); absent: none. */
  volumes?: BackupVolume[];
}

/** How the files of one backup are stored: in the clear, or encrypted under a fresh data key sealed to the recovery key. */
export interface BackupSeal {
  readonly encryption: BackupManifest['encryption'];
  /** A small file as stored (the `whole` encoding when encrypted). */
  whole(name: string, plain: Uint8Array): Uint8Array;
  /** A large file as stored, as it flows (the `chunked` encoding when encrypted), and that encoding. */
  stream(name: string, plain: AsyncIterable<Uint8Array>): { body: AsyncIterable<Uint8Array>; encoding?: 'chunked' };
  /** Forgets the data key (zeroed); a stream still flowing then fails. */
  close(): void;
}

export function openSeal(id: string, recovery: PublicClusterKey | null): BackupSeal {
  if (recovery === null) return { encryption: null, whole: (_n, plain) => plain, stream: (_n, plain) => ({ body: plain }), close: () => undefined };
  const key = randomBytes(32);
  let closed = false;
  const encryption = { alg: encryptionAlgorithm, recoveryKeyId: recovery.id, dataKey: wrapDataKey(key, `backup ${id}`, recovery) } as const;
  // A chunk sealed after close() would be sealed with a zeroed key: it is never handed out.
  async function* sealed(name: string, plain: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    for await (const chunk of through(plain, new ChunkSealer(key, id, name))) {
      if (closed) throw new Error(`${name}: the backup's data key was forgotten while the file was written`);
      yield chunk;
    }
  }
  return {
    encryption,
    whole: (name, plain) => {
      if (closed) throw new Error(`${name}: the backup's data key was forgotten`);
      return encryptFile(key, id, name, plain);
    },
    stream: (name, plain) => ({ body: sealed(name, plain), encoding: 'chunked' }),
    close: () => {
      closed = true;
      key.fill(0);
    },
  };
}

/** The manifest of a backup whose files were stored as `files` say; its format the oldest that holds them. */
export function manifestOf(h: BackupHeader, encryption: BackupManifest['encryption'], files: readonly BackupFile[], volumes: readonly BackupVolume[]): BackupManifest {
  const format = volumes.some((v) => v.parent !== undefined) ? backupFormat
    : files.some((f) => f.encoding === 'chunked') ? backupFormatChunked : volumes.length > 0 ? backupFormatVolumes : backupFormatPlain;
  return manifestSchema.parse({
    format, id: h.id, clusterId: h.clusterId, featureLevel: h.featureLevel, createdAt: h.createdAt, index: h.index, term: h.term, writtenBy: h.writtenBy,
    encryption, files: files.map((f) => ({ ...f })), volumes: [...volumes],
  });
}

/** The files to store, every one whole (encrypted to `recovery` when given), and the manifest that lists them. */
export function sealBackup(content: BackupContent, recovery: PublicClusterKey | null): { manifest: BackupManifest; files: { name: string; bytes: Uint8Array }[] } {
  const seal = openSeal(content.id, recovery);
  try {
    const files = content.files.map((f) => ({ name: f.name, bytes: seal.whole(f.name, f.bytes) }));
    const manifest = manifestOf(content, seal.encryption, files.map((f) => ({ name: f.name, bytes: f.bytes.length, sha256: sha256(f.bytes) })), content.volumes ?? []);
    return { manifest, files };
  } finally {
    seal.close();
  }
}

export function encodeManifest(m: BackupManifest): Uint8Array {
  return Buffer.from(`${JSON.stringify(m, null, 2)}\n`);
}

/** The manifest in `bytes`, or a reason it is not one. */
export function decodeManifest(bytes: Uint8Array): { manifest: BackupManifest } | { problem: string } {
  if (bytes.length > manifestBytesMax) return { problem: `it is ${bytes.length} bytes, more than ${manifestBytesMax}` };
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    return { problem: `it is not JSON (${(err as Error).message})` };
  }
  const format = typeof json === 'object' && json !== null ? (json as { format?: unknown }).format : undefined;
  if (typeof format === 'number' && format > backupFormat) {
    const by = (json as { writtenBy?: unknown }).writtenBy;
    return { problem: `format ${format}, written by ${typeof by === 'string' ? `shoal ${by}` : 'a newer release'}; this release reads formats 1 to ${backupFormat}: read it with that release or a newer one` };
  }
  const r = manifestSchema.safeParse(json);
  if (!r.success) return { problem: r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') };
  return { manifest: r.data };
}

/** The backup's data key, opened by `recoveryKey`; null for an unencrypted backup. The caller zeroes it. */
export function openDataKey(m: BackupManifest, recoveryKey: KeyObject | undefined): Buffer | null {
  if (m.encryption === null) return null;
  if (recoveryKey === undefined) throw new Error(`backup ${m.id} is encrypted to recovery key ${m.encryption.recoveryKeyId}: give the recovery key`);
  return unwrapDataKey(m.encryption.dataKey, `backup ${m.id}`, recoveryKey);
}

/** The step that turns file `name` as stored into the clear, by its encoding (`key` null: stored in the clear). */
export function openerOf(m: BackupManifest, name: string, key: Buffer | null): ByteStep {
  if (key === null) return passThrough();
  const entry = m.files.find((f) => f.name === name);
  return entry?.encoding === 'chunked' ? new ChunkOpener(key, m.id, name) : new WholeOpener(key, m.id, name);
}

/** A stored file in the clear: decrypted with the data key opened by `recoveryKey` when the backup is encrypted. */
export function openBackupFile(m: BackupManifest, name: string, stored: Uint8Array, recoveryKey: KeyObject | undefined): Uint8Array {
  const key = openDataKey(m, recoveryKey);
  if (key === null) return stored;
  try {
    const step = openerOf(m, name, key);
    return Buffer.concat([...step.push(stored), ...step.end()]);
  } finally {
    key.fill(0);
  }
}

export interface RetentionPolicy {
  keepDaily: number;
  keepWeekly: number;
}

/**
 * The backups to keep: the newest of each of the last `keepDaily` UTC days that have one, and
 * the newest of each of the last `keepWeekly` ISO weeks (Monday first) that have one, and always
 * the newest. Pure: `ids` are backup ids (they name their time).
 */
export function backupsToKeep(ids: readonly string[], policy: RetentionPolicy): Set<string> {
  const sorted = [...ids].sort().reverse();
  const keep = new Set<string>(sorted.slice(0, 1));
  const pick = (bucket: (t: number) => string, n: number): void => {
    const seen = new Set<string>();
    for (const id of sorted) {
      const b = bucket(backupIdTime(id));
      if (seen.has(b)) continue;
      if (seen.size >= n) break;
      seen.add(b);
      keep.add(id);
    }
  };
  const day = (t: number): string => new Date(t).toISOString().slice(0, 10);
  // The Monday of the week, in days since the epoch (1970-01-01 was a Thursday).
  const week = (t: number): string => String(Math.floor((Math.floor(t / 86_400_000) + 3) / 7));
  pick(day, policy.keepDaily);
  pick(week, policy.keepWeekly);
  return keep;
}
