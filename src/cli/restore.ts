// shoal restore: a backup (shoal backup) onto a machine that has never seen the cluster. It reads
// the backup from its target directly (no cluster is left to ask), checks every digest, opens it
// with the recovery key, and founds a NEW cluster from the store snapshot inside, as
// `shoal snapshot restore` does: a new cluster id, CA and node identity; the services, secrets and
// documents of the backup; the old cluster's credentials and nodes refused by the new CA. More
// nodes join with tokens (shoal token create, shoal join). docs/operations.md, "Backups".

import { createHash, type Hash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { listBackups, verifyBackup, type VerifiedBackup } from '../node/backup/backup-store.ts';
import { isInitialized } from '../node/identity.ts';
import { featureLevelMax } from '../base/feature-level.ts';
import { openBackupFile, openDataKey, openerOf, storeFileName, type BackupFile, type BackupManifest } from '../node/backup/backup-format.ts';
import { through, type ByteStep } from '../node/backup/backup-chunks.ts';
import { describeRestored, volumesRestoreHook, type RestoredVolume } from './restore-volumes.ts';
import { DirTargetIo, SftpTargetIo, type TargetIo } from '../node/backup/target-io.ts';
import { parseS3Url, s3Advice, S3Error, s3RegionDefault, S3TargetIo } from '../node/backup/s3-io.ts';
import { privateKeyOf } from '../resources/secret-crypto.ts';
import { syncDir } from '../storage/sync-dir.ts';
import { parseKeyText, recoveryKeyPrefix } from '../security/unlock-key.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { parseSftpLocation } from './backup.ts';
import { CliFailure } from './client.ts';
import { help } from './doc-common.ts';
import { initApiDefault, initPeerDefault } from './init.ts';
import { snapshotRestoreCommand } from './snapshot.ts';

export const restoreHelp = `Usage: shoal restore --from WHERE [--id ID] (--recovery-key-file FILE | --recovery-key-stdin)
                     --data DIR --name NAME [--api HOST:PORT] [--peer HOST:PORT]
                     [--host-key SHA256:... [--port N] (--password-stdin | --key-file FILE)]
                     [--access-key-id ID (--secret-key-file FILE | --secret-key-stdin) [--region R] [--ca-file FILE]] [--json]

Restores a backup taken by 'shoal backup' onto this machine, which need never have seen the
cluster: it founds a NEW cluster (new cluster id, CA and node identity; the old cluster id is
recorded in DIR/restored-from.json) holding the backup's services, secrets and documents. The
old cluster's credentials and nodes are refused by it. Start the node with
'shoal serve --config DIR/shoal.yaml'; more nodes join with tokens ('shoal token create', then
'shoal join' on each), onto fresh data directories.

Before anything is written, the whole backup is read back and every file's size and SHA-256
checked against its manifest, and every volume stream decrypted, chunk by chunk: a damaged
backup is refused (backup_damaged) with the file named.

Each replicated volume's stream is then read from the target again, decrypted as it flows (never
whole in memory), and received into DIR/volumes/ (btrfs receive: needs root and btrfs-progs;
room for the stream beside the volume) as a complete version held by the new node, and the
volume's record says so. A stream that is an increment on an older backup's (format 4) needs
that backup's chain on the target: each backup of it is read and checked too (a missing one is
named, backup_damaged), and the whole stream is received first, then each increment in order. Its
exclusive service starts on this node, from that version. A volume the backup holds no copy of
starts empty.

  --from WHERE          the target: a directory (the NAS mount), USER@HOST:PATH for SFTP, or
                        http(s)://HOST[:PORT]/BUCKET[/PREFIX] for an S3-compatible bucket
  --id ID               the backup (default: the newest sound one; shoal backup ls lists them)
  --recovery-key-file FILE  the old cluster's recovery key (printed by shoal init or made by
  --recovery-key-stdin      shoal secret recovery-key); it opens an encrypted backup and the
                        cluster keys of the secrets. Never taken from the command line.
  --data DIR            data directory for the new node; must not hold a node already
  --name NAME           the new node's name
  --api HOST:PORT       its client API address (default ${initApiDefault})
  --peer HOST:PORT      its peer transport address (default ${initPeerDefault})
  --host-key SHA256:..  SFTP: the server's host key (ssh-keygen -lf); any other is refused
  --port N              SFTP: the port (default 22)
  --password-stdin      SFTP: the password on standard input (then give the recovery key by file)
  --key-file FILE       SFTP: the user's private key
  --access-key-id ID    S3: the access key id
  --secret-key-file FILE  S3: the secret access key, from a file
  --secret-key-stdin    S3: the secret access key on standard input (then give the recovery key by file)
  --region R            S3: the region the signature names (default us-east-1)
  --ca-file FILE        S3 over https: PEM CA certificates to trust (a self-signed server)
  --json                print what shoal snapshot restore --json prints (clusterId, oldClusterId,
                        credential, secrets, ...)
  -h, --help            show this help

Exit codes: 0 restored; 1 no backup, a damaged one (backup_damaged), a key that does not open it
(unlock_key_invalid), DIR already holds a node (nothing was written in these cases), or writing
DIR failed (the message says what to remove); 2 usage error.`;

async function stdinText(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8').trim();
}

/** The SFTP flags a restore takes (a directory needs none). */
export interface TargetFlags {
  'host-key'?: string; port?: string; 'password-stdin': boolean; 'key-file'?: string;
  /** S3 */
  'access-key-id'?: string; 'secret-key-file'?: string; 'secret-key-stdin'?: boolean; region?: string; 'ca-file'?: string;
}

/** The flags openTarget reads for an S3 --from, for parse(). */
export const s3TargetFlags = {
  'access-key-id': { type: 'string' }, 'secret-key-file': { type: 'string' }, 'secret-key-stdin': { type: 'boolean', default: false }, region: { type: 'string' }, 'ca-file': { type: 'string' },
} as const;

async function openS3Target(from: string, v: TargetFlags): Promise<TargetIo> {
  const loc = parseS3Url(from);
  if (typeof loc === 'string') throw new UsageError(`--from ${loc}`);
  if (v['access-key-id'] === undefined) throw new UsageError('an S3 --from needs --access-key-id ID');
  if ((v['secret-key-file'] !== undefined) === (v['secret-key-stdin'] === true)) throw new UsageError('an S3 --from needs exactly one of --secret-key-file FILE and --secret-key-stdin');
  const region = v.region ?? s3RegionDefault;
  if (!/^[a-z0-9-]{1,64}$/.test(region)) throw new UsageError(`--region takes a region name (us-east-1), not '${region}'`);
  let secretKey: string;
  let ca: string | undefined;
  try {
    secretKey = v['secret-key-file'] !== undefined ? (await readFile(v['secret-key-file'], 'utf8')).trim() : await stdinText();
    if (v['ca-file'] !== undefined) ca = await readFile(v['ca-file'], 'utf8');
  } catch (err) {
    throw new CliFailure(`${(err as Error).message}; nothing was written`, exitCodes.failed);
  }
  return new S3TargetIo(loc, { accessKeyId: v['access-key-id'], secretKey, region, ...(ca !== undefined ? { ca } : {}) });
}

export async function openTarget(from: string, v: TargetFlags): Promise<TargetIo> {
  if (from.startsWith('/') || from.startsWith('.')) return new DirTargetIo(path.resolve(from));
  if (/^https?:\/\//.test(from)) return await openS3Target(from, v);
  const loc = parseSftpLocation(from);
  const hostKey = v['host-key'];
  if (hostKey === undefined || !/^SHA256:[A-Za-z0-9+/]{43}$/.test(hostKey)) throw new UsageError('an SFTP --from needs --host-key SHA256:... (ssh-keygen -lf on the server\'s host key)');
  if (v['password-stdin'] === (v['key-file'] !== undefined)) throw new UsageError('an SFTP --from needs exactly one of --password-stdin and --key-file FILE');
  const port = v.port === undefined ? 22 : Number(v.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--port takes a port number, not '${v.port}'`);
  const auth = v['key-file'] !== undefined ? { privateKey: await readFile(v['key-file'], 'utf8') } : { password: await stdinText() };
  try {
    return await SftpTargetIo.connect({ ...loc, port }, auth, (got) => got === hostKey.slice('SHA256:'.length));
  } catch (err) {
    throw new CliFailure(`${(err as Error).message}; nothing was written`, exitCodes.unavailable);
  }
}

/** The backup to restore: `id`, or the newest whose manifest reads. */
async function chooseBackup(io: TargetIo, id: string | undefined): Promise<string> {
  if (id !== undefined) return id;
  const sound = (await listBackups(io)).filter((b) => b.manifest !== undefined);
  const newest = sound.at(-1);
  if (newest === undefined) throw new CliFailure(`there is no backup on ${io.where}; nothing was written`, exitCodes.failed, 'not_found');
  return newest.id;
}

export interface ReadBackup {
  /** The store's snapshot file, in the clear. */
  plain: Uint8Array;
  /** The replicated volumes, each with its stream, read again from the target (decrypted as it flows) when the restore receives it. */
  volumes: RestoredVolume[];
  backup: { id: string; clusterId: string; index: number; createdAt: number; encrypted: boolean };
  /** Closes the target and forgets the backup's data key: after the volumes were received. */
  close(): Promise<void>;
}

/** A volume stream's plaintext as a verify pass reads it: decrypted, counted and hashed as it passes; the first failure kept. */
interface PlainTap {
  step: ByteStep;
  hash: Hash;
  bytes: number;
  problem?: string;
}

function feed(t: PlainTap, out: () => Buffer[]): void {
  if (t.problem !== undefined) return;
  try {
    for (const b of out()) {
      t.hash.update(b);
      t.bytes += b.length;
    }
  } catch (err) {
    t.problem = (err as Error).message;
  }
}

/**
 * Reads backup `id` (or the newest sound one) from `from`: one pass over every file, streamed,
 * checks every digest, keeps the store snapshot and opens it with the recovery key, and opens each
 * volume stream as it passes (so a key or a chunk that does not open is known before anything is
 * written) counting its plaintext's length and SHA-256, which the receive checks on the second
 * pass. A volume stream that is an increment (format 4) brings its chain: the older backups it
 * needs are read the same way (each with its own data key), and a missing one is named. The
 * target stays open for that pass until `close()`.
 */
export async function readBackup(from: string, v: TargetFlags, id: string | undefined, recoveryKey: Uint8Array): Promise<ReadBackup> {
  const io = await openTarget(from, v);
  // One data key per backup of the chains (each backup has its own).
  const keys = new Map<string, Buffer | null>();
  const close = async (): Promise<void> => {
    for (const k of keys.values()) k?.fill(0);
    await io.close();
  };
  try {
    const chosen = await chooseBackup(io, id);
    const taps = new Map<string, PlainTap>();
    let keyProblem = false;
    const keyOf = (m: BackupManifest): Buffer | null => {
      if (!keys.has(m.id)) {
        try {
          keys.set(m.id, openDataKey(m, privateKeyOf(recoveryKey)));
        } catch {
          keyProblem = true;
          keys.set(m.id, null);
        }
      }
      return keys.get(m.id) ?? null;
    };
    const r = await verifyBackup(io, chosen, {
      keep: [storeFileName],
      tap: (m, entry) => {
        if (m.encryption === null || !m.volumes.some((vol) => vol.file === entry.name)) return undefined;
        const key = keyOf(m);
        if (key === null) return undefined;
        const t: PlainTap = { step: openerOf(m, entry.name, key), hash: createHash('sha256'), bytes: 0 };
        taps.set(`${m.id}/${entry.name}`, t);
        return (chunk) => feed(t, () => t.step.push(chunk));
      },
    });
    if (!r.ok || r.manifest === undefined || r.files === undefined || r.chains === undefined) {
      throw new CliFailure(`backup ${chosen} on ${io.where} is damaged: ${r.problems.map((p) => `${p.file}: ${p.problem}`).join('; ')}; nothing was written. Restore another one (--id; shoal backup ls)`, exitCodes.failed, 'backup_damaged', { details: { problems: r.problems, ...(r.missing !== undefined && r.missing.length > 0 ? { missing: r.missing } : {}) } });
    }
    const m = r.manifest;
    if (m.featureLevel > featureLevelMax) {
      throw new CliFailure(`backup ${chosen} was taken at cluster feature level ${m.featureLevel} (written by ${m.writtenBy}); this release reads up to level ${featureLevelMax}: restore it with that release or a newer one; nothing was written`, exitCodes.failed);
    }
    let plain: Uint8Array;
    try {
      if (keyProblem) throw new Error('the data key does not open');
      plain = openBackupFile(m, storeFileName, r.files.get(storeFileName) ?? new Uint8Array(), privateKeyOf(recoveryKey));
    } catch {
      throw new CliFailure(`that recovery key does not open backup ${chosen} (it is encrypted to recovery key ${m.encryption?.recoveryKeyId ?? '?'}); nothing was written`, exitCodes.failed, 'unlock_key_invalid');
    }
    for (const t of taps.values()) feed(t, () => t.step.end());
    const problems = [...taps].flatMap(([name, t]) => (t.problem === undefined ? [] : [{ file: name, problem: t.problem }]));
    if (problems.length > 0) {
      throw new CliFailure(`backup ${chosen} on ${io.where} is damaged: ${problems.map((p) => `${p.file}: ${p.problem}`).join('; ')}; nothing was written. Restore another one (--id; shoal backup ls)`, exitCodes.failed, 'backup_damaged', { details: { problems } });
    }
    const volumes = restoredVolumes(io, m, r, taps, keys);
    return { plain, volumes, backup: { id: chosen, clusterId: m.clusterId, index: m.index, createdAt: m.createdAt, encrypted: m.encryption !== null }, close };
  } catch (err) {
    await close();
    // An S3 server's refusal (AccessDenied, NoSuchBucket, SignatureDoesNotMatch...), as it said it.
    if (err instanceof S3Error) throw new CliFailure(`${err.message}; ${s3Advice(err, v['access-key-id'] ?? '?')}; nothing was written`, exitCodes.unavailable, 'backup_failed', { details: { s3Code: err.code } });
    throw err;
  }
}

/** Each volume of backup `m` with its chain's streams, the whole one first, each read again from `io` when received. */
function restoredVolumes(io: TargetIo, m: BackupManifest, r: VerifiedBackup, taps: ReadonlyMap<string, PlainTap>, keys: ReadonlyMap<string, Buffer | null>): RestoredVolume[] {
  const manifests = new Map([[m.id, m], ...(r.parents ?? new Map<string, BackupManifest>())]);
  return m.volumes.map((entry): RestoredVolume => ({
    entry,
    streams: (r.chains?.get(entry.name) ?? []).flatMap((link) => {
      const lm = manifests.get(link.backupId);
      const file = link.file === null ? undefined : lm?.files.find((f) => f.name === link.file);
      if (lm === undefined || file === undefined) return [];
      const t = taps.get(`${lm.id}/${file.name}`);
      const digest = t === undefined ? { bytes: file.bytes, sha256: file.sha256 } : { bytes: t.bytes, sha256: t.hash.digest('hex') };
      const key = lm.encryption === null ? null : keys.get(lm.id) ?? null;
      return [{ backupId: lm.id, version: link.version, parent: link.parent, ...digest, open: () => Readable.from(streamInClear(io, lm, file, key), { objectMode: false }) }];
    }),
  }));
}

/** A file of backup `m` as stored on `io`, in the clear as it flows (`key` null: stored in the clear). */
async function* streamInClear(io: TargetIo, m: BackupManifest, file: BackupFile, key: Buffer | null): AsyncGenerator<Buffer> {
  const body = await io.readStream(m.id, file.name, file.bytes);
  if (body === undefined) throw new Error(`${m.id}/${file.name} is gone from ${io.where} since it was verified`);
  yield* through(body, openerOf(m, file.name, key));
}

export async function restoreCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    from: { type: 'string' }, id: { type: 'string' }, data: { type: 'string' }, name: { type: 'string' },
    api: { type: 'string', default: initApiDefault }, peer: { type: 'string', default: initPeerDefault },
    'recovery-key-file': { type: 'string' }, 'recovery-key-stdin': { type: 'boolean', default: false },
    'host-key': { type: 'string' }, port: { type: 'string' }, 'password-stdin': { type: 'boolean', default: false }, 'key-file': { type: 'string' },
    ...s3TargetFlags,
  }, restoreHelp);
  if (values.help) return help(restoreHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.from === undefined || values.data === undefined || values.name === undefined) {
    throw new UsageError(`missing ${[values.from === undefined ? '--from' : '', values.data === undefined ? '--data' : '', values.name === undefined ? '--name' : ''].filter(Boolean).join(', ')}`);
  }
  if ((values['recovery-key-file'] !== undefined) === values['recovery-key-stdin']) throw new UsageError('give the recovery key with exactly one of --recovery-key-file FILE and --recovery-key-stdin');
  if (values['recovery-key-stdin'] && values['password-stdin']) throw new UsageError('standard input cannot hold both the recovery key and the SFTP password: give the key with --recovery-key-file');
  if (values['recovery-key-stdin'] && values['secret-key-stdin']) throw new UsageError('standard input cannot hold both the recovery key and the S3 secret key: give the key with --recovery-key-file');
  const keyText = values['recovery-key-file'] !== undefined ? await readFile(values['recovery-key-file'], 'utf8').then((t) => t.trim(), (err: unknown) => {
    throw new CliFailure(`cannot read ${values['recovery-key-file']}: ${(err as Error).message}; nothing was written`, exitCodes.failed);
  }) : await stdinText();
  const raw = parseKeyText(recoveryKeyPrefix, keyText);
  if (raw === undefined) throw new CliFailure(`that is not a recovery key (it is ${recoveryKeyPrefix} and 43 letters, digits, - and _, as shoal init printed it); nothing was written`, exitCodes.failed, 'unlock_key_invalid');

  // Refused before anything is read from the target (snapshot restore checks again before it writes).
  if (isInitialized(values.data)) throw new CliFailure(`${values.data} is already initialized; nothing was written; restore into a new, empty directory`, exitCodes.failed, 'already_initialized');
  const { plain, volumes, backup, close } = await readBackup(values.from, values, values.id, raw);

  // The snapshot and the key go to a private scratch directory for `snapshot restore`, and away after.
  const scratch = mkdtempSync(path.join(tmpdir(), 'shoal-restore-'));
  try {
    const snap = path.join(scratch, storeFileName);
    const key = path.join(scratch, 'recovery-key');
    writeFileSync(snap, plain, { mode: 0o600 });
    writeFileSync(key, `${keyText}\n`, { mode: 0o600 });
    if (!values.json) console.log(`backup ${backup.id} of cluster ${backup.clusterId} (index ${backup.index}, ${new Date(backup.createdAt).toISOString()}) read from ${values.from}: every digest matches`);
    const args = [snap, '--data', values.data, '--name', values.name, '--api', values.api, '--peer', values.peer, '--recovery-key-file', key, ...(values.json ? ['--json'] : [])];
    const code = await snapshotRestoreCommand(args, volumesRestoreHook(volumes));
    if (code !== exitCodes.ok) return code;
    if (!values.json) for (const line of describeRestored(volumes)) console.log(line);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    await close();
  }
  const record = path.join(values.data, 'restored-from.json');
  writeFileSync(record, `${JSON.stringify({ oldClusterId: backup.clusterId, backup: backup.id, from: values.from, index: backup.index, backupCreatedAt: backup.createdAt, restoredAt: Date.now() }, null, 2)}\n`, { mode: 0o600 });
  await syncDir(path.resolve(values.data));
  if (!values.json) console.log(`recorded the old cluster ${backup.clusterId} and the backup in ${record}`);
  return exitCodes.ok;
}
