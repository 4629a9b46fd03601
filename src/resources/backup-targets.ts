// Backup targets (`shoal backup target add NAME ...`; docs/operations.md, "Backups"): where the
// cluster's backups go. A record per target in `shoal.backup-targets/<name>`: a directory on the
// node that takes the backup (a NAS mount), or an SFTP server. An SFTP password or private key is
// a secret of its own in `shoal.secrets` (`backup-target-<name>`), written in the same transaction, so it
// is encrypted at rest like a workload secret; it is never answered.

import { z } from 'zod';

export const backupTargetsCollection = 'shoal.backup-targets';
export const backupTargetNamePattern = /^[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?$/;
/** Retention's defaults: a week of dailies, a month of weeklies. */
export const keepDailyDefault = 7;
export const keepWeeklyDefault = 4;

export const sftpTargetSchema = z.object({
  user: z.string().min(1).max(64).regex(/^[A-Za-z0-9._-]+$/),
  host: z.string().min(1).max(253).regex(/^[A-Za-z0-9.:-]+$/),
  port: z.number().int().min(1).max(65535),
  path: z.string().min(1).max(1024).refine((p) => !p.includes('\0'), 'no NUL'),
  /** The server's host key, SHA256:... as `ssh-keygen -lf` prints it: any other is refused. */
  hostKey: z.string().regex(/^SHA256:[A-Za-z0-9+/]{43}$/),
  auth: z.enum(['password', 'key']),
}).strict();
export type SftpTarget = z.infer<typeof sftpTargetSchema>;

/** An S3-compatible bucket, path-style (MinIO, Garage, SeaweedFS); the secret key is the target's secret. */
export const s3TargetSchema = z.object({
  /** http(s)://HOST[:PORT]/BUCKET[/PREFIX] */
  url: z.string().min(1).max(1024).regex(/^https?:\/\//),
  accessKeyId: z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/),
  region: z.string().min(1).max(64).regex(/^[a-z0-9-]+$/),
  /** PEM CA certificates to trust for https, or null for the system's. */
  ca: z.string().max(65_536).nullable(),
}).strict();
export type S3Target = z.infer<typeof s3TargetSchema>;

export const backupTargetSchema = z.object({
  name: z.string().regex(backupTargetNamePattern),
  /** An absolute directory on the node that takes the backup. */
  dir: z.string().min(1).max(1024).startsWith('/').optional(),
  sftp: sftpTargetSchema.optional(),
  s3: s3TargetSchema.optional(),
  /** Files encrypted to the recovery key (always for SFTP and S3). */
  encrypt: z.boolean(),
  keepDaily: z.number().int().min(0).max(366),
  keepWeekly: z.number().int().min(0).max(520),
  /** How often the leader takes a backup to it (`--every`); 0: only \`shoal backup now\`. */
  intervalMs: z.number().int().min(0).max(366 * 86_400_000),
  /** The secret holding the SFTP password or private key, or null. */
  secret: z.string().nullable(),
  createdAt: z.number().int().min(0),
  updatedAt: z.number().int().min(0),
}).strict().refine((t) => [t.dir, t.sftp, t.s3].filter((x) => x !== undefined).length === 1, 'a target is a dir, an sftp server or an s3 bucket, exactly one');
export type BackupTarget = z.infer<typeof backupTargetSchema>;

/** The outcome of the last backups to a target, in `shoal.backup-status/<name>`: the schedule and the metrics read it on every node. */
export const backupStatusCollection = 'shoal.backup-status';
export const backupStatusSchema = z.object({
  lastAttemptAt: z.number().int().min(0),
  lastSuccessAt: z.number().int().min(0).nullable(),
  lastId: z.string().nullable(),
  lastError: z.string().max(2048).nullable(),
  /** Runs that failed since the last success. */
  failures: z.number().int().min(0),
}).strict();
export type BackupStatus = z.infer<typeof backupStatusSchema>;

export function backupTargetSecretName(name: string): string {
  return `backup-target-${name}`;
}

/** Whether a secret's name is the form targets use: written only by `backup target add`. */
export function isBackupTargetSecretName(name: string): boolean {
  return /^backup-target-[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?$/.test(name);
}

export function describeTarget(t: BackupTarget): string {
  if (t.s3 !== undefined) return t.s3.url;
  return t.dir !== undefined ? t.dir : `sftp://${t.sftp?.user}@${t.sftp?.host}:${t.sftp?.port}${t.sftp?.path.startsWith('/') ? '' : '/~/'}${t.sftp?.path}`;
}
