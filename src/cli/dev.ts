// shoal dev: a local cluster of separate processes for trying shoal out, one supervisor per data
// directory. `shoal dev restart NODE` and `shoal dev stop` reach the running supervisor through
// its control socket (src/cli/dev-control.ts); a second `shoal dev` on the same data or ports
// refuses and says where the first one runs (src/cli/dev-lock.ts). `shoal dev demo-image` puts a
// small local image into Docker for a machine with no registry (src/cli/dev-image.ts).

import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { initNode, isInitialized, loadIdentity } from '../node/identity.ts';
import type { MemberRecord } from '../resources/membership.ts';
import { exitCodes, intFlag, parse, UsageError, usageOf } from './args.ts';
import { CliFailure } from './client.ts';
import { askControl, serveControl, type ControlRequest } from './dev-control.ts';
import { demoImage, demoImageCommand, demoImageHelp, devDemoImageUsage, localExample } from './dev-image.ts';
import { acquireDevLock, checkPorts, dataFlag, devDataDefault as dataDefault, lockFile, runningDev, socketPath, type DevLock } from './dev-lock.ts';
import { DevSupervisor, localView, type DevEvent, type DevNode } from './dev-supervisor.ts';
import { credentialFileName, useCredentialFlag, userCredentialFile } from './credential-file.ts';
import { addAdminContext } from './credential-issue.ts';
import { foundKeyring } from '../node/secrets/pending-keyring.ts';
import { recoveryKeyNotice } from './init.ts';

const basePortDefault = 7101;
const nodesMax = 7;
const leaderWaitMs = 15_000;
const restartTimeoutMs = 60_000;

/** `shoal dev restart` and `shoal dev stop` talk to a running dev cluster; `demo-image` to Docker. */
export const devSubcommands = ['restart', 'stop', 'demo-image'] as const;

const devRestartUsage = 'Usage: shoal dev restart NODE [--data DIR] [--json]';
const devStopUsage = 'Usage: shoal dev stop [--data DIR] [--json]';

export const devHelp = `Usage: shoal dev [--base-port PORT] [--data DIR] [--nodes N] [--runtime auto|docker|memory|none] [--json]
       ${devRestartUsage.slice('Usage: '.length)}
       ${devStopUsage.slice('Usage: '.length)}
       ${devDemoImageUsage.slice('Usage: '.length)}

Starts a local cluster of N nodes (default 3) as separate processes on 127.0.0.1, each with its
own data directory under DIR (default ${dataDefault}). Client APIs listen on PORT, PORT+1, ...
(default 7101-7103), HTTPS with authentication as on any node; peer transports on PORT+100, ...
(7201-7203). The data is kept: running the command again restarts the same cluster. Ctrl-C stops
all nodes cleanly. An admin credential (a client certificate of the cluster's CA) is written to
DIR/credential.json and added as the current context 'dev' (or --context's name) of
$SHOAL_CONFIG, else ~/.config/shoal, where the CLI finds it by itself; another cluster's context
of that name is kept (docs/security.md, "Contexts").

The routing mesh (ingress ports, docs/network.md "Ingress") is off in dev: its nftables table is
one per host, and the nodes share this one. A replicated service's ports default to mode: ingress,
which is then open nowhere: publish them with mode: host (on the node that runs the task; two
tasks on the one host cannot both take the port, so one replica per published port).

One dev cluster runs per data directory: a second 'shoal dev' on the same DIR, or on ports in use,
refuses and says where the running one is. A node that dies is reported ("exited with code 1",
"was killed by SIGKILL") and left down; the others keep running. One that exits asking to be
restarted (code 10: a drill's kill, shoal drill) is started again at once.

The nodes run on jemalloc when libjemalloc.so.2 is installed ('apt-get install libjemalloc2'),
as the unit of 'shoal install' runs them, unless LD_PRELOAD is set already (docs/operations.md,
"The memory allocator").

  restart NODE   restart one node (by name, e.g. n2, or id) of the dev cluster running from DIR,
                 and wait until its API answers; the others keep running
  stop           stop the dev cluster running from DIR (as Ctrl-C in its terminal)
${demoImageHelp}

Options:
  --base-port PORT  first client API port (default ${basePortDefault})
  --data DIR        data directory (default ${dataDefault})
  --nodes N         number of nodes, 1 to ${nodesMax} (default 3)
  --runtime R       what runs the services' containers: docker (the local Docker daemon, shared by
                    the nodes: each touches only its own containers), memory (simulated in each
                    node's process: for trying the scheduler, failover and updates without
                    Docker), none; auto (the default) is docker when it answers, else memory
  --json            events as JSON lines on stdout (ready, exited, restarted, stopped); node
                    logs on stderr; failures as one JSON object on stderr
  -h, --help        show this help

Exit codes: 0 stopped by Ctrl-C or 'shoal dev stop'; 1 a node failed, or a dev cluster already
runs from DIR, or (demo-image) the import failed; 2 usage error; 3 (restart, stop) no dev cluster
runs from DIR, (demo-image) Docker does not answer; 8 a port is in use. A refused start leaves
no new data directory behind.`;

/** Why dev runs no routing mesh, and what to write instead (the ready message and the help say it). */
export const devIngressNote = 'the routing mesh is off (its nftables table is one per host, and the nodes share this one): ports with mode: ingress, the default of a replicated service, are open nowhere; write mode: host (the port on the node that runs the task)';

interface DevLayout {
  basePort: number;
  nodes: number;
}

export async function devCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'restart' || sub === 'stop') return controlCommand(sub, rest);
  if (sub === 'demo-image') return demoImageCommand(rest, devHelp);
  const { values, positionals } = parse(argv, {
    'base-port': { type: 'string' }, data: { type: 'string', default: dataDefault }, nodes: { type: 'string' },
    runtime: { type: 'string', default: 'auto' },
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, devHelp);
  if (values.help) {
    console.log(devHelp);
    return exitCodes.ok;
  }
  const [extra] = positionals;
  if (extra === 'restart' || extra === 'stop' || extra === 'demo-image') throw new UsageError(`put '${extra}' first: shoal dev ${extra} ...`);
  if (extra !== undefined) throw new UsageError(`unknown subcommand '${extra}' (dev takes restart NODE, stop, or demo-image)`);
  const layout = { basePort: intFlag(values['base-port'], 'base-port', basePortDefault), nodes: intFlag(values.nodes, 'nodes', 3) };
  if (layout.nodes > nodesMax) throw new UsageError(`--nodes must be from 1 to ${nodesMax}, got ${layout.nodes}`);
  if (layout.basePort + 100 + layout.nodes - 1 > 65535) throw new UsageError(`--base-port ${layout.basePort} leaves no room for the peer ports (PORT+100, ...)`);
  const runtime = values.runtime;
  if (runtime !== 'auto' && runtime !== 'docker' && runtime !== 'memory' && runtime !== 'none') {
    throw new UsageError(`--runtime must be auto, docker, memory or none, got '${runtime}'`, usageOf(devHelp));
  }
  return runDev(path.resolve(values.data), layout, await chooseRuntime(runtime, values.json), values.json);
}

type RuntimeKind = 'docker' | 'memory' | 'none';

/** auto: Docker when its daemon answers; otherwise containers in memory, and how to get Docker. */
async function chooseRuntime(wanted: RuntimeKind | 'auto', json: boolean): Promise<RuntimeKind> {
  if (wanted !== 'auto') return wanted;
  const { DockerRuntime } = await import('../executor/docker-runtime.ts');
  const docker = new DockerRuntime({ pingTimeoutMs: 1_500 });
  try {
    await docker.ping();
    return 'docker';
  } catch (err) {
    const why = (err as Error).message;
    if (!json) {
      console.error(`shoal dev: Docker does not answer (${why}): the nodes run services in memory (simulated containers).
  To run real containers: install Docker (Debian/Ubuntu: sudo apt-get install docker.io), start it
  (sudo systemctl start docker), and run shoal dev again; or choose with --runtime docker|memory.`);
    }
    return 'memory';
  } finally {
    await docker.close();
  }
}

async function runDev(dataDir: string, layout: DevLayout, runtime: RuntimeKind, json: boolean): Promise<number> {
  // The first directory this makes (undefined when DIR was there): a refused start (another
  // dev cluster runs, a port is taken) removes what it made, so it leaves no empty DIR behind.
  const made = mkdirSync(dataDir, { recursive: true });
  try {
    return await runLocked(dataDir, layout, runtime, json);
  } finally {
    if (made !== undefined) removeEmptyDirs(dataDir, made);
  }
}

/** Removes `dir` and its parents up to `top` (inclusive) while they are empty. */
function removeEmptyDirs(dir: string, top: string): void {
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      if (readdirSync(d).length > 0) return;
      rmdirSync(d);
    } catch {
      return;
    }
    if (d === top || path.dirname(d) === d) return;
  }
}

async function runLocked(dataDir: string, layout: DevLayout, runtime: RuntimeKind, json: boolean): Promise<number> {
  const socket = socketPath(dataDir);
  const lock: DevLock = { pid: process.pid, dataDir, socket, ...layout, startedAt: new Date().toISOString() };
  const release = await acquireDevLock(lock);
  let control: { close: () => void } | undefined;
  try {
    checkLayout(dataDir, layout);
    await checkPorts(ports(layout));
    const { nodes, recoveryKey } = await prepare(dataDir, layout, runtime);
    const emit = (e: DevEvent): void => (json ? console.log(JSON.stringify(e)) : console.error(`shoal dev: ${e.message}`));
    const supervisor = new DevSupervisor(nodes, emit, json ? process.stderr : process.stdout, dataFlag(dataDir));
    control = await serveControl(socket, (req) => handleControl(supervisor, req, emit));
    const stop = (): void => {
      if (!json) console.error('\nshoal dev: stopping all nodes...');
      void supervisor.stopAll();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    supervisor.startAll();
    // Every node may die while starting (it says why): then there is nothing to wait for.
    const leader = await Promise.race([waitForLeader(nodes, leaderWaitMs), supervisor.done.then(() => undefined)]);
    if (leader !== undefined) printReady(dataDir, nodes, supervisor.pids(), leader, socket, runtime, json, recoveryKey);
    else if (recoveryKey !== undefined && !json) console.log(recoveryKeyNotice(recoveryKey)); // Shown once, even by a founding that failed.
    const code = await supervisor.done;
    if (json) console.log(JSON.stringify({ event: 'stopped', exitCode: code }));
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    return code;
  } finally {
    control?.close();
    release();
  }
}

async function handleControl(supervisor: DevSupervisor, req: ControlRequest, emit: (e: DevEvent) => void): Promise<Record<string, unknown> & { message?: string }> {
  switch (req.op) {
    case 'restart': {
      const done = await supervisor.restart(req.node);
      emit(done);
      return { ...done };
    }
    case 'stop':
      await supervisor.stopAll();
      return { message: 'stopped every node of the dev cluster' };
    case 'status':
      return { pids: supervisor.pids() };
  }
}

const ports = (l: DevLayout): number[] => Array.from({ length: l.nodes }, (_, i) => [l.basePort + i, l.basePort + 100 + i]).flat();

/** The layout a dev cluster was made with (DIR/dev.json), if DIR holds one. */
function readLayout(dataDir: string): DevLayout | undefined {
  const layoutFile = path.join(dataDir, 'dev.json');
  return existsSync(layoutFile) ? JSON.parse(readFileSync(layoutFile, 'utf8')) as DevLayout : undefined;
}

/** The `shoal dev` that starts the cluster kept in DIR again: its --data, and the flags its layout needs. */
function startCommand(dataDir: string): string {
  const l = readLayout(dataDir);
  const port = l !== undefined && l.basePort !== basePortDefault ? ` --base-port ${l.basePort}` : '';
  const nodes = l !== undefined && l.nodes !== 3 ? ` --nodes ${l.nodes}` : '';
  return `npx shoal dev${dataFlag(dataDir)}${port}${nodes}`;
}

function checkLayout(dataDir: string, layout: DevLayout): void {
  const old = readLayout(dataDir);
  if (old === undefined) return;
  if (old.basePort !== layout.basePort || old.nodes !== layout.nodes) {
    throw new UsageError(`${dataDir} holds a cluster made with --base-port ${old.basePort} --nodes ${old.nodes} (the member addresses are in its log); ` +
      `use the same flags, or another --data, or remove ${dataDir} to start over`, usageOf(devHelp));
  }
}

/** The members, and the recovery key when this run founded the cluster (shown once, by printReady). */
async function prepare(dataDir: string, layout: DevLayout, runtime: RuntimeKind): Promise<{ nodes: DevNode[]; recoveryKey: string | undefined }> {
  const members: DevNode[] = [];
  const founds = !isInitialized(path.join(dataDir, 'n1'));
  for (let i = 0; i < layout.nodes; i++) {
    const name = `n${i + 1}`;
    const dir = path.join(dataDir, name);
    if (!isInitialized(dir)) await initNode({ dataDir: dir, name, ...(i > 0 ? { caFrom: path.join(dataDir, 'n1') } : {}) });
    const { id } = loadIdentity(dir);
    members.push({ id, name, dir, apiAddress: `127.0.0.1:${layout.basePort + i}`, peerAddress: `127.0.0.1:${layout.basePort + 100 + i}` });
  }
  const bootstrap: MemberRecord[] = members.map(({ id, name, apiAddress, peerAddress }) => ({ id, name, apiAddress, peerAddress }));
  for (const m of members) {
    // The routing mesh is one nftables table per host (ip shoal-ingress): three nodes on one host
    // would each replace it with their own. Off in dev; ports are published with `mode: host`.
    writeFileSync(path.join(m.dir, 'shoal.yaml'), stringify({ dataDir: '.', api: { listen: m.apiAddress }, peer: { listen: m.peerAddress }, bootstrap, runtime: { kind: runtime }, ingress: { enabled: false } }));
  }
  writeFileSync(path.join(dataDir, 'dev.json'), JSON.stringify(layout));
  // Every founding voter holds the cluster key from the start, and whichever leads writes the keyring.
  const recoveryKey = founds ? foundKeyring(members.map((m) => m.dir)) : undefined;
  // The nodes serve HTTPS with authentication, as any node does: the local user gets an admin
  // credential, which the CLI finds by itself, and this process talks to its nodes with it.
  const own = path.join(dataDir, credentialFileName);
  await addAdminContext(path.join(dataDir, 'n1'), members.map((m) => m.apiAddress), 'dev', { files: [own], devDataDir: dataDir });
  useCredentialFlag(own);
  return { nodes: members, recoveryKey };
}

/** The leader's name, as told by one of this cluster's own nodes (checked by id), or null. */
async function waitForLeader(nodes: DevNode[], timeoutMs: number): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const n of nodes) {
      const v = await localView(n.apiAddress);
      if (v?.node === n.id && v.leader !== null) return nodes.find((x) => x.id === v.leader)?.name ?? v.leader;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return null;
}

/** The web console on the first node (every node serves one). */
function consoleUrl(nodes: DevNode[]): string {
  return `https://${nodes[0]?.apiAddress ?? '127.0.0.1:7101'}/ui/`;
}

function printReady(dataDir: string, nodes: DevNode[], pids: Record<string, number | null>, leader: string | null, socket: string, runtime: RuntimeKind, json: boolean, recoveryKey: string | undefined): void {
  if (json) {
    console.log(JSON.stringify({
      event: 'ready', dataDir, control: socket, leader, runtime, console: consoleUrl(nodes), ingress: false,
      credential: userCredentialFile(), nodes: nodes.map((n) => ({ name: n.name, id: n.id, api: `https://${n.apiAddress}`, peer: n.peerAddress, pid: pids[n.name] ?? null, dir: n.dir })),
      ...(recoveryKey !== undefined ? { recoveryKey } : {}),
    }));
    return;
  }
  const flags = dataFlag(dataDir);
  const lines = [`\nshoal dev: ${nodes.length} node${nodes.length === 1 ? '' : 's'} running; data in ${dataDir}`];
  for (const n of nodes) lines.push(`  ${n.name}  API https://${n.apiAddress}  peer ${n.peerAddress}  pid ${pids[n.name] ?? '-'}  id ${n.id}`);
  lines.push(leader !== null ? `leader: ${leader}` : 'no leader yet; check the logs above');
  lines.push(`admin credential: ${userCredentialFile()} (the CLI finds it; also ${path.join(dataDir, credentialFileName)})`);
  lines.push(`console: ${consoleUrl(nodes)}    (every node serves it; docs/console.md says how a browser trusts the cluster CA and signs in)`);
  lines.push(`services run on: ${runtime === 'docker' ? 'Docker (the local daemon)' : runtime === 'memory' ? 'simulated containers in memory (--runtime)' : 'nothing (--runtime none)'}`);
  if (runtime === 'docker') lines.push(`published ports: ${devIngressNote}`);
  lines.push(`try:   npx shoal status${nodes[0] !== undefined && nodes[0].apiAddress !== '127.0.0.1:7101' ? ` --addr ${nodes[0].apiAddress}` : ''}`);
  lines.push('       npx shoal apply -f docs/examples/web.yaml    (3 replicas of nginx:alpine; then: npx shoal service ps web)');
  if (runtime === 'docker') lines.push(`       no registry to pull from? npx shoal dev demo-image imports ${demoImage}; then: npx shoal apply -f ${localExample}`);
  lines.push(`       npx shoal dev restart ${nodes[nodes.length - 1]?.name ?? 'n1'}${flags}    (restart one node)`);
  lines.push(`Ctrl-C, or npx shoal dev stop${flags}, stops the cluster.\n`);
  console.log(lines.join('\n'));
  if (recoveryKey !== undefined) console.log(recoveryKeyNotice(recoveryKey));
}

/** `shoal dev restart NODE` / `shoal dev stop`: a request to the supervisor running from --data. */
async function controlCommand(sub: 'restart' | 'stop', argv: string[]): Promise<number> {
  const usage = sub === 'restart' ? devRestartUsage : devStopUsage;
  const { values, positionals } = parse(argv, {
    data: { type: 'string', default: dataDefault }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, usage);
  if (values.help) {
    console.log(devHelp);
    return exitCodes.ok;
  }
  if (sub === 'restart' && positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'missing NODE (a name such as n2, or an id)' : `expected one NODE, got '${positionals.join(' ')}'`, usage);
  if (sub === 'stop' && positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`, usage);
  const dataDir = path.resolve(values.data);
  const running = await runningDev(dataDir);
  if (running === undefined) {
    throw new CliFailure(`no dev cluster is running from ${dataDir}${existsSync(lockFile(dataDir)) ? ' (its supervisor is gone)' : ''}; start one with: ${startCommand(dataDir)}`, exitCodes.unavailable, 'not_running');
  }
  const req: ControlRequest = sub === 'restart' ? { op: 'restart', node: positionals[0] ?? '' } : { op: 'stop' };
  const answer = await askControl(running.socket, req, restartTimeoutMs);
  if (!answer.ok) throw new CliFailure(answer.error.message, answer.error.code === 'not_found' ? exitCodes.failed : exitCodes.unavailable, answer.error.code);
  if (values.json) console.log(JSON.stringify(answer));
  else console.log(answer.message ?? 'done');
  return exitCodes.ok;
}
