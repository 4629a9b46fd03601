// Backup targets and backups through the API of one node (the backup runner as server.ts wires
// it): the targets' validation, a credential never answered, an encrypted target refused without
// a recovery key and then encrypted to it, several targets needing --target, retention applied
// after each backup, the schedule's due targets; and an SFTP target on OpenSSH's sshd started on
// loopback with a throwaway host key (never skipped: the machine setup installs openssh-server,
// and a missing sshd fails the case, saying so): written encrypted, listed, verified, a wrong host key
// refused, and `shoal restore` from it onto a fresh data directory; and a password login (a user
// known only in that sshd's mount namespace) through `--password-stdin`. An S3 target on s3rver (npm)
// on loopback: written, listed, verified, restored from; an unknown access key, a missing bucket,
// a changed object and a backup cut off before its manifest refused or listed as damaged; https
// with a CA given. (s3rver does not check V4 signatures: test/node/s3-sign.test.ts checks the
// signer against AWS's examples, and a small server that does check them, with the aws4 package,
// refuses a wrong secret key: test/support/s3-sigv4-server.ts, the last case here.)

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { BackupRunner } from '../../src/node/backup/backup-runner.ts';
import { parseS3Url, S3TargetIo, type S3Location } from '../../src/node/backup/s3-io.ts';
import { openBackupFile, decodeManifest, storeFileName } from '../../src/node/backup/backup-format.ts';
import { decodeSnapshotFile } from '../../src/node/recovery/snapshot-file.ts';
import { privateKeyOf } from '../../src/resources/secret-crypto.ts';
import { parseKeyText, recoveryKeyPrefix } from '../../src/security/unlock-key.ts';
import { inProcess } from '../cli/in-process.ts';
import { reloadActiveCredential } from '../../src/cli/credential-file.ts';
import { expectError } from './expect-error.ts';
import { S3SigV4Server } from '../support/s3-sigv4-server.ts';
import { singleNode, type SingleNode } from './single-node.ts';
import { withStdin } from '../support/stdin.ts';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-backups-api-'));
const secretValue = `pw-${Math.random().toString(36).slice(2)}-end`;
let s: SingleNode;
let now = Date.UTC(2026, 11, 6, 12, 0, 0);
let recoveryKey = '';

beforeAll(async () => {
  s = await singleNode();
  s.ctx.backups = new BackupRunner({ node: s.node, store: s.store, clusterId: 'test-cluster', version: 'test', log: quiet, clusterKeys: s.keys, recordEvent: (t, subj, d) => s.ctx.events?.recordEvent(t, subj, d), now: () => now });
  expect((await s.app.inject({ method: 'PUT', url: '/v1/secrets/db', payload: { value: secretValue } })).statusCode).toBe(200);
});
afterAll(async () => {
  await s.ctx.backups?.close();
  await s.close();
  rmSync(root, { recursive: true, force: true });
});

const put = (name: string, payload: unknown) => s.app.inject({ method: 'PUT', url: `/v1/backup-targets/${name}`, payload: payload as Record<string, unknown> });
const backup = (target?: string) => s.app.inject({ method: 'POST', url: '/v1/backups', payload: target === undefined ? {} : { target } });

describe('backup targets and backups', () => {
  it('refuses a target that is neither or both, a relative dir, an unencrypted or unpinned SFTP target', async () => {
    const hostKey = `SHA256:${'A'.repeat(43)}`;
    const sftp = { user: 'b', host: '127.0.0.1', path: '/srv', hostKey, password: 'x' };
    expectError(await put('x', {}), 'bad_request');
    expectError(await put('x', { dir: path.join(root, 'a'), sftp }), 'bad_request');
    expectError(await put('x', { dir: 'relative/dir' }), 'bad_request');
    expectError(await put('x', { sftp: { ...sftp }, encrypt: false }), 'bad_request');
    expectError(await put('x', { sftp: { ...sftp, hostKey: 'abc' } }), 'bad_request');
    expectError(await put('x', { sftp: { ...sftp, privateKey: 'k' } }), 'bad_request');
    expectError(await put('Bad_Name', { dir: '/tmp' }), 'bad_request');
    expectError(await put('x', { dir: path.join(root, 'a'), everyMs: 1000 }), 'bad_request');
    expect((await s.app.inject({ url: '/v1/backup-targets' })).json()).toEqual({ items: [] });
    expectError(await backup(), 'bad_request');
    expectError(await backup('nope'), 'not_found');
  });

  it('an encrypted target needs the recovery key; then its files open only with it, and the secret stays sealed inside', async () => {
    expect((await put('offsite', { dir: path.join(root, 'offsite'), encrypt: true, keepDaily: 7, keepWeekly: 4 })).statusCode).toBe(200);
    const refused = await backup('offsite');
    expectError(refused, 'backup_failed');
    expect(refused.json().message).toContain('shoal secret recovery-key');
    const targets = (await s.app.inject({ url: '/v1/backup-targets' })).json() as { items: { name: string; failures: number; lastError: string | null }[] };
    expect(targets.items[0]).toMatchObject({ name: 'offsite', failures: 1, lastError: expect.stringContaining('recovery key') });

    const made = await s.app.inject({ method: 'POST', url: '/v1/keyring/recovery-key', payload: {} });
    expect(made.statusCode, made.body).toBe(200);
    recoveryKey = (made.json() as { recoveryKey: string }).recoveryKey;
    const r = await backup('offsite');
    expect(r.statusCode, r.body).toBe(200);
    const { id } = r.json() as { id: string; encrypted: boolean };
    expect(r.json()).toMatchObject({ encrypted: true, pruned: [] });
    const dir = path.join(root, 'offsite', id);
    const manifest = decodeManifest(readFileSync(path.join(dir, 'manifest.json')));
    if (!('manifest' in manifest)) throw new Error(manifest.problem);
    const stored = readFileSync(path.join(dir, storeFileName));
    expect(() => decodeSnapshotFile(stored, 'x')).toThrow();
    const raw = parseKeyText(recoveryKeyPrefix, recoveryKey);
    if (raw === undefined) throw new Error('not a recovery key');
    const plain = openBackupFile(manifest.manifest, storeFileName, stored, privateKeyOf(raw));
    expect(decodeSnapshotFile(plain, 'x').clusterId).toBe('test-cluster');
    expect(Buffer.from(plain).includes(Buffer.from(secretValue))).toBe(false);
    const events = () => (s.ctx.events?.clusterSince(0, ['backup']) ?? []).map((e) => `${e.type} ${e.subject}`);
    for (let i = 0; i < 100 && !events().includes('backup.completed offsite'); i++) await new Promise((res) => setTimeout(res, 20));
    expect(events()).toEqual(['backup.failed offsite', 'backup.completed offsite']);
  });

  it('names the target when there are several; retention prunes after each backup; the schedule is due by each target\'s interval', async () => {
    expect((await put('nas', { dir: path.join(root, 'nas'), keepDaily: 1, keepWeekly: 0, everyMs: 3_600_000 })).statusCode).toBe(200);
    expectError(await backup(), 'bad_request');
    const first = (await backup('nas')).json() as { id: string };
    now += 60_000;
    const second = (await backup('nas')).json() as { id: string; pruned: string[] };
    expect(second.pruned).toEqual([first.id]);
    expect(readdirSync(path.join(root, 'nas'))).toEqual([second.id]);
    expect(s.ctx.backups?.due()).toEqual([]);
    now += 3_600_000;
    expect(s.ctx.backups?.due()).toEqual(['nas']);
    const ls = await inProcess('backup', 'ls', '--target', 'nas', '--json', '--addr', await listening());
    expect(ls.code, ls.stderr).toBe(0);
    expect(JSON.parse(ls.stdout)).toMatchObject({ target: 'nas', items: [{ id: second.id, ok: true }] });
  });

  it('the schedule runs a due target on the leader only, and then waits for its interval', async () => {
    const dir = path.join(root, 'scheduled');
    expect((await put('scheduled', { dir, everyMs: 3_600_000 })).statusCode).toBe(200);
    let leading = false;
    const node = new Proxy(s.node, { get: (t, k) => (k === 'isLeader' ? leading : Reflect.get(t, k, t) as unknown) });
    const runner = new BackupRunner({ node, store: s.store, clusterId: 'test-cluster', version: 'test', log: quiet, clusterKeys: s.keys, now: () => now, tickMs: 20 });
    try {
      runner.start();
      await new Promise((r) => setTimeout(r, 200));
      expect(existsSync(dir)).toBe(false);
      leading = true;
      for (let i = 0; i < 200 && !(existsSync(dir) && readdirSync(dir).length === 1); i++) await new Promise((r) => setTimeout(r, 20));
      expect(readdirSync(dir)).toHaveLength(1);
      // Due again only an interval later.
      await new Promise((r) => setTimeout(r, 200));
      expect(readdirSync(dir)).toHaveLength(1);
      expect(runner.due()).not.toContain('scheduled');
    } finally {
      await runner.close();
    }
    await s.app.inject({ method: 'DELETE', url: '/v1/backup-targets/scheduled' });
  });

  it('shoal backup target add|ls|rm, now and verify, as a user runs them', async () => {
    const addr = ['--addr', await listening()];
    const dir = path.join(root, 'cli');
    const added = await inProcess('backup', 'target', 'add', 'cli', '--dir', dir, '--every', '24h', '--keep-daily', '2', '--keep-weekly', '1', '--json', ...addr);
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout)).toMatchObject({ outcome: 'created', target: { name: 'cli', where: dir, kind: 'dir', everyMs: 86_400_000, keepDaily: 2, keepWeekly: 1, encrypt: false } });
    const tooOften = await inProcess('backup', 'target', 'add', 'cli', '--dir', dir, '--every', '10s', '--json', ...addr);
    expect(tooOften.code).toBe(1);
    expect(tooOften.stderr).toContain('at least a minute');
    const now1 = await inProcess('backup', 'now', '--target', 'cli', ...addr);
    expect(now1.code, now1.stderr).toBe(0);
    const id = /^backup (\S+) written to cli: \d+ bytes, index \d+$/m.exec(now1.stdout)?.[1];
    expect(id, now1.stdout).toBeDefined();
    const verified = await inProcess('backup', 'verify', id ?? '', '--target', 'cli', ...addr);
    expect(verified.stdout).toMatch(new RegExp(`^backup ${id} on cli is sound: 2 files, \\d+ bytes read back, every digest matches`));
    const ls = await inProcess('backup', 'target', 'ls', ...addr);
    expect(ls.stdout).toMatch(new RegExp(`^cli +${dir} +1440m +2d 1w +${id}`, 'm'));
    const rm = await inProcess('backup', 'target', 'rm', 'cli', ...addr);
    expect(rm.stdout).toBe('backup target cli removed; its backups were left where they are\n');
    expect(readdirSync(dir)).toEqual([id]);
    const again = await inProcess('backup', 'target', 'rm', 'cli', '--json', ...addr);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('not_found');
  });

  it('shoal drill restore: the newest backup restored into a scratch node here, its service and secret back', async () => {
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: 'apiVersion: shoal/v1\nkind: Service\nname: web\nimage: busybox:local\nreplicas: 1\nsecrets: [db]\n' } });
    expect(applied.statusCode, applied.body).toBe(200);
    now += 60_000;
    const taken = await backup('nas');
    expect(taken.statusCode, taken.body).toBe(200);
    const keyFile = path.join(root, 'drill-recovery.key');
    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const before = process.env.SHOAL_CONFIG;
    const r = await inProcess('drill', 'restore', '--from', path.join(root, 'nas'), '--recovery-key-file', keyFile, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      ok: true, backup: { id: (taken.json() as { id: string }).id, clusterId: 'test-cluster' },
      services: { expected: ['web'], found: ['web'], missing: [] }, secrets: { expected: ['db'], found: ['db'], missing: [] }, dir: null,
    });
    expect(process.env.SHOAL_CONFIG).toBe(before);
    const wrongKey = path.join(root, 'drill-wrong.key');
    writeFileSync(wrongKey, `${recoveryKeyPrefix}${Buffer.alloc(32, 7).toString('base64url')}\n`);
    const refused = await inProcess('drill', 'restore', '--from', path.join(root, 'offsite'), '--recovery-key-file', wrongKey, '--json');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('unlock_key_invalid');
  });

  it('a backup target\'s credential is no workload secret: its name is refused and not listed', async () => {
    expectError(await s.app.inject({ method: 'PUT', url: '/v1/secrets/backup-target-nas', payload: { value: 'x' } }), 'bad_request');
  });
});


let address: string | undefined;
async function listening(): Promise<string> {
  address ??= (await s.app.listen({ port: 0, host: '127.0.0.1' })).replace('http://', '');
  return address;
}

const sshd = ['/usr/sbin/sshd', '/usr/bin/sshd'].find((p) => existsSync(p));
/** A user who logs in with a password, known only inside the test sshd's mount namespace. */
const sftpUser = 'shoal-sftp-pw';
const sftpUid = 64_123;
const sftpPassword = `pw-${Math.random().toString(36).slice(2)}-x`;
const pwRemoteBase = mkdtempSync(path.join(os.tmpdir(), 'shoal-sftp-pw-'));
const pwRemote = path.join(pwRemoteBase, 'backups');

describe('an SFTP target (OpenSSH on loopback)', () => {
  const dir = path.join(root, 'sshd');
  let proc: ChildProcess | undefined;
  let port = 0;
  let hostKey = '';
  const remote = path.join(root, 'remote');

  beforeAll(async () => {
    if (sshd === undefined) throw new Error('OpenSSH\'s sshd is not installed (/usr/sbin/sshd): run npm run test:setup, which installs openssh-server');
    mkdirSync(dir);
    mkdirSync('/run/sshd', { recursive: true });
    for (const k of ['host_key', 'client_key']) spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, k)]);
    writeFileSync(path.join(dir, 'authorized_keys'), readFileSync(path.join(dir, 'client_key.pub')));
    hostKey = (spawnSync('ssh-keygen', ['-lf', path.join(dir, 'host_key.pub')], { encoding: 'utf8' }).stdout.split(' ')[1] ?? '');
    port = await freePort();
    writeFileSync(path.join(dir, 'sshd_config'), [
      `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${path.join(dir, 'host_key')}`, `PidFile ${path.join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`, 'StrictModes no', 'PermitRootLogin prohibit-password', 'PasswordAuthentication yes',
      'PermitEmptyPasswords no', 'KbdInteractiveAuthentication no', 'UsePAM no', 'Subsystem sftp internal-sftp', '',
    ].join('\n'));
    // The password user exists only for this sshd: it runs in its own mount namespace, where
    // /etc/passwd and /etc/shadow are copies with the user added (the machine's are not touched).
    // With UsePAM no, sshd checks the password against that shadow's SHA-512 crypt hash itself.
    if (process.getuid?.() !== 0) throw new Error('the SFTP tests run sshd in a mount namespace with its own /etc/shadow: run them as root, as npm test runs');
    const hash = spawnSync('openssl', ['passwd', '-6', '-stdin'], { input: sftpPassword, encoding: 'utf8' }).stdout.trim();
    if (!hash.startsWith('$6$')) throw new Error(`openssl passwd -6 made no hash: ${hash}`);
    chmodSync(pwRemoteBase, 0o755);
    mkdirSync(pwRemote);
    chownSync(pwRemote, sftpUid, sftpUid);
    writeFileSync(path.join(dir, 'passwd'), `${readFileSync('/etc/passwd', 'utf8').trimEnd()}\n${sftpUser}:x:${sftpUid}:${sftpUid}:shoal backup test:${pwRemoteBase}:/bin/sh\n`);
    writeFileSync(path.join(dir, 'shadow'), `${readFileSync('/etc/shadow', 'utf8').trimEnd()}\n${sftpUser}:${hash}:19000:0:99999:7:::\n`, { mode: 0o600 });
    const inNamespace = `mount --bind ${path.join(dir, 'passwd')} /etc/passwd && mount --bind ${path.join(dir, 'shadow')} /etc/shadow && exec ${sshd} -D -e -f ${path.join(dir, 'sshd_config')}`;
    proc = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', inNamespace], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    proc.stderr?.on('data', (b: Buffer) => { err += b.toString(); });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const up = await new Promise<boolean>((resolve) => {
        const c = createConnection({ host: '127.0.0.1', port }, () => { c.end(); resolve(true); });
        c.on('error', () => resolve(false));
      });
      if (up) break;
      if (Date.now() > deadline) throw new Error(`sshd did not listen: ${err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  afterAll(() => {
    proc?.kill('SIGKILL');
    rmSync(pwRemoteBase, { recursive: true, force: true });
  });

  it('logs in with a password (--password-stdin): writes an encrypted backup as that user, lists, verifies and restores it; a wrong password is refused, said so', async () => {
    const target = { user: sftpUser, host: '127.0.0.1', port, path: pwRemote, hostKey };
    const wrong = `wrong-${Math.random().toString(36).slice(2)}`;
    expect((await put('sftp-pw', { sftp: { ...target, password: wrong } })).statusCode).toBe(200);
    const refused = await backup('sftp-pw');
    expectError(refused, 'backup_failed');
    expect(refused.json()).toMatchObject({ details: { target: 'sftp-pw' } });
    expect(refused.json().message).toMatch(/^backup target sftp-pw \(.*\): .*authentication.*; check the address, the credential and the host key/);
    expect(refused.body).not.toContain(wrong);
    expect(readdirSync(pwRemote)).toEqual([]);

    // The right password, as a user gives it: `shoal backup target add --password-stdin`.
    const config = process.env.SHOAL_CONFIG;
    process.env.SHOAL_CONFIG = mkdtempSync(path.join(root, 'config-'));
    reloadActiveCredential();
    const added = await withStdin(`${sftpPassword}\n`, async () => await inProcess('backup', 'target', 'add', 'sftp-pw', '--sftp', `${sftpUser}@127.0.0.1:${pwRemote}`, '--port', String(port),
      '--host-key', hostKey, '--password-stdin', '--json', '--addr', await listening()))
      .finally(() => { process.env.SHOAL_CONFIG = config; reloadActiveCredential(); });
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).not.toContain(sftpPassword);
    expect((await s.app.inject({ url: '/v1/backup-targets' })).body).not.toContain(sftpPassword);
    now += 60_000;
    const r = await backup('sftp-pw');
    expect(r.statusCode, r.body).toBe(200);
    const { id } = r.json() as { id: string };
    expect(r.json()).toMatchObject({ encrypted: true });
    // Written by the password user, on the server's side.
    expect(readdirSync(pwRemote)).toEqual([id]);
    expect(statSync(path.join(pwRemote, id, 'manifest.json')).uid).toBe(sftpUid);
    expect((await s.app.inject({ url: '/v1/backups?target=sftp-pw' })).json()).toMatchObject({ items: [{ id, ok: true, encrypted: true }] });
    const verified = await s.app.inject({ method: 'POST', url: `/v1/backups/${id}/verify`, payload: { target: 'sftp-pw' } });
    expect(verified.statusCode, verified.body).toBe(200);
    expect(verified.json()).toMatchObject({ ok: true, files: 2 });
    await s.app.inject({ method: 'DELETE', url: '/v1/backup-targets/sftp-pw' });

    // `shoal restore` from it, the password on standard input; a wrong one refused, nothing written.
    const keyFile = path.join(root, 'sftp-pw-recovery.key');
    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const restoreArgs = (data: string): string[] => ['restore', '--from', `${sftpUser}@127.0.0.1:${pwRemote}`, '--port', String(port), '--host-key', hostKey, '--password-stdin',
      '--recovery-key-file', keyFile, '--data', data, '--name', 'r1', '--api', '127.0.0.1:1', '--peer', '127.0.0.1:2', '--json'];
    const badRestore = await withStdin(`${wrong}\n`, () => inProcess(...restoreArgs(path.join(root, 'sftp-pw-refused'))));
    expect(badRestore.code).toBe(3);
    expect(badRestore.stderr).toMatch(/authentication/);
    expect(badRestore.stderr).not.toContain(wrong);
    expect(existsSync(path.join(root, 'sftp-pw-refused'))).toBe(false);
    const restored = await withStdin(`${sftpPassword}\n`, () => inProcess(...restoreArgs(path.join(root, 'sftp-pw-restored'))));
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(readFileSync(path.join(root, 'sftp-pw-restored', 'restored-from.json'), 'utf8'))).toMatchObject({ backup: id, oldClusterId: 'test-cluster' });
  });

  it('writes an encrypted backup over SFTP, lists and verifies it, refuses another host key, and restores from it', async () => {
    const user = os.userInfo().username;
    const privateKey = readFileSync(path.join(dir, 'client_key'), 'utf8');
    const wrong = await put('sftp', { sftp: { user, host: '127.0.0.1', port, path: remote, hostKey: `SHA256:${'B'.repeat(43)}`, privateKey } });
    expect(wrong.statusCode, wrong.body).toBe(200);
    const refused = await backup('sftp');
    expectError(refused, 'backup_failed');
    expect(JSON.stringify(refused.json())).not.toContain('OPENSSH PRIVATE KEY');
    expect((await put('sftp', { sftp: { user, host: '127.0.0.1', port, path: remote, hostKey, privateKey } })).statusCode).toBe(200);
    const listed = (await s.app.inject({ url: '/v1/backup-targets' })).body;
    expect(listed).not.toContain('PRIVATE KEY');
    const r = await backup('sftp');
    expect(r.statusCode, r.body).toBe(200);
    const { id } = r.json() as { id: string };
    expect(r.json()).toMatchObject({ encrypted: true });
    expect(readdirSync(remote)).toEqual([id]);
    const verified = await s.app.inject({ method: 'POST', url: `/v1/backups/${id}/verify`, payload: { target: 'sftp' } });
    expect(verified.statusCode, verified.body).toBe(200);

    const keyFile = path.join(root, 'recovery.key');
    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const data = path.join(root, 'restored');
    const restored = await inProcess('restore', '--from', `${user}@127.0.0.1:${remote}`, '--port', String(port), '--host-key', hostKey, '--key-file', path.join(dir, 'client_key'),
      '--recovery-key-file', keyFile, '--data', data, '--name', 'r1', '--api', `127.0.0.1:${await freePort()}`, '--peer', `127.0.0.1:${await freePort()}`, '--json');
    expect(restored.code, restored.stderr).toBe(0);
    // Two: the workload secret, and the SFTP target's own credential (the targets come back too).
    expect(JSON.parse(restored.stdout)).toMatchObject({ oldClusterId: 'test-cluster', secrets: { readable: 2, unreadable: [] } });
    expect(JSON.parse(readFileSync(path.join(data, 'restored-from.json'), 'utf8'))).toMatchObject({ backup: id, oldClusterId: 'test-cluster' });
    // Restoring again onto it is refused before the target is read.
    const again = await inProcess('restore', '--from', path.join(root, 'offsite'), '--recovery-key-file', keyFile, '--data', data, '--name', 'r1', '--json');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already_initialized');
  });
});

// s3rver (npm, devDependency) on loopback with a temp directory: an S3-compatible server that checks
// Signature V4 with its built-in key pair S3RVER/S3RVER.
interface S3rverServer { run(): Promise<{ port: number }>; close(): Promise<void> }
const S3rver = createRequire(import.meta.url)('s3rver') as new (o: Record<string, unknown>) => S3rverServer;

describe('an S3 target (s3rver on loopback)', () => {
  let server: S3rverServer | undefined;
  let url = '';
  let base = '';
  beforeAll(async () => {
    mkdirSync(path.join(root, 's3rver'));
    server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: path.join(root, 's3rver'), configureBuckets: [{ name: 'shoal' }] });
    const { port } = await server.run();
    base = `http://127.0.0.1:${port}`;
    url = `${base}/shoal/homelab`;
  });
  afterAll(async () => { await server?.close(); });

  it('writes an encrypted backup to S3, lists, verifies and restores it; an unknown access key, a missing bucket and a corrupted object are refused, said so', async () => {
    expectError(await put('s3', { s3: { url: `${base}/`, accessKeyId: 'S3RVER', secretKey: 'S3RVER' } }), 'bad_request');
    expectError(await put('s3', { s3: { url, accessKeyId: 'S3RVER', secretKey: 'S3RVER' }, encrypt: false }), 'bad_request');
    // A wrong access key id: the server's answer, its code and message, in backup_failed; the secret key never echoed.
    // (s3rver does not check Signature V4 itself, so a wrong SECRET key is accepted by it: the
    // signer is checked against AWS's published examples in test/node/s3-sign.test.ts instead.)
    const secretWrong = `wrong-${Math.random().toString(36).slice(2)}`;
    expect((await put('s3', { s3: { url, accessKeyId: 'NOSUCHKEY', secretKey: secretWrong } })).statusCode).toBe(200);
    const refused = await backup('s3');
    expectError(refused, 'backup_failed');
    expect(refused.json().message).toMatch(/answered 403 InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records/);
    expect(refused.body).not.toContain(secretWrong);
    expect((await put('s3', { s3: { url: `${base}/nobucket`, accessKeyId: 'S3RVER', secretKey: 'S3RVER' } })).statusCode).toBe(200);
    const noBucket = await backup('s3');
    expectError(noBucket, 'backup_failed');
    expect(noBucket.json().message).toContain('NoSuchBucket');

    // Added through the CLI, the secret key from a file.
    const secretFile = path.join(root, 's3-secret');
    writeFileSync(secretFile, 'S3RVER\n', { mode: 0o600 });
    // (An empty config: the SFTP test's restore left its new cluster's credential in this file's.)
    const config = process.env.SHOAL_CONFIG;
    process.env.SHOAL_CONFIG = mkdtempSync(path.join(root, 'config-'));
    reloadActiveCredential();
    const added = await inProcess('backup', 'target', 'add', 's3', '--s3', url, '--access-key-id', 'S3RVER', '--secret-key-file', secretFile, '--addr', await listening())
      .finally(() => { process.env.SHOAL_CONFIG = config; reloadActiveCredential(); });
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain(`backup target s3 updated: ${url}, encrypted to the recovery key`);
    expect((await s.app.inject({ url: '/v1/backup-targets' })).body).not.toContain('"S3RVER"}');

    now += 60_000;
    const r = await backup('s3');
    expect(r.statusCode, r.body).toBe(200);
    const { id } = r.json() as { id: string };
    expect(r.json()).toMatchObject({ encrypted: true });
    const ls = await s.app.inject({ url: '/v1/backups?target=s3' });
    expect(ls.json()).toMatchObject({ target: 's3', where: url, items: [{ id, ok: true, clusterId: 'test-cluster', encrypted: true }] });
    const verified = await s.app.inject({ method: 'POST', url: `/v1/backups/${id}/verify`, payload: { target: 's3' } });
    expect(verified.statusCode, verified.body).toBe(200);
    expect(verified.json()).toMatchObject({ ok: true, files: 2 });

    const keyFile = path.join(root, 's3-recovery.key');
    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const data = path.join(root, 's3-restored');
    const restoreArgs = ['--recovery-key-file', keyFile, '--data', data, '--name', 'r1', '--api', `127.0.0.1:${await freePort()}`, '--peer', `127.0.0.1:${await freePort()}`, '--json'];
    const badRestore = await inProcess('restore', '--from', url, '--access-key-id', 'NOSUCHKEY', '--secret-key-file', secretFile, ...restoreArgs);
    expect(badRestore.code).toBe(3);
    expect(badRestore.stderr).toContain('InvalidAccessKeyId');
    const restored = await inProcess('restore', '--from', url, '--access-key-id', 'S3RVER', '--secret-key-file', secretFile, ...restoreArgs);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ oldClusterId: 'test-cluster' });
    expect(JSON.parse(readFileSync(path.join(data, 'restored-from.json'), 'utf8'))).toMatchObject({ backup: id, oldClusterId: 'test-cluster' });

    // One object changed on the server: verify names it, and restore refuses it.
    const io = new S3TargetIo(parseS3Url(url) as S3Location, { accessKeyId: 'S3RVER', secretKey: 'S3RVER', region: 'us-east-1' });
    // A backup cut off before its manifest (S3 has no rename: the manifest is written last) is listed as damaged, never good.
    const cut = '20261206T000000Z-000000000001';
    await io.writeFile(cut, storeFileName, new Uint8Array([1, 2, 3]));
    const listed = (await s.app.inject({ url: '/v1/backups?target=s3' })).json() as { items: { id: string; ok: boolean; problem: string | null }[] };
    expect(listed.items).toEqual([expect.objectContaining({ id: cut, ok: false, problem: 'manifest.json: missing' }), expect.objectContaining({ id, ok: true })]);
    const stored = await io.readFile(id, storeFileName, 1 << 30);
    if (stored === undefined) throw new Error('the store file is not on the server');
    const damaged = Buffer.from(stored);
    damaged[damaged.length >> 1] = (damaged[damaged.length >> 1] ?? 0) ^ 0xff;
    await io.writeFile(id, storeFileName, damaged);
    const bad = await s.app.inject({ method: 'POST', url: `/v1/backups/${id}/verify`, payload: { target: 's3' } });
    expectError(bad, 'backup_damaged');
    expect(bad.json().details.problems).toEqual([{ file: `${id}/${storeFileName}`, problem: expect.any(String) }]);
    const refusedRestore = await inProcess('restore', '--from', url, '--access-key-id', 'S3RVER', '--secret-key-file', secretFile, ...restoreArgs.map((a) => (a === data ? `${data}-2` : a)));
    expect(refusedRestore.code).toBe(1);
    expect(refusedRestore.stderr).toContain(`${id}/${storeFileName}`);
  });
});

describe('an S3 target over https with its own CA (--ca-file)', () => {
  it('trusts the server with the CA given, and refuses it without', async () => {
    const dir = path.join(root, 's3tls');
    mkdirSync(dir);
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    const cert = readFileSync(path.join(dir, 'cert.pem'), 'utf8');
    const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, key: readFileSync(path.join(dir, 'key.pem')), cert, configureBuckets: [{ name: 'tls' }] });
    const { port } = await server.run();
    try {
      const loc = parseS3Url(`https://127.0.0.1:${port}/tls/p`) as S3Location;
      const io = new S3TargetIo(loc, { accessKeyId: 'S3RVER', secretKey: 'S3RVER', region: 'us-east-1', ca: cert });
      await io.writeFile('d', 'f', new Uint8Array([7]));
      expect(await io.list()).toEqual(['d']);
      const untrusted = new S3TargetIo(loc, { accessKeyId: 'S3RVER', secretKey: 'S3RVER', region: 'us-east-1' });
      await expect(untrusted.list()).rejects.toThrow(/cannot reach https:\/\/127\.0\.0\.1:\d+\/tls\/p: .*certificate/);
    } finally {
      await server.close();
    }
  });
});

// A server that checks Signature V4 (test/support/s3-sigv4-server.ts: the `aws4` package signs
// the request it received with the secret key it holds, and compares): the right key writes,
// lists, verifies and restores a backup; a wrong SECRET key (the access key id right) is refused
// by the server, and shoal says which target, what the server said and what to do.
describe('an S3 target on a server that checks Signature V4', () => {
  const accessKeyId = 'SHOALTEST';
  const secretKey = `right-${Math.random().toString(36).slice(2)}`;
  const server = new S3SigV4Server({ keys: { [accessKeyId]: secretKey }, buckets: ['sigv4'], pageKeys: 2 });
  let url = '';
  beforeAll(async () => { url = `${await server.start()}/sigv4/lab`; });
  afterAll(async () => { await server.close(); });

  it('the right key writes, lists, verifies and restores a backup; a wrong secret key is refused, naming the target and what to do', async () => {
    expect((await put('sigv4', { s3: { url, accessKeyId, secretKey }, keepDaily: 1, keepWeekly: 0 })).statusCode).toBe(200);
    now += 60_000;
    const first = await backup('sigv4');
    expect(first.statusCode, first.body).toBe(200);
    now += 60_000;
    const second = await backup('sigv4');
    expect(second.statusCode, second.body).toBe(200);
    const { id } = second.json() as { id: string };
    // Retention listed the first backup's three objects over two pages (continuation) and removed them.
    expect(second.json()).toMatchObject({ encrypted: true, pruned: [(first.json() as { id: string }).id] });
    expect([...server.objects('sigv4').keys()].sort()).toEqual([`lab/${id}/keys.json`, `lab/${id}/manifest.json`, `lab/${id}/store.snap`]);
    expect((await s.app.inject({ url: '/v1/backups?target=sigv4' })).json()).toMatchObject({ items: [{ id, ok: true, encrypted: true }] });
    const verified = await s.app.inject({ method: 'POST', url: `/v1/backups/${id}/verify`, payload: { target: 'sigv4' } });
    expect(verified.statusCode, verified.body).toBe(200);
    expect(server.refusals).toEqual([]);
    expect(server.accepted).toBeGreaterThan(10);

    const keyFile = path.join(root, 'sigv4-recovery.key');
    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const rightFile = path.join(root, 'sigv4-right');
    writeFileSync(rightFile, `${secretKey}\n`, { mode: 0o600 });
    const wrongSecret = `wrong-${Math.random().toString(36).slice(2)}`;
    const wrongFile = path.join(root, 'sigv4-wrong');
    writeFileSync(wrongFile, `${wrongSecret}\n`, { mode: 0o600 });
    const restoreArgs = (data: string): string[] => ['--from', url, '--access-key-id', accessKeyId, '--recovery-key-file', keyFile, '--data', data, '--name', 'r1', '--api', '127.0.0.1:1', '--peer', '127.0.0.1:2', '--json'];
    const restored = await inProcess('restore', ...restoreArgs(path.join(root, 'sigv4-restored')), '--secret-key-file', rightFile);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ oldClusterId: 'test-cluster' });
    expect(JSON.parse(readFileSync(path.join(root, 'sigv4-restored', 'restored-from.json'), 'utf8'))).toMatchObject({ backup: id, oldClusterId: 'test-cluster' });

    // The wrong secret key, the access key id right: the server refuses the signature.
    expect((await put('sigv4', { s3: { url, accessKeyId, secretKey: wrongSecret }, keepDaily: 1, keepWeekly: 0 })).statusCode).toBe(200);
    now += 60_000;
    const refused = await backup('sigv4');
    expectError(refused, 'backup_failed');
    const body = refused.json() as { message: string; details: Record<string, unknown> };
    expect(body.details).toMatchObject({ target: 'sigv4', s3Code: 'SignatureDoesNotMatch' });
    expect(body.message).toContain(`backup to sigv4 (${url}) failed`);
    expect(body.message).toContain('the S3 server answered 403 SignatureDoesNotMatch');
    expect(body.message).toContain(`does not accept the secret key given for access key id ${accessKeyId}`);
    expect(body.message).toContain(`shoal backup target add sigv4 --s3 URL --access-key-id ${accessKeyId} --secret-key-file FILE`);
    expect(refused.body).not.toContain(wrongSecret);
    expect(server.refusals.map((r) => r.code)).toContain('SignatureDoesNotMatch');
    // Nothing was written, and the target's status says why.
    expect([...server.objects('sigv4').keys()].filter((k) => !k.startsWith(`lab/${id}/`))).toEqual([]);
    const targets = (await s.app.inject({ url: '/v1/backup-targets' })).json() as { items: { name: string; lastError: string | null }[] };
    expect(targets.items.find((t) => t.name === 'sigv4')?.lastError).toContain('SignatureDoesNotMatch');
    const ls = await s.app.inject({ url: '/v1/backups?target=sigv4' });
    expectError(ls, 'backup_failed');
    expect(ls.json()).toMatchObject({ details: { target: 'sigv4', s3Code: 'SignatureDoesNotMatch' } });

    const badRestore = await inProcess('restore', ...restoreArgs(path.join(root, 'sigv4-refused')), '--secret-key-file', wrongFile);
    expect(badRestore.code).toBe(3);
    expect(badRestore.stderr).toContain('SignatureDoesNotMatch');
    expect(badRestore.stderr).toContain(`does not accept the secret key given for access key id ${accessKeyId}`);
    expect(badRestore.stderr).not.toContain(wrongSecret);
    expect(existsSync(path.join(root, 'sigv4-refused'))).toBe(false);
  });
});
