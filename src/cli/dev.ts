// shoal dev: a local three-node cluster as three separate processes, for trying shoal out.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { initNode, isInitialized, loadIdentity } from '../node/identity.ts';
import type { MemberRecord } from '../node/membership.ts';
import { exitCodes, intFlag, parse, UsageError } from './args.ts';

export const devHelp = `Usage: shoal dev [--base-port PORT] [--data DIR] [--nodes N]

Starts a local cluster of N nodes (default 3) as separate processes on 127.0.0.1, each with its
own data directory under DIR (default .shoal-dev). Client APIs listen on PORT, PORT+1, ...
(default 7101-7103); peer transports on PORT+100, ... . The data is kept: running the command
again restarts the same cluster. Ctrl-C stops all nodes cleanly.

Options:
  --base-port PORT  first client API port (default 7101)
  --data DIR        data directory (default .shoal-dev)
  --nodes N         number of nodes, 1 to 7 (default 3)
  -h, --help        show this help

Exit codes: 0 stopped by Ctrl-C, 1 a node failed, 2 usage error.`;

const binPath = findBin();

/** bin/shoal.js of this package, found from this module (a source file, or the dist bundle). */
function findBin(): string {
  const here = fileURLToPath(import.meta.url);
  for (let dir = path.dirname(here), up = 0; up < 4; dir = path.dirname(dir), up++) {
    const candidate = path.join(dir, 'bin', 'shoal.js');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`cannot find bin/shoal.js above ${here}`);
}

interface DevLayout {
  basePort: number;
  nodes: number;
}

async function prepare(dataDir: string, layout: DevLayout): Promise<MemberRecord[]> {
  mkdirSync(dataDir, { recursive: true });
  const layoutFile = path.join(dataDir, 'dev.json');
  if (existsSync(layoutFile)) {
    const old = JSON.parse(readFileSync(layoutFile, 'utf8')) as DevLayout;
    if (old.basePort !== layout.basePort || old.nodes !== layout.nodes) {
      throw new UsageError(`${dataDir} holds a cluster made with --base-port ${old.basePort} --nodes ${old.nodes}; ` +
        `use the same flags, or another --data, or remove ${dataDir} to start over`);
    }
  }
  const members: MemberRecord[] = [];
  for (let i = 0; i < layout.nodes; i++) {
    const name = `n${i + 1}`;
    const dir = path.join(dataDir, name);
    if (!isInitialized(dir)) await initNode({ dataDir: dir, name, ...(i > 0 ? { caFrom: path.join(dataDir, 'n1') } : {}) });
    const { id } = loadIdentity(dir);
    members.push({ id, name, apiAddress: `127.0.0.1:${layout.basePort + i}`, peerAddress: `127.0.0.1:${layout.basePort + 100 + i}` });
  }
  for (const [i, m] of members.entries()) {
    const config = {
      dataDir: '.', api: { listen: m.apiAddress }, peer: { listen: m.peerAddress }, bootstrap: members,
    };
    writeFileSync(path.join(dataDir, `n${i + 1}`, 'shoal.yaml'), stringify(config));
  }
  writeFileSync(layoutFile, JSON.stringify(layout));
  return members;
}

function startChild(dir: string, name: string): ChildProcess {
  const child = spawn(process.execPath, [binPath, 'serve', '--config', path.join(dir, 'shoal.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const pipe = (stream: NodeJS.ReadableStream | null, out: NodeJS.WriteStream): void => {
    let buf = '';
    stream?.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) out.write(`[${name}] ${l}\n`);
    });
  };
  pipe(child.stdout, process.stdout);
  pipe(child.stderr, process.stderr);
  return child;
}

async function waitForLeader(members: MemberRecord[], timeoutMs: number): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const m of members) {
      try {
        const res = await fetch(`http://${m.apiAddress}/healthz`, { signal: AbortSignal.timeout(500) });
        const body = (await res.json()) as { leader: string | null };
        if (body.leader) return members.find((x) => x.id === body.leader)?.name ?? body.leader;
      } catch {
        // not up yet
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return null;
}

export async function devCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    'base-port': { type: 'string' }, data: { type: 'string', default: '.shoal-dev' }, nodes: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  }, 'dev');
  if (values.help) {
    console.log(devHelp);
    return exitCodes.ok;
  }
  const layout = { basePort: intFlag(values['base-port'], 'base-port', 7101), nodes: intFlag(values.nodes, 'nodes', 3) };
  if (layout.nodes > 7) throw new UsageError('--nodes must be between 1 and 7');
  const members = await prepare(values.data, layout);
  const children = members.map((m) => startChild(path.join(values.data, m.name), m.name));
  let exiting = false;
  const exited = children.map((c, i) => new Promise<number>((resolve) => c.once('exit', (code) => {
    if (!exiting) console.error(`shoal dev: node ${members[i]?.name} exited with code ${code}`);
    resolve(code ?? 1);
  })));
  const stopAll = (): void => {
    if (exiting) return;
    exiting = true;
    console.log('\nstopping all nodes...');
    for (const c of children) c.kill('SIGTERM');
  };
  process.once('SIGINT', stopAll);
  process.once('SIGTERM', stopAll);
  const leader = await waitForLeader(members, 15_000);
  if (!exiting) {
    console.log(`\nshoal dev: ${members.length} nodes running (data in ${values.data})`);
    for (const m of members) console.log(`  ${m.name}  http://${m.apiAddress}   (id ${m.id})`);
    console.log(leader ? `leader: ${leader}` : 'no leader yet; check the logs above');
    console.log("try: npx shoal status    Ctrl-C stops the cluster\n");
  }
  const codes = await Promise.all(exited);
  return exiting && codes.every((c) => c === 0) ? exitCodes.ok : exitCodes.failed;
}
