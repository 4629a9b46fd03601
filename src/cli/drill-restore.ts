// shoal drill restore: proves a backup restores, without touching the cluster or this user's
// contexts. It reads the backup as `shoal restore` does (every digest checked, opened with the
// recovery key), restores it into a scratch directory, starts that node in this process on
// loopback ports with no container runtime (nothing is run), and asks its API, over HTTPS with
// the credential the restore made, for the services and secrets: every one the backup holds must
// be there. Then it stops the node and removes the scratch directory (unless --keep) and reports.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Agent } from 'undici';
import { stringify, parse as parseYaml } from 'yaml';
import { DocumentStore } from '../../fsm/index.ts';
import { decodeSnapshotFile } from '../node/recovery/snapshot-file.ts';
import { isBackupTargetSecretName } from '../resources/backup-targets.ts';
import { secretsCollection, servicesCollection } from '../resources/collections.ts';
import { isRegistrySecretName } from '../resources/registry-logins.ts';
import { allDocs } from '../resources/state.ts';
import { parseKeyText, recoveryKeyPrefix } from '../security/unlock-key.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';
import { parseConfig } from '../server/config.ts';
import { startNode } from '../server/server.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure } from './client.ts';
import { help } from './doc-common.ts';
import { readBackup } from './restore.ts';
import { snapshotRestoreCommand } from './snapshot.ts';
import { volumesRestoreHook, type RestoredVolume } from './restore-volumes.ts';

export const drillRestoreHelp = `Usage: shoal drill restore --from WHERE [--id ID] --recovery-key-file FILE
                          [--host-key SHA256:... [--port N] --key-file FILE]
                          [--access-key-id ID --secret-key-file FILE [--region R] [--ca-file FILE]] [--keep] [--json]

A restore drill: reads the newest sound backup (or ID) from WHERE (a directory, or USER@HOST:PATH
over SFTP) as 'shoal restore' does, restores it into a scratch directory as a new one-node
cluster, starts that node in this process on loopback ports with no container runtime (no task
is run, the cluster and this user's contexts are not touched), and checks over its HTTPS API,
with the credential the restore made, that every service and secret of the backup came back,
and every replicated volume: its stream received into the scratch directory (btrfs receive:
needs root and btrfs-progs; an increment with the whole stream and the increments of its chain,
each backup of which must be on the target) and listed by the node as its newest complete copy.
Then it stops the node and removes the scratch directory, and reports.

Options:
  --from WHERE          the target: a directory, USER@HOST:PATH for SFTP, or
                        http(s)://HOST[:PORT]/BUCKET[/PREFIX] for S3 (with --access-key-id,
                        --secret-key-file, --region, --ca-file as 'shoal restore' takes them)
  --id ID               the backup (default: the newest sound one)
  --recovery-key-file FILE  the cluster's recovery key
  --host-key SHA256:..  SFTP: the server's host key
  --port N              SFTP: the port (default 22)
  --key-file FILE       SFTP: the user's private key
  --keep                keep the scratch directory (its path is printed)
  --json                print {ok, backup, services: {expected, found, missing}, secrets: {...},
                        volumes: {...} (as NAME@VERSION), dir}
  -h, --help            show this help

Exit codes: 0 everything came back; 1 the backup is damaged or does not open, or something did
not come back (the report says what); 2 usage error.`;

/** Names of the services and workload secrets a store snapshot holds. */
function namesIn(plain: Uint8Array): { services: string[]; secrets: string[] } {
  const store = new DocumentStore();
  store.restore(decodeSnapshotFile(plain, 'the backup').app);
  const ids = (c: string): string[] => [...allDocs(store, c)].map((d) => d.id).sort();
  return { services: ids(servicesCollection), secrets: ids(secretsCollection).filter((n) => !isRegistrySecretName(n) && !isBackupTargetSecretName(n)) };
}

/** Runs `f` with console.log captured and SHOAL_CONFIG pointing at `configDir`; answers what it printed. */
async function quietly(configDir: string, f: () => Promise<number>): Promise<{ code: number; out: string }> {
  const log = console.log;
  const env = process.env.SHOAL_CONFIG;
  let out = '';
  console.log = (...a: unknown[]) => { out += `${a.join(' ')}\n`; };
  process.env.SHOAL_CONFIG = configDir;
  try {
    return { code: await f(), out };
  } finally {
    console.log = log;
    if (env === undefined) delete process.env.SHOAL_CONFIG;
    else process.env.SHOAL_CONFIG = env;
  }
}

async function getNames(api: string, cred: { ca: string; cert: string; key: string }, urlPath: string): Promise<string[]> {
  const agent = new Agent({ connect: { ca: cred.ca, cert: cred.cert, key: cred.key, checkServerIdentity: checkNodeServerIdentity } });
  try {
    const res = await fetch(`https://${api}${urlPath}`, { dispatcher: agent, signal: AbortSignal.timeout(10_000) } as RequestInit);
    if (!res.ok) throw new Error(`${urlPath} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
    const body = await res.json() as { items: { name?: string; service?: { name: string } }[] };
    return body.items.map((i) => i.name ?? i.service?.name ?? '').sort();
  } finally {
    await agent.close();
  }
}

/** The restored node's replicated volumes: each one's newest complete copy and its holders. */
async function getVolumes(api: string, cred: { ca: string; cert: string; key: string }): Promise<{ name: string; newest: { version: string; nodes: string[] } | null }[]> {
  const agent = new Agent({ connect: { ca: cred.ca, cert: cred.cert, key: cred.key, checkServerIdentity: checkNodeServerIdentity } });
  try {
    const res = await fetch(`https://${api}/v1/volumes`, { dispatcher: agent, signal: AbortSignal.timeout(10_000) } as RequestInit);
    if (!res.ok) throw new Error(`/v1/volumes answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
    return (await res.json() as { items: { name: string; newest: { version: string; nodes: string[] } | null }[] }).items;
  } finally {
    await agent.close();
  }
}

/** The volumes with a stream (as NAME@VERSION), and those the restored node lists as its newest complete copy. */
async function volumesBack(api: string, cred: { ca: string; cert: string; key: string }, volumes: readonly RestoredVolume[]): Promise<{ expected: string[]; found: string[]; missing: string[] }> {
  const wanted = volumes.filter((v) => v.streams.length > 0).map((v) => `${v.entry.name}@${v.entry.version ?? ''}`).sort();
  const back = (await getVolumes(api, cred)).filter((v) => v.newest !== null && v.newest.nodes.length > 0).map((v) => `${v.name}@${v.newest?.version ?? ''}`).sort();
  return { expected: wanted, found: back, missing: missing(wanted, back) };
}

/** A port free on loopback now (the drill's node listens there a moment later). */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

const missing = (expected: string[], found: string[]): string[] => expected.filter((n) => !found.includes(n));

export async function drillRestoreCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    from: { type: 'string' }, id: { type: 'string' }, 'recovery-key-file': { type: 'string' },
    'host-key': { type: 'string' }, port: { type: 'string' }, 'key-file': { type: 'string' }, keep: { type: 'boolean', default: false },
    'access-key-id': { type: 'string' }, 'secret-key-file': { type: 'string' }, region: { type: 'string' }, 'ca-file': { type: 'string' },
  }, drillRestoreHelp);
  if (values.help) return help(drillRestoreHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.from === undefined || values['recovery-key-file'] === undefined) throw new UsageError(`missing ${[values.from === undefined ? '--from' : '', values['recovery-key-file'] === undefined ? '--recovery-key-file' : ''].filter(Boolean).join(' and ')}`);
  const keyFile = values['recovery-key-file'];
  const keyText = (await readFile(keyFile, 'utf8').catch((err: unknown) => { throw new CliFailure(`cannot read ${keyFile}: ${(err as Error).message}`, exitCodes.failed); })).trim();
  const raw = parseKeyText(recoveryKeyPrefix, keyText);
  if (raw === undefined) throw new CliFailure(`${keyFile} holds no recovery key (${recoveryKeyPrefix} and 43 letters, digits, - and _)`, exitCodes.failed, 'unlock_key_invalid');
  const startedAt = Date.now();
  const { plain, volumes, backup, close } = await readBackup(values.from, { ...values, 'password-stdin': false }, values.id, raw);

  const scratch = mkdtempSync(path.join(tmpdir(), 'shoal-drill-restore-'));
  const data = path.join(scratch, 'node');
  type Check = { expected: string[]; found: string[]; missing: string[] };
  let report: { ok: boolean; backup: typeof backup; services: Check; secrets: Check; volumes: Check; elapsedMs: number; dir: string | null };
  try {
    const expected = namesIn(plain);
    writeFileSync(path.join(scratch, 'store.snap'), plain, { mode: 0o600 });
    writeFileSync(path.join(scratch, 'recovery-key'), `${keyText}\n`, { mode: 0o600 });
    const api = `127.0.0.1:${await freeLoopbackPort()}`;
    const peer = `127.0.0.1:${await freeLoopbackPort()}`;
    const restored = await quietly(path.join(scratch, 'config'), () => snapshotRestoreCommand([path.join(scratch, 'store.snap'), '--data', data, '--name', 'drill',
      '--api', api, '--peer', peer, '--recovery-key-file', path.join(scratch, 'recovery-key'), '--json'], volumesRestoreHook(volumes)));
    if (restored.code !== exitCodes.ok) throw new CliFailure(`the restore into ${data} failed (exit ${restored.code}): ${restored.out}`, exitCodes.failed);
    const out = JSON.parse(restored.out) as { credential: string };
    const credential = JSON.parse(readFileSync(out.credential, 'utf8')) as { ca: string; cert: string; key: string };
    const configFile = path.join(data, 'shoal.yaml');
    const config = parseConfig({ ...(parseYaml(readFileSync(configFile, 'utf8')) as Record<string, unknown>), dataDir: data, runtime: { kind: 'none' } }, configFile);
    writeFileSync(configFile, stringify({ ...(parseYaml(readFileSync(configFile, 'utf8')) as Record<string, unknown>), runtime: { kind: 'none' } }));
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    // No scheduled backup: the targets in the restored store are the real cluster's.
    const node = await startNode(config, quiet, { clusterEvents: false, backupSchedule: false });
    try {
      const deadline = Date.now() + 60_000;
      let found: { services: string[]; secrets: string[] } | undefined;
      let last = '';
      while (found === undefined && Date.now() < deadline) {
        try {
          found = { services: await getNames(api, credential, '/v1/services'), secrets: await getNames(api, credential, '/v1/secrets') };
        } catch (err) {
          last = (err as Error).message;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      if (found === undefined) throw new CliFailure(`the restored node did not answer within 60 s: ${last}`, exitCodes.failed);
      const services = { expected: expected.services, found: found.services, missing: missing(expected.services, found.services) };
      const secrets = { expected: expected.secrets, found: found.secrets, missing: missing(expected.secrets, found.secrets) };
      // A volume is back when its stream was received whole (the receive checked it) and the
      // restored node lists that version, held by itself, as the newest complete copy.
      const vols = await volumesBack(api, credential, volumes);
      report = { ok: services.missing.length === 0 && secrets.missing.length === 0 && vols.missing.length === 0, backup, services, secrets, volumes: vols, elapsedMs: Date.now() - startedAt, dir: values.keep ? scratch : null };
    } finally {
      await node.stop();
    }
  } finally {
    if (!values.keep) rmSync(scratch, { recursive: true, force: true });
    await close();
  }
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else {
    console.log(`restore drill of backup ${backup.id} (cluster ${backup.clusterId}, index ${backup.index}): ${report.ok ? 'PASSED' : 'FAILED'} in ${(report.elapsedMs / 1000).toFixed(1)} s`);
    console.log(`  services ${report.services.expected.length - report.services.missing.length}/${report.services.expected.length} back${report.services.missing.length > 0 ? `; missing: ${report.services.missing.join(', ')}` : ''}`);
    console.log(`  secrets  ${report.secrets.expected.length - report.secrets.missing.length}/${report.secrets.expected.length} back${report.secrets.missing.length > 0 ? `; missing: ${report.secrets.missing.join(', ')}` : ''}`);
    console.log(`  volumes ${report.volumes.expected.length - report.volumes.missing.length}/${report.volumes.expected.length} back${report.volumes.missing.length > 0 ? `; missing: ${report.volumes.missing.join(', ')}` : ''}`);
    if (report.dir !== null) console.log(`  kept ${report.dir}`);
  }
  return report.ok ? exitCodes.ok : exitCodes.failed;
}
