// Backups off the cluster (src/node/backup/; docs/operations.md, "Backups"). Targets are records in
// the store; an SFTP password or private key goes in (PUT) and never comes out: it is a secret of
// its own (`backup-target-<name>`), sealed as a workload secret is, written in the same
// transaction as the target. Backups are taken, listed and verified by the node asked: a
// directory target is a path on that node; an SFTP credential opens only on a voter.
//
//   PUT    /v1/backup-targets/{name}   add or change a target
//   GET    /v1/backup-targets          every target, with the outcome of its last backup
//   DELETE /v1/backup-targets/{name}   remove a target (its backups stay where they are)
//   POST   /v1/backups                 {target?}: take a backup now
//   GET    /v1/backups?target=T        the backups on a target
//   POST   /v1/backups/{id}/verify     {target?}: read it back whole and check every digest

import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { verifyBackup, listBackups } from '../node/backup/backup-store.ts';
import type { TargetIo } from '../node/backup/target-io.ts';
import { parseS3Url, s3Advice, S3Error, s3RegionDefault, s3Url, type S3Location } from '../node/backup/s3-io.ts';
import { readStatus, readTarget, readTargets, type BackupRunner } from '../node/backup/backup-runner.ts';
import { backupIdPattern } from '../node/backup/backup-format.ts';
import {
  backupTargetNamePattern, backupTargetSecretName, backupTargetsCollection, describeTarget, keepDailyDefault, keepWeeklyDefault,
  type BackupTarget,
} from '../resources/backup-targets.ts';
import { deleteChange, putChange, type Change } from '../resources/changes.ts';
import { secretsCollection } from '../resources/collections.ts';
import { secretInStore, writeSecret } from '../resources/secrets.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { decideAndWrite } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { noKeyringYet, sealerFor } from './secrets-routes.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export const backupTargetParams = z.object({
  name: z.string().regex(backupTargetNamePattern, 'must be a target name: lower-case letters, digits and -, starting with a letter, at most 32'),
}).strict();

const credentialBytesMax = 16 * 1024;

export const backupTargetBody = z.object({
  dir: z.string().min(2).max(1024).startsWith('/', 'must be an absolute path on the node that takes the backup').optional(),
  sftp: z.object({
    user: z.string().min(1).max(64).regex(/^[A-Za-z0-9._-]+$/),
    host: z.string().min(1).max(253).regex(/^[A-Za-z0-9.:-]+$/),
    port: z.number().int().min(1).max(65535).default(22),
    path: z.string().min(1).max(1024),
    hostKey: z.string().regex(/^SHA256:[A-Za-z0-9+/]{43}$/, 'must be the server\'s host key fingerprint as ssh-keygen -lf prints it: SHA256: and 43 characters'),
    password: z.string().min(1).max(credentialBytesMax).optional(),
    privateKey: z.string().min(1).max(credentialBytesMax).optional(),
  }).strict().optional(),
  s3: z.object({
    url: z.string().min(1).max(1024).refine((u) => typeof parseS3Url(u) !== 'string', { message: 'must be http(s)://HOST[:PORT]/BUCKET[/PREFIX] (path-style)' }),
    accessKeyId: z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'must be the access key id (printable, no spaces)'),
    secretKey: z.string().min(1).max(credentialBytesMax),
    region: z.string().min(1).max(64).regex(/^[a-z0-9-]+$/, 'must be a region name (us-east-1, garage)').default(s3RegionDefault),
    ca: z.string().min(1).max(49_152, 'at most 48 KiB of PEM: the whole request must fit limits.bodyBytesMax (64 KiB)').refine((c) => c.includes('-----BEGIN CERTIFICATE-----'), 'must be PEM certificates').optional(),
  }).strict().optional(),
  encrypt: z.boolean().optional(),
  keepDaily: z.number().int().min(0).max(366).default(keepDailyDefault),
  keepWeekly: z.number().int().min(0).max(520).default(keepWeeklyDefault),
  everyMs: z.number().int().min(0).max(366 * 86_400_000).default(0),
}).strict()
  .refine((b) => [b.dir, b.sftp, b.s3].filter((x) => x !== undefined).length === 1, 'give exactly one of dir, sftp and s3')
  .refine((b) => b.s3 === undefined || b.encrypt !== false, 'an s3 target is outside the homelab: its backups are always encrypted to the recovery key')
  .refine((b) => b.sftp === undefined || (b.sftp.password === undefined) !== (b.sftp.privateKey === undefined), 'an sftp target takes exactly one of password and privateKey')
  .refine((b) => b.sftp === undefined || b.encrypt !== false, 'an sftp target is outside the homelab: its backups are always encrypted to the recovery key')
  .refine((b) => b.everyMs === 0 || b.everyMs >= 60_000, 'everyMs is 0 (no schedule) or at least a minute');

export const backupTargetViewSchema = z.object({
  name: z.string(), where: z.string(), kind: z.enum(['dir', 'sftp', 's3']), encrypt: z.boolean(), keepDaily: z.number().int(), keepWeekly: z.number().int(), everyMs: z.number().int(),
  lastAttemptAt: z.number().int().nullable(), lastSuccessAt: z.number().int().nullable(), lastId: z.string().nullable(), lastError: z.string().nullable(), failures: z.number().int(),
});
export type BackupTargetView = z.infer<typeof backupTargetViewSchema>;

export const backupRunBody = z.object({ target: z.string().regex(backupTargetNamePattern).optional() }).strict();
export const backupListQuery = z.object({ target: z.string().regex(backupTargetNamePattern).optional() }).strict();
export const backupIdParams = z.object({ id: z.string().regex(backupIdPattern, 'must be a backup id as shoal backup ls prints it (YYYYMMDDTHHMMSSZ-INDEX)') }).strict();

function viewOf(ctx: ApiContext, t: BackupTarget): BackupTargetView {
  const s = readStatus(ctx.store, t.name);
  return {
    name: t.name, where: describeTarget(t), kind: t.dir !== undefined ? 'dir' : t.s3 !== undefined ? 's3' : 'sftp', encrypt: t.encrypt, keepDaily: t.keepDaily, keepWeekly: t.keepWeekly, everyMs: t.intervalMs,
    lastAttemptAt: s?.lastAttemptAt ?? null, lastSuccessAt: s?.lastSuccessAt ?? null, lastId: s?.lastId ?? null, lastError: s?.lastError ?? null, failures: s?.failures ?? 0,
  };
}

function runnerOf(ctx: ApiContext): BackupRunner {
  if (ctx.backups === undefined) throw new ShoalError('backup_failed', 'this node takes no backups (it was started without the backup runner); ask another node', { target: null });
  return ctx.backups;
}

/** The target a request names, or the only one there is. */
function targetFor(ctx: ApiContext, name: string | undefined): BackupTarget {
  if (name !== undefined) {
    const t = readTarget(ctx.store, name);
    if (t === undefined) throw new ShoalError('not_found', `no backup target ${name}; list them with: shoal backup target ls`, { target: name });
    return t;
  }
  const all = readTargets(ctx.store);
  if (all.length === 1 && all[0] !== undefined) return all[0];
  throw new ShoalError('bad_request', all.length === 0 ? 'there is no backup target; add one with: shoal backup target add NAME --dir PATH' : `there are ${all.length} backup targets (${all.map((t) => t.name).join(', ')}); name one with --target`);
}

type TargetBody = z.infer<typeof backupTargetBody>;

/** Writes the target and, in the same transaction, its credential as a sealed secret (or removes the old one). */
async function putTarget(ctx: ApiContext, req: FastifyRequest, name: string, b: TargetBody): Promise<{ outcome: 'created' | 'updated'; target: BackupTargetView; rev: number | null }> {
  const credential = b.s3 !== undefined ? Buffer.from(b.s3.secretKey, 'utf8') : b.sftp === undefined ? undefined : Buffer.from(b.sftp.password ?? b.sftp.privateKey ?? '', 'utf8');
  try {
    const w = await decideAndWrite(ctx, req, `adding backup target ${name}`, () => {
      const cur = ctx.store.get(backupTargetsCollection, name);
      const now = ctx.node.logTimeNow();
      const secret = backupTargetSecretName(name);
      const curSecret = ctx.store.get(secretsCollection, secret);
      const changes: Change[] = [];
      let sealed = true;
      if (credential !== undefined) {
        const seal = sealerFor(ctx, secret);
        sealed = seal !== null;
        const next = writeSecret(secret, credential, now, secretInStore(ctx.store, secret), seal);
        if (next !== null) changes.push(putChange(secretsCollection, secret, next, curSecret?.rev ?? null));
      } else if (curSecret !== undefined) changes.push(deleteChange(secretsCollection, secret, curSecret.rev));
      const createdAt = typeof cur?.doc.createdAt === 'number' ? cur.doc.createdAt : now;
      const target: BackupTarget = {
        name, ...(b.dir !== undefined ? { dir: b.dir } : {}),
        ...(b.sftp !== undefined ? { sftp: { user: b.sftp.user, host: b.sftp.host, port: b.sftp.port, path: b.sftp.path, hostKey: b.sftp.hostKey, auth: b.sftp.password !== undefined ? 'password' as const : 'key' as const } } : {}),
        ...(b.s3 !== undefined ? { s3: { url: s3Url(parseS3Url(b.s3.url) as S3Location), accessKeyId: b.s3.accessKeyId, region: b.s3.region, ca: b.s3.ca ?? null } } : {}),
        encrypt: b.sftp !== undefined || b.s3 !== undefined ? true : b.encrypt ?? false, keepDaily: b.keepDaily, keepWeekly: b.keepWeekly, intervalMs: b.everyMs,
        secret: credential !== undefined ? secret : null, createdAt, updatedAt: now,
      };
      changes.push(putChange(backupTargetsCollection, name, target, cur?.rev ?? null));
      return { plan: noKeyringYet({ changes, compares: [] }, sealed), answer: { outcome: cur === undefined ? 'created' as const : 'updated' as const, target } };
    });
    return { outcome: w.answer.outcome, target: viewOf(ctx, w.answer.target), rev: w.rev };
  } finally {
    credential?.fill(0);
  }
}

/** Opens the target, runs `f` on it, and closes it. */
async function onTarget<T>(ctx: ApiContext, t: BackupTarget, f: (io: TargetIo) => Promise<T>): Promise<T> {
  const io = await runnerOf(ctx).open(t);
  try {
    return await f(io);
  } catch (err) {
    // What an S3 server refused (AccessDenied, NoSuchBucket, SignatureDoesNotMatch...), said as it said it.
    if (err instanceof S3Error) throw new ShoalError('backup_failed', `backup target ${t.name} (${describeTarget(t)}): ${err.message}; ${s3Advice(err, t.s3?.accessKeyId ?? '?', t.name)}`, { target: t.name, s3Code: err.code });
    throw err;
  } finally {
    await io.close();
  }
}

export const backupRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.put('/v1/backup-targets/:name', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ params: [backupTargetParams, req.params], query: [noQuery, req.query], body: [backupTargetBody, req.body] });
    return await putTarget(ctx, req, v.params.name, v.body);
  });

  app.get('/v1/backup-targets', { config: { role: 'reader' } }, async (req) => {
    validate({ query: [noQuery, req.query] });
    await ctx.node.readBarrier();
    return { items: readTargets(ctx.store).sort((a, b) => compareText(a.name, b.name)).map((t) => viewOf(ctx, t)) };
  });

  app.delete('/v1/backup-targets/:name', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ params: [backupTargetParams, req.params], query: [noQuery, req.query] });
    const name = v.params.name;
    const w = await decideAndWrite(ctx, req, `removing backup target ${name}`, () => {
      const cur = ctx.store.get(backupTargetsCollection, name);
      if (cur === undefined) throw new ShoalError('not_found', `no backup target ${name}; list them with: shoal backup target ls`, { target: name });
      const changes = [deleteChange(backupTargetsCollection, name, cur.rev)];
      const secret = ctx.store.get(secretsCollection, backupTargetSecretName(name));
      if (secret !== undefined) changes.push(deleteChange(secretsCollection, backupTargetSecretName(name), secret.rev));
      return { plan: { changes, compares: [] }, answer: null };
    });
    return { name, removed: true, rev: w.rev };
  });

  app.post('/v1/backups', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [backupRunBody, req.body ?? {}] });
    await ctx.node.readBarrier();
    const t = targetFor(ctx, v.body.target);
    return await runnerOf(ctx).run(t.name);
  });

  app.get('/v1/backups', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [backupListQuery, req.query] });
    await ctx.node.readBarrier();
    const t = targetFor(ctx, v.query.target);
    return await onTarget(ctx, t, async (io) => {
      const items = (await listBackups(io)).map((b) => ({
        id: b.id, ok: b.manifest !== undefined, problem: b.problem ?? null,
        clusterId: b.manifest?.clusterId ?? null, createdAt: b.manifest?.createdAt ?? null, index: b.manifest?.index ?? null,
        bytes: b.manifest?.files.reduce((n, f) => n + f.bytes, 0) ?? null, encrypted: b.manifest === undefined ? null : b.manifest.encryption !== null,
      }));
      return { target: t.name, where: describeTarget(t), items };
    });
  });

  app.post('/v1/backups/:id/verify', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [backupIdParams, req.params], query: [noQuery, req.query], body: [backupRunBody, req.body ?? {}] });
    await ctx.node.readBarrier();
    const t = targetFor(ctx, v.body.target);
    return await onTarget(ctx, t, async (io) => {
      const r = await verifyBackup(io, v.params.id);
      if (!r.ok) {
        throw new ShoalError('backup_damaged', `backup ${r.id} on ${t.name} is damaged: ${r.problems.map((p) => `${p.file}: ${p.problem}`).join('; ')}`, { target: t.name, id: r.id, problems: r.problems, ...(r.missing !== undefined && r.missing.length > 0 ? { missing: r.missing } : {}) });
      }
      return { target: t.name, id: r.id, ok: true, bytes: r.bytes, files: r.manifest?.files.length ?? 0, volumes: r.manifest?.volumes.filter((v) => v.file !== null).length ?? 0, clusterId: r.manifest?.clusterId ?? null, index: r.manifest?.index ?? null };
    });
  });
};
