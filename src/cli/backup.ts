// shoal backup: backups off the cluster (docs/operations.md, "Backups"). Targets (a directory on
// the node, a NAS mount; an SFTP server) are kept in the store; `now` takes a backup on the node
// asked, `ls` lists a target's backups, `verify` reads one back whole and checks every digest.
// Restoring is `shoal restore` (restore.ts): it runs where no cluster is left.

import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { parseDuration } from '../resources/spec/quantity.ts';
import { keepDailyDefault, keepWeeklyDefault } from '../resources/backup-targets.ts';
import { parseS3Url } from '../node/backup/s3-io.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, request, resolveAddr, retryNotice } from './client.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';

/** A backup is taken and read back whole by the node: a large store takes a while. */
const backupTimeoutMs = 10 * 60_000;

const targetViewSchema = z.object({
  name: z.string(), where: z.string(), kind: z.string(), encrypt: z.boolean(), keepDaily: z.number(), keepWeekly: z.number(), everyMs: z.number(),
  lastAttemptAt: z.number().nullable(), lastSuccessAt: z.number().nullable(), lastId: z.string().nullable(), lastError: z.string().nullable(), failures: z.number(),
}).loose();
const targetWrittenSchema = z.object({ outcome: z.string(), target: targetViewSchema, rev: z.number().nullable() }).loose();
const targetListSchema = z.object({ items: z.array(targetViewSchema) }).loose();
const removedSchema = z.object({ name: z.string(), removed: z.boolean() }).loose();
const runSchema = z.object({ target: z.string(), id: z.string(), index: z.number(), bytes: z.number(), encrypted: z.boolean(), pruned: z.array(z.string()), volumes: z.array(z.object({ name: z.string(), version: z.string().nullable(), bytes: z.number(), parent: z.object({ backupId: z.string(), version: z.string() }).nullable().optional() })).optional() }).loose();
const listSchema = z.object({
  target: z.string(), where: z.string(),
  items: z.array(z.object({ id: z.string(), ok: z.boolean(), problem: z.string().nullable(), clusterId: z.string().nullable(), createdAt: z.number().nullable(), index: z.number().nullable(), bytes: z.number().nullable(), encrypted: z.boolean().nullable() }).loose()),
}).loose();
const verifySchema = z.object({ target: z.string(), id: z.string(), ok: z.boolean(), bytes: z.number(), files: z.number(), volumes: z.number().optional() }).loose();

export const backupTargetAddHelp = `Usage: shoal backup target add NAME (--dir PATH [--encrypt] | --sftp USER@HOST:PATH --host-key SHA256:...
                              [--port N] (--password-stdin | --key-file FILE)
                              | --s3 http(s)://HOST[:PORT]/BUCKET[/PREFIX] --access-key-id ID
                              (--secret-key-stdin | --secret-key-file FILE) [--region R] [--ca-file FILE])
                              [--every DURATION] [--keep-daily N] [--keep-weekly N] [--addr HOST:PORT] [--json]

Adds (or replaces) a backup target: where 'shoal backup now' and the schedule write backups.

  --dir PATH          a directory on the node that takes the backup (a NAS mount); absolute
  --encrypt           encrypt a --dir target's backups to the recovery key (a NAS outside the house)
  --sftp USER@HOST:PATH  an SFTP server (OpenSSH); PATH absolute or under USER's home. Its backups
                      are always encrypted to the recovery key: only the recovery key reads them.
  --host-key SHA256:..  the server's host key, as 'ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub'
                      prints it there; any other key is refused
  --port N            the SFTP port (default 22)
  --password-stdin    the SFTP password, from standard input
  --key-file FILE     a private key (OpenSSH or PEM, without a passphrase) for the SFTP user
  --s3 URL            an S3-compatible bucket, path-style (MinIO, Garage, SeaweedFS):
                      http(s)://HOST[:PORT]/BUCKET[/PREFIX]; the bucket must exist. Its backups are
                      always encrypted to the recovery key. S3 has no rename: every file of a
                      backup is written first and its manifest last, so one cut off is listed as
                      DAMAGED, never as good
  --access-key-id ID  the S3 access key id
  --secret-key-stdin  the S3 secret access key, from standard input
  --secret-key-file FILE  or from a file
  --region R          the region the requests are signed for (default us-east-1; Garage: its s3_region)
  --ca-file FILE      PEM CA certificates to trust for an https:// server (a self-signed MinIO)
  --every DURATION    take a backup this often on the leader (24h, 6h, 30m; at least 1m); default:
                      none, only 'shoal backup now'
  --keep-daily N      keep the newest backup of each of the last N days (default ${keepDailyDefault})
  --keep-weekly N     and of each of the last N weeks (default ${keepWeeklyDefault}); the newest is always kept
${commonFlagsHelp}

The password, key or S3 secret key is stored as a secret (encrypted at rest), never shown again;
only a voter can open it, so an SFTP or S3 backup is taken on a voter. The cluster needs a recovery key for an
encrypted target ('shoal secret recovery-key'). With --json prints {outcome, target, rev}
(PUT /v1/backup-targets/NAME).
${clientExitCodes}`;

export const backupTargetLsHelp = `Usage: shoal backup target ls [--addr HOST:PORT] [--json]

Lists the backup targets: where each writes, its schedule and retention, and the outcome of its
last backup (the last good one, the last error, failures since).

Options:
${commonFlagsHelp}

With --json prints {items: [{name, where, kind, encrypt, keepDaily, keepWeekly, everyMs, lastAttemptAt,
lastSuccessAt, lastId, lastError, failures}]} (GET /v1/backup-targets).
${clientExitCodes}`;

export const backupTargetRmHelp = `Usage: shoal backup target rm NAME [--addr HOST:PORT] [--json]

Removes a backup target and its stored credential. The backups already on it are left there.

Options:
${commonFlagsHelp}

With --json prints {name, removed, rev} (DELETE /v1/backup-targets/NAME).
${clientExitCodes} No such target exits 1 (not_found).`;

export const backupNowHelp = `Usage: shoal backup now [--target NAME] [--addr HOST:PORT] [--json]

Takes a backup now, on the node at --addr, to NAME (or the only target): the store's snapshot
after a read barrier (secrets in it stay encrypted), the cluster keys sealed to the recovery key,
the newest complete copy of every replicated volume as a btrfs send stream (asked of a node
holding it; a volume no node can send fails the backup): an increment on the version the newest
backup on the target holds, or whole when there is none, its chain cannot be followed, would
span more than 7 backups, or the holder no longer has that version; and a manifest with every
file's size and SHA-256; written to a temporary directory and renamed
when complete, so a backup cut off is never listed. Then the target's retention is applied; it
never removes a backup that a kept backup's chain needs. A directory target is a path on that node.

Options:
  --target NAME      the target (required when there are several)
${commonFlagsHelp}

With --json prints {target, id, index, bytes, encrypted, pruned, keptForChains, volumes: [{name,
version, bytes, parent}]} (POST /v1/backups); parent is {backupId, version} for an increment, null
for a whole stream.
${clientExitCodes} A backup that could not be written exits 1 (backup_failed; the message says why).`;

export const backupLsHelp = `Usage: shoal backup ls [--target NAME] [--addr HOST:PORT] [--json]

Lists the backups on a target, oldest first, from their manifests (read 'shoal backup verify' to
read one whole). A directory under a backup's name whose manifest is missing or damaged is listed
as DAMAGED, never as good.

Options:
  --target NAME      the target (required when there are several)
${commonFlagsHelp}

With --json prints {target, where, items: [{id, ok, problem, clusterId, createdAt, index, bytes, encrypted}]}
(GET /v1/backups?target=NAME).
${clientExitCodes}`;

export const backupVerifyHelp = `Usage: shoal backup verify ID [--target NAME] [--addr HOST:PORT] [--json]

Reads every file of backup ID back from its target, as it flows (a volume stream is never held
whole in memory), and checks each one's size and SHA-256 against the manifest. A damaged or missing file is named. Needs no key: the digests are of the files as stored.
A volume stream that is an increment needs its chain: every older backup of it must be on the
target and sound, and its stream files are read and checked too (a missing one is named, in
details.missing).

Options:
  --target NAME      the target (required when there are several)
${commonFlagsHelp}

With --json prints {target, id, ok, bytes, files, volumes} (POST /v1/backups/ID/verify); volumes
counts the replicated volumes' streams among the files (each a btrfs send stream, checked the same way).
${clientExitCodes} A damaged backup exits 1 (backup_damaged; details.problems names each file).`;

export const backupTargetGroup: Group = {
  name: 'backup target',
  about: 'Where backups go: a directory on the node (a NAS mount), an SFTP server or an S3-compatible bucket.',
  subcommands: {
    add: { summary: 'add or replace a backup target', help: backupTargetAddHelp, run: targetAddCommand },
    ls: { summary: 'list backup targets and their last backup', help: backupTargetLsHelp, run: targetLsCommand },
    rm: { summary: 'remove a backup target (its backups stay)', help: backupTargetRmHelp, run: targetRmCommand },
  },
};

export const backupGroup: Group = {
  name: 'backup',
  about: `Backups off the cluster, to a NAS directory, an SFTP server or an S3-compatible bucket, on
demand or on a schedule; restore one onto new machines with 'shoal restore'. docs/operations.md ("Backups").`,
  subcommands: {
    target: { summary: 'add, ls, rm: where backups go', help: groupHelp(backupTargetGroup), run: (argv) => runGroup(backupTargetGroup, argv) },
    now: { summary: 'take a backup now', help: backupNowHelp, run: nowCommand },
    ls: { summary: 'list the backups on a target', help: backupLsHelp, run: lsCommand },
    verify: { summary: 'read a backup back and check every digest', help: backupVerifyHelp, run: verifyCommand },
  },
};

export const backupGroupHelp = groupHelp(backupGroup);

export function backupCommand(argv: string[]): Promise<number> {
  return runGroup(backupGroup, argv);
}

const count = (text: string | undefined, flag: string, dflt: number): number => {
  if (text === undefined) return dflt;
  if (!/^\d{1,3}$/.test(text)) throw new UsageError(`${flag} takes a number of backups (0-999), not '${text}'`);
  return Number(text);
};

async function stdinText(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

/** `USER@HOST:PATH` (HOST may be [v6]). */
export function parseSftpLocation(text: string): { user: string; host: string; path: string } {
  const m = /^([A-Za-z0-9._-]+)@(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(.+)$/.exec(text);
  if (m === null) throw new UsageError(`--sftp takes USER@HOST:PATH (backup@nas.lan:/srv/backups), not '${text}'`);
  return { user: m[1] ?? '', host: (m[2] ?? '').replace(/^\[|\]$/g, ''), path: m[3] ?? '' };
}

async function targetAddCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, dir: { type: 'string' }, encrypt: { type: 'boolean', default: false }, sftp: { type: 'string' }, 'host-key': { type: 'string' }, port: { type: 'string' },
    'password-stdin': { type: 'boolean', default: false }, 'key-file': { type: 'string' }, every: { type: 'string' }, 'keep-daily': { type: 'string' }, 'keep-weekly': { type: 'string' },
    s3: { type: 'string' }, 'access-key-id': { type: 'string' }, 'secret-key-stdin': { type: 'boolean', default: false }, 'secret-key-file': { type: 'string' }, region: { type: 'string' }, 'ca-file': { type: 'string' },
  }, backupTargetAddHelp);
  if (values.help) return help(backupTargetAddHelp);
  const [name, ...extra] = positionals;
  if (name === undefined || extra.length > 0) throw new UsageError('expected one NAME');
  if ([values.dir, values.sftp, values.s3].filter((x) => x !== undefined).length !== 1) throw new UsageError('give exactly one of --dir PATH, --sftp USER@HOST:PATH and --s3 http(s)://HOST[:PORT]/BUCKET[/PREFIX]');
  let everyMs = 0;
  if (values.every !== undefined) {
    const d = parseDuration(values.every);
    if (!d.ok) throw new UsageError(`--every takes a duration (24h, 30m), not '${values.every}'`);
    everyMs = d.value;
  }
  const body: Record<string, unknown> = { keepDaily: count(values['keep-daily'], '--keep-daily', keepDailyDefault), keepWeekly: count(values['keep-weekly'], '--keep-weekly', keepWeeklyDefault), everyMs };
  if (values.dir !== undefined) {
    body.dir = values.dir;
    body.encrypt = values.encrypt;
  } else if (values.s3 !== undefined) {
    const loc = parseS3Url(values.s3);
    if (typeof loc === 'string') throw new UsageError(`--s3 ${loc}`);
    if (values['access-key-id'] === undefined) throw new UsageError('an S3 target needs --access-key-id ID');
    if (values['secret-key-stdin'] === (values['secret-key-file'] !== undefined)) throw new UsageError('give exactly one of --secret-key-stdin and --secret-key-file FILE');
    let secretKey: string;
    let ca: string | undefined;
    try {
      secretKey = values['secret-key-file'] !== undefined ? (await readFile(values['secret-key-file'], 'utf8')).trim() : (await stdinText()).trim();
      if (values['ca-file'] !== undefined) ca = await readFile(values['ca-file'], 'utf8');
    } catch (err) {
      throw new CliFailure(`${(err as Error).message}; nothing was changed`, exitCodes.failed);
    }
    if (secretKey === '') throw new UsageError('the S3 secret key is empty');
    body.s3 = { url: values.s3, accessKeyId: values['access-key-id'], secretKey, ...(values.region !== undefined ? { region: values.region } : {}), ...(ca !== undefined ? { ca } : {}) };
  } else {
    const loc = parseSftpLocation(values.sftp ?? '');
    if (values['host-key'] === undefined) throw new UsageError('an SFTP target needs --host-key SHA256:... (ssh-keygen -lf on the server\'s host key)');
    if (values['password-stdin'] === (values['key-file'] !== undefined)) throw new UsageError('give exactly one of --password-stdin and --key-file FILE');
    let secret: Record<string, string>;
    if (values['key-file'] !== undefined) {
      try {
        secret = { privateKey: await readFile(values['key-file'], 'utf8') };
      } catch (err) {
        throw new CliFailure(`cannot read ${values['key-file']}: ${(err as Error).message}; nothing was changed`, exitCodes.failed);
      }
    } else secret = { password: await stdinText() };
    const port = values.port === undefined ? 22 : Number(values.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--port takes a port number, not '${values.port}'`);
    body.sftp = { ...loc, port, hostKey: values['host-key'], ...secret };
  }
  const { body: out } = await request(resolveAddr(values.addr), 'PUT', `/v1/backup-targets/${encodeURIComponent(name)}`, targetWrittenSchema, { body, retry: 'not-applied', onRetry: retryNotice('backup target add') });
  if (values.json) console.log(JSON.stringify(out, null, 2));
  else console.log(`backup target ${out.target.name} ${out.outcome}: ${out.target.where}${out.target.encrypt ? ', encrypted to the recovery key' : ''}; ${out.target.everyMs > 0 ? `every ${out.target.everyMs / 60_000} min` : 'no schedule (shoal backup now)'}; keeping ${out.target.keepDaily} daily, ${out.target.keepWeekly} weekly`);
  return exitCodes.ok;
}

async function targetLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, backupTargetLsHelp);
  if (values.help) return help(backupTargetLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const { body } = await request(resolveAddr(values.addr), 'GET', '/v1/backup-targets', targetListSchema, { retry: 'safe', onRetry: retryNotice('backup target ls') });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else if (body.items.length === 0) console.log('no backup targets; add one with: shoal backup target add NAME --dir PATH');
  else {
    console.log(tableText(['NAME', 'WHERE', 'EVERY', 'KEEP', 'LAST GOOD', 'LAST ERROR'], body.items.map((t) => [
      t.name, t.where, t.everyMs > 0 ? `${t.everyMs / 60_000}m` : '-', `${t.keepDaily}d ${t.keepWeekly}w`,
      t.lastSuccessAt === null ? 'never' : `${t.lastId ?? ''} (${new Date(t.lastSuccessAt).toISOString()})`, t.failures > 0 ? `${t.failures}x: ${t.lastError ?? ''}` : '-',
    ])));
  }
  return exitCodes.ok;
}

async function targetRmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, backupTargetRmHelp);
  if (values.help) return help(backupTargetRmHelp);
  const [name, ...extra] = positionals;
  if (name === undefined || extra.length > 0) throw new UsageError('expected one NAME');
  const { body } = await request(resolveAddr(values.addr), 'DELETE', `/v1/backup-targets/${encodeURIComponent(name)}`, removedSchema, { retry: 'not-applied', onRetry: retryNotice('backup target rm') });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`backup target ${body.name} removed; its backups were left where they are`);
  return exitCodes.ok;
}

const targetFlags = { ...commonFlags, target: { type: 'string' } } as const;

async function nowCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, targetFlags, backupNowHelp);
  if (values.help) return help(backupNowHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const { body } = await request(resolveAddr(values.addr), 'POST', '/v1/backups', runSchema, { body: values.target === undefined ? {} : { target: values.target }, timeoutMs: backupTimeoutMs });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`backup ${body.id} written to ${body.target}: ${body.bytes} bytes, index ${body.index}${body.encrypted ? ', encrypted to the recovery key' : ''}${body.pruned.length > 0 ? `; removed by retention: ${body.pruned.join(', ')}` : ''}`);
  for (const v of (values.json ? [] : body.volumes ?? [])) console.log(`  volume ${v.name}: ${v.version === null ? 'no complete copy yet (a restore starts it empty)' : `${v.version}, ${v.bytes} bytes${v.parent === undefined || v.parent === null ? '' : ` (an increment on ${v.parent.version} in ${v.parent.backupId})`}`}`);
  return exitCodes.ok;
}

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, targetFlags, backupLsHelp);
  if (values.help) return help(backupLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const { body } = await request(resolveAddr(values.addr), 'GET', '/v1/backups', listSchema, { query: { target: values.target }, retry: 'safe', timeoutMs: backupTimeoutMs });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else if (body.items.length === 0) console.log(`no backups on ${body.target} (${body.where}); take one with: shoal backup now --target ${body.target}`);
  else {
    console.log(tableText(['ID', 'CLUSTER', 'INDEX', 'CREATED', 'BYTES', 'STATE'], body.items.map((b) => [
      b.id, b.clusterId ?? '-', b.index === null ? '-' : String(b.index), b.createdAt === null ? '-' : new Date(b.createdAt).toISOString(), b.bytes === null ? '-' : String(b.bytes),
      b.ok ? (b.encrypted === true ? 'ok, encrypted' : 'ok') : `DAMAGED: ${b.problem ?? ''}`,
    ])));
  }
  return exitCodes.ok;
}

async function verifyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, targetFlags, backupVerifyHelp);
  if (values.help) return help(backupVerifyHelp);
  const [id, ...extra] = positionals;
  if (id === undefined || extra.length > 0) throw new UsageError('expected one backup ID (shoal backup ls)');
  const { body } = await request(resolveAddr(values.addr), 'POST', `/v1/backups/${encodeURIComponent(id)}/verify`, verifySchema, { body: values.target === undefined ? {} : { target: values.target }, timeoutMs: backupTimeoutMs });
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else console.log(`backup ${body.id} on ${body.target} is sound: ${body.files} files${body.volumes !== undefined && body.volumes > 0 ? ` (${body.volumes} volume streams)` : ''}, ${body.bytes} bytes read back, every digest matches`);
  return exitCodes.ok;
}
