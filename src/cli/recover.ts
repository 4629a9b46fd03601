// shoal recover --force-new-cluster: quorum lost for good, rebuild a one-node cluster from the
// data directory of the member still standing (docs/operations.md, "Recovery"). The rewrite is
// src/node/recovery/force-new-cluster.ts; this file holds the guards around it: the node must be stopped
// (its data directory lock), not recovered before (the marker), no other member may answer, and
// the operator confirms.

import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import { loadConfig, splitHostPort } from '../server/config.ts';
import { forceNewCluster, planForceNewCluster, type ForceNewClusterPlan } from '../node/recovery/force-new-cluster.ts';
import { isInitialized, loadIdentity, type Identity } from '../node/identity.ts';
import { markerPath, readMarker, type RecoveryMarker } from '../node/recovery/recovery-files.ts';
import { caKeyFile } from '../security/authority.ts';
import { holdsKeyFile } from '../security/key-vault.ts';
import { DiskStorage } from '../storage/index.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure } from './client.ts';
import { help } from './doc-common.ts';

/** How long each other member's address gets to answer before it counts as down. */
export const probeTimeoutMs = 2000;

export const recoverHelp = `Usage: shoal recover --force-new-cluster --data DIR [--yes] [--json]

Quorum lost for good (a majority of the voters dead, say two of three machines): rebuilds a
ONE-NODE cluster from this node's data directory, as etcd's --force-new-cluster does. Stop the
node first; the command refuses while it runs. In DIR it:
  - keeps every document: the log is kept whole, through the last entry the node holds, also
    the entries it never saw committed (docs/operations.md, "Recovery", says why);
  - appends a membership change, already committed, that leaves this node the only voter; the
    other members' ids go on the cluster's removed list;
  - gives the cluster a NEW cluster id (node.json): an old member that comes back is refused (it
    hears it was removed and exits 5) instead of forming a majority of the old configuration;
    the CA, certificates and client credentials stay valid;
  - moves the old storage to DIR/pre-recover-<time>/ (renamed, not deleted) and writes
    DIR/recovered.json, so that a second run is refused.

Before it changes anything it tries every other member's peer and API address (${probeTimeoutMs / 1000} s each)
and refuses if any answers: that member is alive. A machine that is merely unreachable from here
but alive elsewhere is exactly the split-brain risk: it and the members it reaches keep their
cluster while this one starts another, both taking writes. Power the others off, or make sure
they are gone for good, before you run this. On a terminal it asks you to type the node's name.

Then start the node ('shoal serve', or its systemd unit): it leads alone. Wipe the old members'
data directories (never start them on their old data), and join them again with tokens: here
'shoal token create --role voter', there 'shoal join ADDR --token T'.

Options:
  --force-new-cluster  required: says out loud which recovery this is
  --data DIR           the survivor's data directory
  --yes                do not ask for confirmation (scripts)
  --json               print {clusterId, oldClusterId, nodeId, name, commitIndex, lastIndex,
                       index, uncommitted, removed, backup, marker}
  -h, --help           show this help

Exit codes: 0 recovered; 1 refused and nothing changed (another member answers, DIR was recovered
before, the node is the only member or not one, no confirmation) or the rewrite failed (the
message says what is where); 2 usage error; 4 the storage is damaged (storage_corrupt); 7 a
storage format this release does not know; 8 the node is running (data_dir_locked): stop it.`;

export async function recoverCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    'force-new-cluster': { type: 'boolean', default: false }, data: { type: 'string' }, yes: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, recoverHelp);
  if (values.help) return help(recoverHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.data === undefined) throw new UsageError('missing --data DIR (the survivor\'s data directory)');
  if (!values['force-new-cluster']) throw new UsageError('missing --force-new-cluster (the only recovery this command does; read --help first)');
  const dataDir = path.resolve(values.data);
  const identity = checkDataDir(dataDir);
  // Opening the storage takes the data directory's lock: a running node refuses it (exit 8).
  const storage = await DiskStorage.open(dataDir);
  let marker: RecoveryMarker;
  let names = new Map<string, string>();
  try {
    const plan = planForceNewCluster(storage, identity.id);
    names = new Map(plan.others.map((m) => [m.id, m.name]));
    refuseUnfit(plan, identity);
    await refuseAnswering(plan);
    if (!values.yes) await confirm(identity, plan);
    marker = await rewrite(dataDir, storage, plan, identity);
  } finally {
    await storage.close();
  }
  if (values.json) {
    console.log(JSON.stringify({ ...summaryOf(marker), backup: path.join(dataDir, marker.backup), marker: markerPath(dataDir) }, null, 2));
  } else {
    printDone(dataDir, marker, names);
  }
  return exitCodes.ok;
}

/** forceNewCluster, with a failure said in terms of what is where now. */
async function rewrite(dataDir: string, storage: DiskStorage, plan: ForceNewClusterPlan, identity: Identity): Promise<RecoveryMarker> {
  try {
    return await forceNewCluster(dataDir, storage, plan, identity);
  } catch (err) {
    const found = readMarker(dataDir);
    if (found === undefined) {
      throw new CliFailure(`the new log could not be written (${(err as Error).message}); nothing in ${dataDir} was changed`, exitCodes.failed, 'recover_failed');
    }
    const where = found.ok ? `the old storage is in ${path.join(dataDir, found.marker.backup)}, or still in place` : 'see the pre-recover-* and recover-*.tmp directories';
    throw new CliFailure(`the rewrite stopped part way (${(err as Error).message}): ${markerPath(dataDir)} says it started; ${where}. ` +
      'Finish it by hand or undo it: docs/operations.md, "Recovery", "Undoing it"', exitCodes.failed, 'recover_failed');
  }
}

/** The node's identity, once DIR is known to hold a node never recovered. */
function checkDataDir(dataDir: string): Identity {
  if (!isInitialized(dataDir)) throw new CliFailure(`${dataDir} holds no node (no node.json); give the survivor's data directory`, exitCodes.failed, 'not_found');
  const found = readMarker(dataDir);
  if (found !== undefined) {
    const interrupted = found.ok && found.marker.state === 'started' ? ` (that run was interrupted: see the old storage in ${found.marker.backup})` : '';
    const what = found.ok
      ? `was recovered already, at ${found.marker.at}, into cluster ${found.marker.clusterId}${interrupted}`
      : `holds ${markerPath(dataDir)}, which cannot be read (${found.problem})`;
    throw new CliFailure(`refusing: ${dataDir} ${what}. A second forced rewrite would drop the members added since. ` +
      `If you really mean to run it again, read ${markerPath(dataDir)}, then move it aside`, exitCodes.failed, 'already_recovered');
  }
  return loadIdentity(dataDir);
}

function refuseUnfit(plan: ForceNewClusterPlan, identity: Identity): void {
  if (!plan.isMember) {
    throw new CliFailure(`refusing: this node (${identity.name}, ${identity.id}) is not a member of the configuration its own log ends with (removed, or never added); recover from a node that was a voter`, exitCodes.failed, 'not_member');
  }
  if (plan.otherIds.length === 0) {
    throw new CliFailure(`refusing: this node (${identity.name}) is already the only member of its cluster; start it, it needs no recovery`, exitCodes.failed, 'nothing_to_recover');
  }
}

/** Refuses when any other member answers on its peer or API address. */
async function refuseAnswering(plan: ForceNewClusterPlan): Promise<void> {
  const targets = plan.others.flatMap((m) => [{ m, kind: 'peer', address: m.peerAddress }, { m, kind: 'api', address: m.apiAddress }]);
  const answers = await Promise.all(targets.map(async (t) => ({ ...t, answers: await answersTcp(t.address, probeTimeoutMs) })));
  const alive = plan.others.map((m) => ({ m, on: answers.filter((a) => a.m === m && a.answers).map((a) => `${a.address} (${a.kind})`) })).filter((x) => x.on.length > 0);
  if (alive.length === 0) return;
  const who = alive.map(({ m, on }) => `${m.name} (${m.id}) answers on ${on.join(' and ')}`).join('; ');
  throw new CliFailure(`refusing: ${who}. A member that answers is alive: if the cluster has lost its quorum, start the ` +
    'stopped members instead; forcing a new cluster next to a live member makes two clusters that both take writes. ' +
    'Nothing was changed', exitCodes.failed, 'members_reachable');
}

/** Whether a TCP connection to host:port opens within `timeoutMs`. */
export function answersTcp(address: string, timeoutMs: number): Promise<boolean> {
  let host: string;
  let port: number;
  try {
    ({ host, port } = splitHostPort(address));
  } catch {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (up: boolean): void => {
      socket.destroy();
      resolve(up);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** On a terminal: the operator types the node's name. Elsewhere --yes is needed. */
async function confirm(identity: Identity, plan: ForceNewClusterPlan): Promise<void> {
  if (!process.stdin.isTTY) {
    throw new CliFailure('refusing: no confirmation. This rewrites the node\'s data directory; pass --yes to confirm when not on a terminal', exitCodes.failed, 'not_confirmed');
  }
  const names = plan.others.map((m) => m.name).join(', ') || plan.otherIds.join(', ');
  process.stderr.write(`This makes ${identity.name} (${identity.id}) the only member of a NEW cluster, removing ${names} for good.\n` +
    `It keeps the log through index ${plan.lastIndex} (commit index ${plan.hardState.commit}). Make sure the other machines are off.\n`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const typed = (await rl.question(`Type the node's name (${identity.name}) to go on: `)).trim();
    if (typed !== identity.name) throw new CliFailure('not confirmed; nothing was changed', exitCodes.failed, 'not_confirmed');
  } finally {
    rl.close();
  }
}

function summaryOf(m: RecoveryMarker): Record<string, unknown> {
  return {
    clusterId: m.clusterId, oldClusterId: m.oldClusterId, nodeId: m.nodeId, name: m.name, commitIndex: m.commitIndex,
    lastIndex: m.lastIndex, index: m.index, uncommitted: m.lastIndex - m.commitIndex, removed: m.removed,
  };
}

function printDone(dataDir: string, m: RecoveryMarker, names: ReadonlyMap<string, string>): void {
  const uncommitted = m.lastIndex - m.commitIndex;
  const removed = m.removed.map((id) => (names.has(id) ? `${names.get(id)} (${id})` : id)).join(', ');
  const lines = [
    `forced a new one-node cluster from ${m.name} (${m.nodeId})`,
    `  cluster     ${m.clusterId} (was ${m.oldClusterId})`,
    `  log         kept through index ${m.lastIndex}; its commit index was ${m.commitIndex}${uncommitted > 0 ? ` (${uncommitted === 1 ? 'the entry' : `the ${uncommitted} entries`} after it kept, and committed now)` : ''}`,
    `  members     ${m.name} alone, a voter; removed ${removed}`,
    `  old storage ${path.join(dataDir, m.backup)} (moved, not deleted)`,
    `  marker      ${markerPath(dataDir)}`,
    ...warnings(dataDir, m),
    'next:',
    `  1. start the node: shoal serve --config ${path.join(dataDir, 'shoal.yaml')} (or its systemd unit); it leads alone`,
    '  2. wipe the old members\' data directories; never start them on their old data',
    '  3. join each again: here shoal token create --role voter, on that machine shoal join ADDR --token T',
  ];
  console.log(lines.join('\n'));
}

/** What the operator must know before the node starts. */
function warnings(dataDir: string, m: RecoveryMarker): string[] {
  const out: string[] = [];
  if (!holdsKeyFile(caKeyFile(dataDir))) {
    out.push(`warning: this node holds no CA key (${caKeyFile(dataDir)}): it cannot sign the certificates of joining nodes; copy tls/ca.key from a backup of a former member`);
  }
  let docker = false;
  try {
    docker = loadConfig(path.join(dataDir, 'shoal.yaml')).runtime.kind === 'docker';
  } catch {
    docker = false;
  }
  if (docker) {
    out.push(`warning: containers carry their cluster's id: any this node ran are not adopted in the new cluster. Before starting it, remove them (docker ps -q --filter label=io.shoal.cluster=${m.oldClusterId} | xargs -r docker rm -f); the node starts its tasks again`);
  }
  return out;
}
