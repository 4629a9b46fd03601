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
//                        whole `btrfs send` stream (never an increment: see docs/operations.md)
//
// Volumes (issue 43): `volumes` has one entry per replicated volume: its record's settings, the
// version the stream holds and the stream's file (listed in `files` too, so verify checks it like
// any other), or version null when no node held a complete copy at the time (it is restored
// empty). Format 2 is a manifest that lists volumes; one without is still written as format 1,
// which every release reads. A reader refuses a format newer than it knows, saying which.

import { createCipheriv, createDecipheriv, createHash, randomBytes, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { unwrapDataKey, wrapDataKey, wrappedKeySchema, type PublicClusterKey } from '../../resources/secret-crypto.ts';

/** The newest format this release writes and reads (2: replicated volumes' streams). */
export const backupFormat = 2;
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
}).strict();
export type BackupFile = z.infer<typeof backupFileSchema>;

/** The stream file of the n-th volume (0-based, by name): a name the file pattern takes, whatever the volume's name. */
export function volumeStreamFileName(n: number): string {
  return `volume-${n + 1}.stream`;
}

export const backupVolumeSchema = z.object({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/),
  service: z.string().min(1).max(63),
  sizeBytes: z.number().int().min(1),
  copies: z.number().int().min(1),
  everyMs: z.number().int().min(1),
  /** The version the stream holds (s<seq>-e<epoch>-<node>); null: no complete copy then, restored empty. */
  version: z.string().regex(/^s[1-9]\d{0,14}-e(0|[1-9]\d{0,14})-[A-Za-z0-9_.-]{1,128}$/).nullable(),
  /** The stream's file, listed in `files`; null with version null. */
  file: z.string().regex(fileNamePattern).nullable(),
}).strict();
export type BackupVolume = z.infer<typeof backupVolumeSchema>;

export const manifestSchema = z.object({
  format: z.union([z.literal(backupFormatPlain), z.literal(backupFormat)]),
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
  m.volumes.forEach((v, i) => {
    if ((v.version === null) !== (v.file === null)) ctx.addIssue({ code: 'custom', path: ['volumes', i], message: 'a volume has both a version and a file, or neither' });
    if (v.file !== null && !m.files.some((f) => f.name === v.file)) ctx.addIssue({ code: 'custom', path: ['volumes', i, 'file'], message: `${v.file} is not among the files` });
  });
});
export type BackupManifest = z.infer<typeof manifestSchema>;

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
const tagBytes = 16;

function encryptFile(key: Buffer, id: string, file: string, plain: Uint8Array): Buffer {
  const iv = randomBytes(ivBytes);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(aad(id, file));
  return Buffer.concat([iv, c.update(plain), c.final(), c.getAuthTag()]);
}

function decryptFile(key: Buffer, id: string, file: string, stored: Uint8Array): Buffer {
  if (stored.length < ivBytes + tagBytes) throw new Error('shorter than an IV and a tag');
  const buf = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  const d = createDecipheriv('aes-256-gcm', key, buf.subarray(0, ivBytes));
  d.setAAD(aad(id, file));
  d.setAuthTag(buf.subarray(buf.length - tagBytes));
  return Buffer.concat([d.update(buf.subarray(ivBytes, buf.length - tagBytes)), d.final()]);
}

export interface BackupContent {
  id: string;
  clusterId: string;
  featureLevel: number;
  createdAt: number;
  index: number;
  term: number;
  writtenBy: string;
  /** The files, in the clear, by name (store.snap, keys.json, the volumes' streams). */
  files: { name: string; bytes: Uint8Array }[];
  /** The replicated volumes (their `file`s are among `files`); absent: none. */
  volumes?: BackupVolume[];
}

/** The files to store (encrypted to `recovery` when given) and the manifest that lists them. */
export function sealBackup(content: BackupContent, recovery: PublicClusterKey | null): { manifest: BackupManifest; files: { name: string; bytes: Uint8Array }[] } {
  let encryption: BackupManifest['encryption'] = null;
  let key: Buffer | undefined;
  if (recovery !== null) {
    key = randomBytes(32);
    encryption = { alg: encryptionAlgorithm, recoveryKeyId: recovery.id, dataKey: wrapDataKey(key, `backup ${content.id}`, recovery) };
  }
  try {
    const files = content.files.map((f) => ({ name: f.name, bytes: key === undefined ? f.bytes : encryptFile(key, content.id, f.name, f.bytes) }));
    const manifest: BackupManifest = {
      format: (content.volumes ?? []).length > 0 ? backupFormat : backupFormatPlain, id: content.id, clusterId: content.clusterId, featureLevel: content.featureLevel, createdAt: content.createdAt,
      index: content.index, term: content.term, writtenBy: content.writtenBy, encryption,
      files: files.map((f) => ({ name: f.name, bytes: f.bytes.length, sha256: sha256(f.bytes) })), volumes: content.volumes ?? [],
    };
    return { manifest: manifestSchema.parse(manifest), files };
  } finally {
    key?.fill(0);
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

/** What is wrong with a stored file, or undefined when its size and digest are the manifest's. */
export function fileProblem(entry: BackupFile, stored: Uint8Array | undefined): string | undefined {
  if (stored === undefined) return 'missing';
  if (stored.length !== entry.bytes) return `${stored.length} bytes, the manifest says ${entry.bytes}`;
  const digest = sha256(stored);
  if (digest !== entry.sha256) return `sha256 ${digest.slice(0, 16)}..., the manifest says ${entry.sha256.slice(0, 16)}...`;
  return undefined;
}

/** A stored file in the clear: decrypted with the data key opened by `recoveryKey` when the backup is encrypted. */
export function openBackupFile(m: BackupManifest, name: string, stored: Uint8Array, recoveryKey: KeyObject | undefined): Uint8Array {
  if (m.encryption === null) return stored;
  if (recoveryKey === undefined) throw new Error(`backup ${m.id} is encrypted to recovery key ${m.encryption.recoveryKeyId}: give the recovery key`);
  const key = unwrapDataKey(m.encryption.dataKey, `backup ${m.id}`, recoveryKey);
  try {
    return decryptFile(key, m.id, name, stored);
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
