// shoal snapshot: download a consistent snapshot of the cluster's state, and start a new cluster
// from one. A restore never joins the old cluster: it makes a new identity, CA and cluster id,
// with a log that starts at the snapshot's index so that document revisions keep increasing.

import { existsSync, writeFileSync } from 'node:fs';
import { open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'yaml';
import { initNode, isInitialized, loadIdentity } from '../node/identity.ts';
import { bootstrapSnapshotData } from '../server/server.ts';
import { emptyConfState } from '../raft/storage.ts';
import { DiskStorage, storagePaths } from '../storage/index.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { apiErrorFrom, checkHostPort, CliFailure, resolveAddr, send } from './client.ts';
import { addAdminContext } from './credential-issue.ts';
import { commonFlags, help } from './doc-common.ts';
import { initApiDefault, initPeerDefault } from './init.ts';
import { inspectCommand, lsCommand, snapshotInspectHelp, snapshotLsHelp, verifySnapshot } from './snapshot-files.ts';
import { syncDir } from '../storage/sync-dir.ts';
import { planSecretsRestore, restoredSecretsText, writeRestoredKeys } from './snapshot-secrets.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';

/** A snapshot larger than this is refused rather than filling the disk or memory. */
const snapshotBytesMax = 2 * 1024 ** 3;
const downloadTimeoutMs = 10 * 60_000;

export const snapshotSaveHelp = `Usage: shoal snapshot save FILE [--addr HOST:PORT] [--json]

Downloads a consistent snapshot of the cluster's documents (GET /v1/cluster/snapshot): the
applied state of the node at --addr after it caught up with the leader. The file is written to
FILE.tmp, synced, checked (checksum and layout), and only then renamed to FILE, so FILE is
either the old file or a complete new snapshot. Prints its size, index and cluster id.

Options:
${commonFlagsHelp}

With --json prints {file, bytes, index, term, clusterId, members, documents}.
${clientExitCodes} A damaged download exits 1 and leaves FILE as it was.`;

export const snapshotRestoreHelp = `Usage: shoal snapshot restore FILE --data DIR --name NAME [--api HOST:PORT] [--peer HOST:PORT]
                              [--recovery-key-file FILE | --recovery-key-stdin | --discard-secrets] [--json]

Starts a NEW cluster from a snapshot file: a new node identity, a new cluster CA and a new
cluster id in DIR, holding the snapshot's documents with their revisions (the log continues
after the snapshot's index, so revisions keep increasing). The old cluster is not touched and
cannot talk to the new one. Start the node with 'shoal serve --config DIR/shoal.yaml', then add
more nodes with 'shoal cluster add'. An admin credential for the new cluster is added as the
current context NAME (or --context's name; shoal context ls).

Secrets: a snapshot holds them encrypted under the old cluster's keys, which are not in it. With
the recovery key (printed by 'shoal init', or made by 'shoal secret recovery-key') the restore
opens those keys and the new cluster reads its secrets. Without it the restore is refused
(recovery_key_required), unless --discard-secrets: the new cluster gets new keys (and a new
recovery key, printed once), and the old secrets stay unreadable until each is set again
('shoal secret set NAME ...'). The key is read from a file or stdin, never from the command line.

Options:
  --data DIR         data directory for the new node; must not hold a node already
  --name NAME        the new node's name
  --api HOST:PORT    its client API address (default ${initApiDefault})
  --peer HOST:PORT   its peer transport address (default ${initPeerDefault})
  --recovery-key-file FILE  the old cluster's recovery key, in FILE
  --recovery-key-stdin      the old cluster's recovery key, on standard input
  --discard-secrets  restore without the recovery key: the secrets it holds stay unreadable
  --json             print {clusterId, oldClusterId, nodeId, name, index, documents, dataDir, config,
                     credential, secrets: {readable, unreadable}, recoveryKey?}
  -h, --help         show this help

Exit codes: 0 restored; 1 the file is missing or damaged, DIR already holds a node, the snapshot
holds encrypted secrets and no recovery key was given (recovery_key_required), or the key is not
the snapshot's (unlock_key_invalid) (nothing was written in these cases), or writing DIR failed
(the message says what to remove); 2 usage error.`;

export const snapshotGroup: Group = {
  name: 'snapshot',
  about: 'Backs up the cluster\'s documents to a file, lists and checks such files, and starts a new cluster from one.',
  subcommands: {
    save: { summary: 'download a consistent snapshot to a file', help: snapshotSaveHelp, run: saveCommand },
    restore: { summary: 'start a NEW cluster (new id and CA) from a snapshot file', help: snapshotRestoreHelp, run: restoreCommand },
    ls: { summary: "list a node's scheduled snapshot files", help: snapshotLsHelp, run: lsCommand },
    inspect: { summary: 'check a snapshot file and show what it holds', help: snapshotInspectHelp, run: inspectCommand },
  },
};

export const snapshotHelps: Record<string, string> = { save: snapshotSaveHelp, restore: snapshotRestoreHelp, ls: snapshotLsHelp, inspect: snapshotInspectHelp };

export const snapshotGroupHelp = groupHelp(snapshotGroup);

export function snapshotCommand(argv: string[]): Promise<number> {
  return runGroup(snapshotGroup, argv);
}

const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** Progress on stderr: rewritten in place on a terminal, a line every 5 s otherwise. */
function progress(label: string): { update: (done: number, total: number | undefined) => void; end: () => void } {
  const tty = process.stderr.isTTY;
  const everyMs = tty ? 200 : 5000;
  let last = Date.now();
  let shown = false;
  return {
    update: (done, total) => {
      const now = Date.now();
      if (now - last < everyMs) return;
      last = now;
      shown = true;
      const text = `${label}: ${mib(done)}${total !== undefined ? ` of ${mib(total)} (${Math.floor((done / total) * 100)}%)` : ''}`;
      if (tty) process.stderr.write(`\r${text}`);
      else console.error(text);
    },
    end: () => {
      if (shown && tty) process.stderr.write('\n');
    },
  };
}

async function saveCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags }, snapshotSaveHelp);
  if (values.help) return help(snapshotSaveHelp);
  const [file, ...extra] = positionals;
  if (file === undefined || extra.length > 0) throw new UsageError('expected one FILE');
  const addr = resolveAddr(values.addr);
  const tmp = `${file}.tmp`;
  const bytes = await download(addr, tmp, file);
  let verified: ReturnType<typeof verifySnapshot>;
  try {
    // Check what is on disk, not what was received: the read-back is what a restore will see.
    verified = verifySnapshot(await readFile(tmp), `the snapshot downloaded from ${addr}`);
  } catch (err) {
    await rm(tmp, { force: true });
    if (err instanceof CliFailure) throw new CliFailure(`${err.message}\n  ${file} was left as it was; try again, or from another node with --addr`, err.exitCode, err.code);
    throw err;
  }
  await rename(tmp, file);
  await syncDir(path.dirname(path.resolve(file)));
  const { body, documents } = verified;
  if (values.json) {
    console.log(JSON.stringify({ file: path.resolve(file), bytes, index: body.index, term: body.term, clusterId: body.clusterId, members: body.members.length, documents }, null, 2));
  } else {
    console.log(`saved ${file}: ${bytes} bytes, index ${body.index}, term ${body.term}, cluster ${body.clusterId}, ${documents} documents, ${body.members.length} members`);
  }
  return exitCodes.ok;
}

/** Streams the snapshot to `tmp` (synced); removes it on any failure. Returns the byte count. */
async function download(addr: string, tmp: string, file: string): Promise<number> {
  const res = await send(addr, '/v1/cluster/snapshot', { signal: AbortSignal.timeout(downloadTimeoutMs) });
  if (!res.ok) throw await apiErrorFrom(res, addr);
  const lengthHeader = Number(res.headers.get('content-length'));
  const total = Number.isFinite(lengthHeader) && lengthHeader > 0 ? lengthHeader : undefined;
  if (total !== undefined && total > snapshotBytesMax) throw new CliFailure(`the snapshot is ${mib(total)}, more than the ${mib(snapshotBytesMax)} this command accepts`, exitCodes.failed);
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(tmp, 'w', 0o600);
  } catch (err) {
    await res.body?.cancel();
    throw new CliFailure(`cannot write ${tmp}: ${(err as Error).message}; nothing was saved`, exitCodes.failed);
  }
  const bar = progress(`downloading the snapshot from ${addr}`);
  let bytes = 0;
  try {
    const reader = res.body?.getReader();
    for (;;) {
      const chunk = reader === undefined ? { done: true as const, value: undefined } : await reader.read();
      if (chunk.done) break;
      bytes += chunk.value.byteLength;
      if (bytes > snapshotBytesMax) throw new CliFailure(`the snapshot exceeds ${mib(snapshotBytesMax)}; stopped`, exitCodes.failed);
      await fh.write(chunk.value);
      bar.update(bytes, total);
    }
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    const why = err instanceof CliFailure ? err.message : `the download from ${addr} broke off after ${bytes} bytes (${(err as Error).message})`;
    throw new CliFailure(`${why}\n  ${file} was left as it was; try again, or from another node with --addr`, err instanceof CliFailure ? err.exitCode : exitCodes.unavailable);
  } finally {
    bar.end();
  }
  await fh.close();
  return bytes;
}

/**
 * What `shoal restore` adds to a snapshot restore once the new node's identity is made and before
 * its log is written: the replicated volumes received into DIR, and the store with their records
 * rewritten for the new node (at a later index). A failure there leaves DIR to remove.
 */
export type RestoreHook = (o: { dataDir: string; nodeId: string; app: Uint8Array; index: number }) => Promise<{ app: Uint8Array; index: number; report?: Record<string, unknown> }>;

async function restoreCommand(argv: string[]): Promise<number> {
  return await snapshotRestoreCommand(argv);
}

/** `shoal snapshot restore` (argv without 'restore'), with `hook` run between the identity and the log. */
export async function snapshotRestoreCommand(argv: string[], hook?: RestoreHook): Promise<number> {
  const { values, positionals } = parse(argv, {
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    data: { type: 'string' }, name: { type: 'string' },
    api: { type: 'string', default: initApiDefault }, peer: { type: 'string', default: initPeerDefault },
    'recovery-key-file': { type: 'string' }, 'recovery-key-stdin': { type: 'boolean', default: false }, 'discard-secrets': { type: 'boolean', default: false },
  }, snapshotRestoreHelp);
  if (values.help) return help(snapshotRestoreHelp);
  const [file, ...extra] = positionals;
  if (file === undefined || extra.length > 0) throw new UsageError('expected one FILE');
  if (values.data === undefined || values.name === undefined) throw new UsageError(`missing ${[values.data === undefined ? '--data' : '', values.name === undefined ? '--name' : ''].filter(Boolean).join(' and ')}`);
  const dataDir = values.data;
  const apiAddress = checkHostPort(values.api, '--api');
  const peerAddress = checkHostPort(values.peer, '--peer');

  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    throw new CliFailure(`cannot read ${file}: ${(err as Error).message}`, exitCodes.failed);
  }
  const { body, documents } = verifySnapshot(bytes, file);
  if (body.index < 1) throw new CliFailure(`${file} is at index 0: there is nothing to restore`, exitCodes.failed);
  refuseInitialized(dataDir);
  const given = [values['recovery-key-file'] !== undefined, values['recovery-key-stdin'], values['discard-secrets']].filter(Boolean).length;
  if (given > 1) throw new UsageError('give at most one of --recovery-key-file, --recovery-key-stdin and --discard-secrets');
  const recoveryText = values['recovery-key-file'] !== undefined ? await readKeyText(values['recovery-key-file']) : values['recovery-key-stdin'] ? await readStdinText() : undefined;
  // Checked before anything is written: the keys the snapshot's secrets need, opened, or a refusal.
  const secrets = planSecretsRestore(body.app, file, recoveryText, values['discard-secrets']);

  const identity = await initNode({ dataDir, name: values.name, hosts: [hostOf(apiAddress), hostOf(peerAddress)] });
  const newRecoveryKey = writeRestoredKeys(dataDir, secrets);
  const member = { id: identity.id, name: values.name, peerAddress, apiAddress };
  const restored = await runHook(hook, { dataDir, nodeId: identity.id, app: body.app, index: body.index });
  try {
    const storage = await DiskStorage.open(dataDir);
    try {
      await storage.save({
        entries: [],
        hardState: { term: 1, vote: '', commit: restored.index },
        snapshot: {
          meta: { index: restored.index, term: 1, confState: { ...emptyConfState(), voters: [identity.id] } },
          data: bootstrapSnapshotData([member], restored.app),
        },
      }, { sync: true });
    } finally {
      await storage.close();
    }
  } catch (err) {
    throw new CliFailure(`${dataDir} has the new node identity but its log could not be written: ${(err as Error).message}\n  remove ${dataDir} and run the command again`, exitCodes.failed);
  }
  const config = path.join(dataDir, 'shoal.yaml');
  const configKept = existsSync(config);
  if (!configKept) writeFileSync(config, stringify({ dataDir: '.', api: { listen: apiAddress }, peer: { listen: peerAddress } }));
  // A new cluster has a new CA: the user gets an admin credential for it, as from shoal init.
  const { file: credential } = await addAdminContext(dataDir, [apiAddress], values.name);

  const secretsOut = { readable: secrets.readable, unreadable: secrets.unreadable };
  if (values.json) {
    console.log(JSON.stringify({
      clusterId: identity.clusterId, oldClusterId: body.clusterId, nodeId: identity.id, name: values.name, index: body.index, documents,
      dataDir: path.resolve(dataDir), config: path.resolve(config), credential, secrets: secretsOut, ...restored.report, ...(newRecoveryKey !== undefined ? { recoveryKey: newRecoveryKey } : {}),
    }, null, 2));
    return exitCodes.ok;
  }
  console.log(restoredSecretsText(secrets, newRecoveryKey));
  console.log(`restored ${documents} documents at index ${body.index} into a NEW cluster ${identity.clusterId} (the old cluster was ${body.clusterId})
node ${values.name} (${identity.id}), the only voter, api ${apiAddress}, peer ${peerAddress}${configKept ? `\nkept the existing ${config}: check that its api.listen and peer.listen are ${apiAddress} and ${peerAddress}` : ''}
admin credential: ${credential}
start it with: shoal serve --config ${config}
add more nodes with shoal cluster add (prepare each with: shoal init --data DIR --name NAME --ca-from ${dataDir})`);
  return exitCodes.ok;
}

async function runHook(hook: RestoreHook | undefined, o: Parameters<RestoreHook>[0]): ReturnType<RestoreHook> {
  if (hook === undefined) return { app: o.app, index: o.index };
  try {
    return await hook(o);
  } catch (err) {
    throw new CliFailure(`${o.dataDir} has the new node identity but restoring its volumes failed: ${(err as Error).message}\n  remove ${o.dataDir} (umount ${path.join(o.dataDir, 'volumes', '*', 'mnt')} first if one is mounted) and run the command again`, exitCodes.failed);
  }
}

function hostOf(hostPort: string): string {
  return hostPort.slice(0, hostPort.lastIndexOf(':')).replace(/^\[|\]$/g, '');
}

function refuseInitialized(dataDir: string): void {
  const nothingWritten = 'nothing was written; restore into a new, empty directory';
  if (isInitialized(dataDir)) {
    let who = '';
    try {
      who = ` (node ${loadIdentity(dataDir).id})`;
    } catch {
      who = '';
    }
    throw new CliFailure(`${dataDir} is already initialized${who}; ${nothingWritten}`, exitCodes.failed, 'already_initialized');
  }
  const p = storagePaths(dataDir);
  if (existsSync(p.log) || existsSync(p.wal) || existsSync(p.snapshots)) throw new CliFailure(`${dataDir} already holds a log (${p.log}); ${nothingWritten}`, exitCodes.failed, 'already_initialized');
}

async function readKeyText(file: string): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch (err) {
    throw new CliFailure(`cannot read ${file}: ${(err as Error).message}; nothing was written`, exitCodes.failed);
  }
}

async function readStdinText(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8').trim();
}
