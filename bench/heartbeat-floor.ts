// What an idle node's CPU and memory cannot go below with Node.js, the libraries it serves with
// and the Raft timing (issue 45: idle CPU <= 0.5 % of a core, idle RSS <= 70 MB per node). Three processes, each running only shoal's peer transport
// (transport/ws-transport.ts: WebSocket over mutual TLS 1.3, msgpack frames, its 1 s pings) and
// a 100 ms interval standing for the Raft tick; the first sends a heartbeat to the other two at
// each tick and they answer it, as an idle cluster's leader and followers do with
// `raft.heartbeatIntervalMs` 100. Nothing else: no store, no API, no loops, no metrics. Then, for
// the runtime alone, the same three processes with the interval and no transport. Then, for the
// memory, three processes with the transport and the libraries every node loads to serve
// (fastify listening over HTTPS with one route, zod, yaml, prom-client's default metrics,
// dockerode's client, pino, msgpackr): no shoal code but the transport.
//
//   npx tsx bench/heartbeat-floor.ts [--seconds 30] [--write]
//
// Each process reports its CPU (user + system, process.cpuUsage) over the measured window after
// a settle of 5 s, and its RSS at the end of it; --write puts the table in bench/RESULTS.md
// ("heartbeat-floor" section).

import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Message } from '../src/raft/types.ts';
import type { WsTransport } from '../transport/ws-transport.ts';

interface Role { id: string; index: number; dir: string; mode: 'transport' | 'bare' | 'libraries'; seconds: number }
interface Report {
  id: string; mode: string; cpuMs: number; seconds: number; sent: number; received: number; rssMiB: number;
  /** From the process's start to its listeners bound (the libraries' API and the transport), wall clock and CPU (ms). */
  readyMs: number; readyCpuMs: number;
}

const modeNames: Record<Role['mode'], string> = { transport: 'transport', bare: 'bare', libraries: 'transport + libraries' };

const ids = ['n1', 'n2', 'n3'];
const tickMs = 100;
const settleMs = 5_000;

function cpuNowMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** One process: the transport (or not), a 100 ms tick, heartbeats from n1; reports its CPU over the window. */
async function child(role: Role): Promise<void> {
  let sent = 0;
  let received = 0;
  let t: WsTransport | undefined;
  let closeLibraries = async (): Promise<void> => {};
  let ready = { ms: performance.now(), cpuMs: cpuNowMs() };
  if (role.mode !== 'bare') {
    const pki = JSON.parse(readFileSync(path.join(role.dir, 'pki.json'), 'utf8')) as { ca: string; nodes: Record<string, { certPem: string; keyPem: string }> };
    const mine = pki.nodes[role.id];
    if (mine === undefined) throw new Error(`no certificate for ${role.id}`);
    if (role.mode === 'libraries') closeLibraries = await (await import('./lib/floor-libraries.ts')).serveWithLibraries(pki.ca, mine);
    // Loaded here, not at the top: a bare process loads nothing but this file.
    const { WsTransport } = await import('../transport/ws-transport.ts');
    t = new WsTransport({
      nodeId: role.id, clusterId: 'floor', listen: { host: '127.0.0.1', port: 0 },
      tls: { caPem: pki.ca, certPem: mine.certPem, keyPem: mine.keyPem },
      protocolVersion: 1, protocolVersionsSupported: { min: 1, max: 1 }, softwareVersion: '0.0.0-floor',
    });
    const transport = t;
    transport.onMessage((m) => {
      received++;
      if (m.type === 'heartbeat') { transport.send({ ...m, type: 'heartbeatResp', from: role.id, to: m.from }); sent++; }
    });
    await transport.start();
    ready = { ms: performance.now(), cpuMs: cpuNowMs() };
    writeFileSync(path.join(role.dir, `${role.id}.addr`), transport.address);
    // Every process waits for the others' addresses, then knows them all as peers.
    for (;;) {
      const addrs = ids.map((id) => { try { return readFileSync(path.join(role.dir, `${id}.addr`), 'utf8'); } catch { return ''; } });
      if (addrs.every((a) => a !== '')) { transport.setPeers(ids.map((id, i) => ({ id, address: addrs[i] ?? '' }))); break; }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const leader = role.index === 0;
  const tick = setInterval(() => {
    if (t === undefined || !leader) return;
    for (const to of ids.slice(1)) {
      const m: Message = { type: 'heartbeat', from: role.id, to, term: 1, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0 };
      t.send(m);
      sent++;
    }
  }, tickMs);
  await new Promise((r) => setTimeout(r, settleMs));
  const before = process.cpuUsage();
  const counts = { sent, received };
  await new Promise((r) => setTimeout(r, role.seconds * 1000));
  const used = process.cpuUsage(before);
  const report: Report = {
    id: role.id, mode: role.mode, cpuMs: (used.user + used.system) / 1000, seconds: role.seconds,
    sent: sent - counts.sent, received: received - counts.received, rssMiB: process.memoryUsage.rss() / 2 ** 20,
    readyMs: ready.ms, readyCpuMs: ready.cpuMs,
  };
  writeFileSync(path.join(role.dir, `${role.id}.report.json`), JSON.stringify(report));
  clearInterval(tick);
  await t?.close();
  await closeLibraries();
}

/**
 * This file bundled for plain `node`: the processes measured run without tsx, whose loader
 * thread would be counted in their CPU (in `node_modules/.cache`, where `ws` resolves).
 */
async function bundleSelf(): Promise<string> {
  // Bundled as the node is (scripts/bundle.mjs: its plugins, splitting, the packages inside), so
  // the libraries load here as they load in a node; each import() is a chunk of its own, so a bare
  // process loads nothing else. The bundler is the parent's: imported here.
  const { bundle } = await import('../scripts/bundle.mjs');
  const outdir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', '.cache', 'shoal-heartbeat-floor');
  await bundle(outdir, { entry: fileURLToPath(import.meta.url), entryName: 'heartbeat-floor' });
  return path.join(outdir, 'heartbeat-floor.mjs');
}

async function runMode(mode: Role['mode'], seconds: number, script: string): Promise<Report[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-floor-'));
  try {
    if (mode !== 'bare') {
      // The parent alone makes certificates: the X.509 library is never loaded by a measured process.
      const { createCa, issueNodeCert } = await import('../src/security/index.ts');
      const ca = await createCa('floor');
      const nodes: Record<string, { certPem: string; keyPem: string }> = {};
      for (const id of ids) nodes[id] = await issueNodeCert(ca, id, { hosts: ['127.0.0.1'] });
      writeFileSync(path.join(dir, 'pki.json'), JSON.stringify({ ca: ca.certPem, nodes }));
    }
    const children = ids.map((id, index) => fork(script, ['--child', JSON.stringify({ id, index, dir, mode, seconds } satisfies Role)], { execArgv: [] }));
    await Promise.all(children.map((c) => new Promise<void>((resolve, reject) => c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${String(code)}`)))))));
    return ids.map((id) => JSON.parse(readFileSync(path.join(dir, `${id}.report.json`), 'utf8')) as Report);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function table(reports: Report[]): string {
  const rows = reports.map((r) => {
    const pct = (r.cpuMs / (r.seconds * 1000)) * 100;
    return `| ${modeNames[r.mode as Role['mode']]} | ${r.id}${r.id === 'n1' && r.mode !== 'bare' ? ' (sends the heartbeats)' : ''} | ${pct.toFixed(2)} % | ${(r.sent / r.seconds).toFixed(1)} / ${(r.received / r.seconds).toFixed(1)} | ${r.rssMiB.toFixed(1)} | ${r.readyMs.toFixed(0)} / ${r.readyCpuMs.toFixed(0)} |`;
  });
  return ['| processes | process | CPU (% of a core) | messages sent / received per s | RSS at the end (MiB) | process start to listening: wall / CPU (ms) |', '|---|---|---:|---:|---:|---:|', ...rows].join('\n');
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({ options: { seconds: { type: 'string', default: '30' }, write: { type: 'boolean', default: false }, child: { type: 'string' } } });
  if (v.child !== undefined) return child(JSON.parse(v.child) as Role);
  const seconds = Number(v.seconds);
  if (!Number.isInteger(seconds) || seconds < 5) throw new Error('--seconds must be a whole number of at least 5');
  const script = await bundleSelf();
  const transport = await runMode('transport', seconds, script);
  const bare = await runMode('bare', seconds, script);
  const libraries = await runMode('libraries', seconds, script);
  const text = [
    '## The floor of an idle node\'s CPU and memory: the peer transport, the libraries and a 100 ms tick alone (issue 45)',
    '',
    `\`npx tsx bench/heartbeat-floor.ts --seconds ${seconds}${v.write ? ' --write' : ''}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${os.cpus().length} cores, Node ${process.version}, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' / ')}. `
      + 'Three processes with shoal\'s peer transport only (WebSocket over mutual TLS 1.3, msgpack, its 1 s pings) and a 100 ms interval; n1 sends a heartbeat to n2 and n3 at each tick and they answer, as an idle cluster does with `raft.heartbeatIntervalMs` 100; then three processes with the interval alone; then three with the transport and the libraries every node serves with (fastify listening over HTTPS with one route, zod, yaml, prom-client\'s default metrics, dockerode\'s client, pino, msgpackr), no other shoal code. '
      + `CPU over ${seconds} s after a settle of 5 s (user + system of the process; the processes run this file bundled, with plain \`node\`, bundled as a node is: scripts/bundle.mjs); RSS at the end of that window; and the time from the process's start (Node's own start-up included) to its listeners bound, as a node's start to API answering (the bare process: to its first line).`,
    '',
    table([...transport, ...bare, ...libraries]),
  ].join('\n');
  console.log(text);
  if (v.write) (await import('./lib/report.ts')).writeNamedSection('heartbeat-floor', text);
}

await main();
