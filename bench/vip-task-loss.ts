// A LAN client's requests to VIP:port through the routing mesh while the node of one task dies
// (issue 38's second half: "through a task's node failure, [the client loses] only the
// connections on that task and new ones sent to it before its node is suspect").
//
// The lab: the overlay lab (test/net/overlay-lab.ts): three `shoal serve` nodes, each in its own
// network namespace with the WireGuard mesh and its own dockerd, the firewall on; a fourth
// namespace on the same LAN bridge is the client. The nodes' config names the lab's VIP
// (test/system/vip-lab.ts, labVip) that only n1 may hold, node health at the release's defaults.
// Leadership is moved to n1, so the holder and the leader (who judges node health) stay up.
// A service of 2 replicas kept off n1 (so on n2 and n3), busybox httpd serving a file holding the
// container's hostname, publishes 8080 in ingress mode (a FirewallPolicy opens it); the client
// reaches it at VIP:8080, which n1 DNATs to a task on n2 or n3 over the overlay.
//
// Each round, in a fresh lab (bench/lib/vip-client.mjs in the client's namespace):
//   - a request loop: every 50 ms a new connection and one GET (1 s timeout), not waiting for the
//     one before; per request: when sent, answered or failed (and how), which task answered;
//   - held connections: 8 opened 2 s before the kill and left idle (httpd waits for a request);
//     half are written their request 0.3 s after the planned kill (before the node is suspect),
//     half 8 s after (after it is down): the client's schedule, so the first half lands however
//     late the kill itself runs; n1's conntrack, read just before the kill, says which task each
//     is on;
//   - the kill: n3 dies (OverlayLab.death: links down, then its shoal, containers, dockerd and
//     everything in its namespace SIGKILLed); t = 0 when its bridge port is down;
//   - polled every 50 ms from n1: n3's state in n1's store (suspect, down), and whether n3's task
//     is still in n1's ingress table (`backends` set).
//
//   flock /tmp/shoal-heavy.lock npm run bench:vip-task-loss -- [--rounds 3] [--write]
//
// --write replaces the "vip-task-loss" section of bench/RESULTS.md.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parseFlows } from '../net/conntrack.ts';
import { nodeHealthDefaults } from '../src/control/node-health.ts';
import { call, sleep } from '../test/faults/http.ts';
import type { LabNode } from '../test/net/mesh-lab.ts';
import { OverlayLab } from '../test/net/overlay-lab.ts';
import { exec, labVip, vipHolders } from '../test/system/vip-lab.ts';
import { writeNamedSection } from './lib/report.ts';

const port = 8080;
const everyMs = 50;
const timeoutMs = 1_000;
const holdCount = 8;
/** When the held connections are written, after the kill: before suspect, and after down. */
const writeAfterMs = [300, 8_000] as const;
/** How long the loop runs after the kill. */
const afterKillMs = 12_000;
/** A failure sent later than suspect + this is counted outside the window the issue allows. */
const slackMs = 500;
const clientScript = path.resolve(import.meta.dirname, 'lib/vip-client.mjs');

interface Req { at: number; end: number; ok: boolean; who?: string; error?: string }
interface Conn { port: number | null; wroteAt?: number; end?: number; ok: boolean; who?: string; error?: string }

interface Round {
  /** Ms from the kill (t = 0). */
  suspectMs: number; downMs: number; leftTableMs: number;
  /** Spans (ms from the kill) in which n1 did not have the VIP. */
  vipOff: Array<[number, number]>;
  /** n1's shoal's commands seen running for 300 ms or more after the kill (when, what). */
  slow: string[];
  reqs: Req[];
  /** Held connections, each with the task it was on (`dead`, `live`, or `?`). */
  conns: Array<Conn & { on: 'dead' | 'live' | '?' }>;
  /** Task hostname → node name. */
  whoNode: Map<string, string>;
  victim: string;
  /** When the kill was planned (ms from t = 0, below zero: it ran late); the client's schedule is from it. */
  plannedMs: number;
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 120_000, everyMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await probe();
    if (v !== undefined) return v;
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const service = {
  apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'shoal-test/busybox:local', replicas: 2, maxPerNode: 1, stopGracePeriod: '1s',
  constraints: ['node.name != n1'],
  command: ['sh', '-c', 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www'],
  ports: [{ published: port, target: 80 }],
};
const policy = { apiVersion: 'shoal/v1', kind: 'FirewallPolicy', name: 'web-published', publish: [{ service: 'web' }] };

/** The addresses in n1's ingress `backends` set (null: no table yet). */
function backendsOn(lab: OverlayLab, n: LabNode): string[] | null {
  const r = lab.mesh.exec(n, ['nft', '-j', 'list', 'set', 'ip', 'shoal-ingress', 'backends'], 5_000);
  if (r.status !== 0) return null;
  return [...r.stdout.matchAll(/"(\d+\.\d+\.\d+\.\d+)"/g)].map((m) => m[1] ?? '');
}

/** The cluster up, n1 leading and holding the VIP, the service's two tasks answering through it. */
async function prepare(lab: OverlayLab, vip: string): Promise<{ whoNode: Map<string, string>; victimAddress: string }> {
  const [n1, n2, n3] = lab.nodes as [LabNode, LabNode, LabNode];
  await Promise.all(lab.nodes.map((n) => lab.mesh.start(n)));
  await until('n1 to lead', async () => {
    const c = await call(n1.api, '/v1/cluster', { timeoutMs: 3_000 });
    const leader = c.kind === 'answer' ? (c.body as { leader?: string | null }).leader : undefined;
    if (leader === n1.id) return true;
    if (typeof leader === 'string') await call(n1.api, '/v1/cluster/leader', { method: 'POST', body: { to: n1.id }, timeoutMs: 10_000 });
    return undefined;
  }, 60_000, 500);
  await until('the service applied', async () => {
    const r = await call(n1.api, '/v1/apply', { method: 'POST', body: { documents: [service, policy] }, timeoutMs: 20_000 });
    if (r.kind === 'answer' && r.status === 200) return true;
    if (r.kind === 'answer' && r.status < 500 && r.code !== 'feature_not_enabled') throw new Error(`apply refused: ${JSON.stringify(r)}`);
    return undefined;
  }, 60_000, 500);
  const whoNode = new Map<string, string>();
  for (const n of [n2, n3]) {
    const c = await until(`web running on ${n.name}`, () => lab.containers(n, 'web')[0], 180_000);
    whoNode.set(lab.docker(n, ['inspect', '-f', '{{.Config.Hostname}}', c]).stdout.trim(), n.name);
  }
  await until('the VIP on n1', async () => {
    const h = await vipHolders(lab.mesh.lab, [1, 2, 3], vip);
    return h.length === 1 && h[0] === 1 ? true : undefined;
  }, 60_000);
  // Both tasks answering at VIP:8080 from the client, through n1's table.
  const seen = new Set<string>();
  await until('both tasks answering the client at the VIP', () => {
    const r = lab.mesh.exec(clientNode(lab), ['curl', '-s', '-m', '2', `http://${vip}:${port}/`], 5_000);
    if (r.status === 0) seen.add(r.stdout.trim());
    return [...whoNode.keys()].every((h) => seen.has(h)) ? true : undefined;
  }, 120_000, 100);
  const c3 = lab.containers(n3, 'web')[0] ?? '';
  const addrs = lab.docker(n3, ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', c3]).stdout.trim().split(/\s+/);
  const inTable = backendsOn(lab, n1) ?? [];
  const victimAddress = addrs.find((a) => inTable.includes(a));
  if (victimAddress === undefined) throw new Error(`n3's task (${addrs.join(', ')}) is not in n1's table (${inTable.join(', ')})`);
  return { whoNode, victimAddress };
}

/** The client's namespace as a LabNode-shaped host for exec (slot 4). */
function clientNode(lab: OverlayLab): LabNode {
  return { slot: 4, name: 'client', id: 'client', ip: lab.mesh.lab.ip(4), api: '', dir: '', ifname: '', proc: undefined };
}

/** Starts the client's loop; resolves with its lines once it exits. `onHeld` is told the held connections' ports as soon as they are open. */
function startClient(lab: OverlayLab, vip: string, killAt: number, onHeld: (ports: Array<number | null>) => void): Promise<{ reqs: Req[]; conns: Conn[] }> {
  const cfg = { host: vip, port, everyMs, timeoutMs, endAt: killAt + afterKillMs, hold: { count: holdCount, openAt: killAt - 2_000, writeAt: writeAfterMs.map((ms) => killAt + ms) } };
  const child = spawn('ip', ['netns', 'exec', lab.mesh.lab.ns(4), process.execPath, clientScript, JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const reqs: Req[] = [];
  const conns: Conn[] = [];
  let rest = '';
  child.stdout.on('data', (b: Buffer) => {
    const lines = (rest + b.toString()).split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines.filter(Boolean)) {
      const x = JSON.parse(line) as { req?: Req; conn?: Conn; held?: { ports: Array<number | null> } };
      if (x.req !== undefined) reqs.push(x.req);
      if (x.conn !== undefined) conns.push(x.conn);
      if (x.held !== undefined) onHeld(x.held.ports);
    }
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve({ reqs, conns }) : reject(new Error(`the client exited with ${code}`))));
  });
}

/** The held connections' backends, from n1's conntrack: local port → the task address it was DNATed to. */
function heldBackends(lab: OverlayLab, n1: LabNode, client: string, ports: Array<number | null>): Map<number, string> {
  const flows = parseFlows(lab.mesh.exec(n1, ['conntrack', '-L', '-p', 'tcp'], 5_000).stdout);
  const out = new Map<number, string>();
  for (const f of flows) if (f.original.src === client && f.original.dport === port && ports.includes(f.original.sport)) out.set(f.original.sport, f.reply.src);
  return out;
}

/** The addresses in a node's ingress `backends` set, without blocking this process (null: no table). */
async function backendsNow(lab: OverlayLab, n: LabNode): Promise<string[] | null> {
  const r = await exec(['ip', 'netns', 'exec', lab.mesh.lab.ns(n.slot), 'nft', '-j', 'list', 'set', 'ip', 'shoal-ingress', 'backends']);
  return r.code === 0 ? [...r.out.matchAll(/"(\d+\.\d+\.\d+\.\d+)"/g)].map((m) => m[1] ?? '') : null;
}

/**
 * Polls n1 every 50 ms until `endAt`: when n3 is suspect and down in n1's store, when its task
 * leaves n1's table, and the spans in which n1 did not have the VIP (a VIP blink fails every
 * request, whatever task it would go to).
 */
async function watch(lab: OverlayLab, victim: LabNode, victimAddress: string, vip: string, endAt: number, t0: () => number): Promise<Pick<Round, 'suspectMs' | 'downMs' | 'leftTableMs' | 'vipOff' | 'slow'>> {
  const n1 = lab.nodes[0] as LabNode;
  let suspectMs = Number.NaN;
  let downMs = Number.NaN;
  let leftTableMs = Number.NaN;
  const vipOff: Array<[number, number]> = [];
  // n1's shoal's short-lived commands (nft, iptables, conntrack, ip): when each was first and last seen running.
  const commands = new Map<string, [number, number]>();
  while (Date.now() < endAt) {
    const tick = Date.now();
    for (const c of descendants(n1.proc?.pid ?? 0).filter((x) => /^(\S*\/)?(nft|iptables|conntrack|ip) /.test(x))) {
      const seen = commands.get(c);
      if (seen === undefined) commands.set(c, [tick, tick]);
      else seen[1] = tick;
    }
    const [nodes, table, holders] = await Promise.all([
      call(n1.api, '/v1/nodes?consistency=stale', { timeoutMs: 2_000 }),
      backendsNow(lab, n1),
      vipHolders(lab.mesh.lab, [1], vip),
    ]);
    const now = Date.now();
    const state = nodes.kind === 'answer' ? (nodes.body as { items?: Array<{ id: string; record: { state: string } }> }).items?.find((i) => i.id === victim.id)?.record.state : undefined;
    const killed = t0() > 0;
    if (killed && Number.isNaN(suspectMs) && (state === 'suspect' || state === 'down')) suspectMs = now;
    if (killed && Number.isNaN(downMs) && state === 'down') downMs = now;
    if (killed && Number.isNaN(leftTableMs) && table !== null && !table.includes(victimAddress)) leftTableMs = now;
    if (holders.length === 0) {
      const last = vipOff.at(-1);
      if (last !== undefined && last[1] >= tick - 100) last[1] = now;
      else vipOff.push([tick, now]);
    }
    await sleep(Math.max(0, 50 - (Date.now() - tick)));
  }
  const z = t0();
  const slow = [...commands].filter(([, [a, b]]) => b - a >= 300).map(([c, [a, b]]) => `${a - z}..${b - z} ms: ${c.slice(0, 160)}`);
  return { suspectMs: suspectMs - z, downMs: downMs - z, leftTableMs: leftTableMs - z, vipOff: vipOff.map(([a, b]) => [a - z, b - z]), slow };
}

/** The programs running under a process (its descendants), as `name args`, read from /proc. */
function descendants(pid: number): string[] {
  const out: string[] = [];
  const walk = (p: number, depth: number): void => {
    let kids: string[] = [];
    try { kids = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').split(' ').filter(Boolean); } catch { return; }
    for (const k of kids) {
      try { out.push(readFileSync(`/proc/${k}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ')); } catch { /* gone */ }
      if (depth < 4) walk(Number(k), depth + 1);
    }
  };
  walk(pid, 0);
  return out;
}

/** What n1's log says (the leader's own clock): n3 suspect and down, and n1's ingress applies after the kill (ms from t0). */
function fromLog(file: string, victimId: string, t0: number): { suspectMs: number; downMs: number; applies: string[] } {
  let suspectMs = Number.NaN;
  let downMs = Number.NaN;
  const applies: string[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /"time":"([^"]+)".*"msg":"(.*)"\}$/.exec(line);
    if (m === null) continue;
    const at = Date.parse(m[1] ?? '') - t0;
    const msg = m[2] ?? '';
    if (at < 0) continue;
    if (Number.isNaN(suspectMs) && msg.startsWith(`node health: ${victimId} ready -> suspect`)) suspectMs = at;
    if (Number.isNaN(downMs) && msg.startsWith(`node health: ${victimId} suspect -> down`)) downMs = at;
    if (msg.startsWith('ingress:')) applies.push(`${at} ${msg}`);
  }
  return { suspectMs, downMs, applies };
}

async function round(i: number): Promise<Round> {
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-vip-task-loss-'));
  let vip = '';
  const lab = await OverlayLab.create(runDir, {
    clients: 1,
    config: (net) => {
      vip = labVip(net, ['n1']).vip;
      return { control: { ...nodeHealthDefaults }, vips: [labVip(net, ['n1']).entry] };
    },
  });
  try {
    const [n1, , n3] = lab.nodes as [LabNode, LabNode, LabNode];
    const { whoNode, victimAddress } = await prepare(lab, vip);
    const killAt = Date.now() + 4_000;
    let held: Map<number, string> | undefined;
    const client = startClient(lab, vip, killAt, (ports) => { held = heldBackends(lab, n1, lab.mesh.lab.ip(4), ports); });
    let t0 = 0;
    const watching = watch(lab, n3, victimAddress, vip, killAt + afterKillMs + 1_000, () => t0);
    await sleep(Math.max(0, killAt - Date.now()));
    t0 = await lab.death(n3);
    const polled = await watching;
    const out = await client;
    const logged = fromLog(path.join(runDir, 'n1.log'), n3.id, t0);
    // The leader's own log times where it has them (polling adds up to a tick and an API call).
    const watched = { ...polled, suspectMs: Number.isNaN(logged.suspectMs) ? polled.suspectMs : logged.suspectMs, downMs: Number.isNaN(logged.downMs) ? polled.downMs : logged.downMs };
    const tableNow = lab.mesh.exec(n1, ['nft', '-j', 'list', 'chain', 'ip', 'shoal-ingress', 'applied'], 5_000).stdout.match(/term=\d+ revision=\d+/)?.[0] ?? '?';
    console.log(`n1's commands running >= 300 ms:\n  ${watched.slow.join('\n  ')}`);
    console.log(`n1's log: suspect ${logged.suspectMs} ms, down ${logged.downMs} ms; n1's table now: ${tableNow}; ingress lines after the kill:\n  ${logged.applies.join('\n  ')}`);
    const rel = <T extends { at?: number; wroteAt?: number; end?: number }>(x: T): T => ({ ...x, ...(x.at !== undefined ? { at: x.at - t0 } : {}), ...(x.wroteAt !== undefined ? { wroteAt: x.wroteAt - t0 } : {}), ...(x.end !== undefined ? { end: x.end - t0 } : {}) });
    const conns = out.conns.map((c) => {
      const backend = c.port === null ? undefined : held?.get(c.port);
      return { ...rel(c), on: backend === undefined ? '?' as const : backend === victimAddress ? 'dead' as const : 'live' as const };
    });
    const raw = path.join(os.tmpdir(), `shoal-vip-task-loss-round-${i}.json`);
    writeFileSync(raw, JSON.stringify({ t0, killAt, ...watched, polled, logged, victimAddress, whoNode: [...whoNode], reqs: out.reqs, conns: out.conns, held: [...(held ?? [])] }));
    console.log(`round ${i}: lab in ${runDir}, raw data in ${raw}; suspect ${watched.suspectMs} ms, down ${watched.downMs} ms (polled: ${polled.suspectMs}, ${polled.downMs}), left n1's table ${watched.leftTableMs} ms; n1 without the VIP: ${JSON.stringify(watched.vipOff)}`);
    return { ...watched, reqs: out.reqs.map(rel), conns, whoNode, victim: n3.name, plannedMs: killAt - t0 };
  } finally {
    await lab.destroy();
  }
}

function fmt(n: number): string {
  return Number.isNaN(n) ? '-' : String(Math.round(n));
}

interface Summary {
  sent: number; failed: number; firstFail: number; lastFail: number; beforeKill: number; afterSuspect: number; afterDown: number;
  /** Failed requests sent while n1 lacked the VIP (from 150 ms before a blink was seen to its end): the VIP's, not the task's. */
  inBlink: number;
  errors: string; inFlight: string; answeredByVictimAfter: number; lastVictimSent: number;
}

function summarize(r: Round): Summary {
  const blink = (at: number): boolean => r.vipOff.some(([a, b]) => at >= a - 150 && at <= b + 50);
  const all = r.reqs.filter((q) => !q.ok).sort((a, b) => a.at - b.at);
  const failed = all.filter((q) => !blink(q.at));
  const errors = new Map<string, number>();
  for (const q of failed) errors.set(q.error ?? '?', (errors.get(q.error ?? '?') ?? 0) + 1);
  const inFlight = r.reqs.filter((q) => q.at < 0 && q.end > 0);
  const victimAnswers = r.reqs.filter((q) => q.ok && r.whoNode.get(q.who ?? '') === r.victim);
  return {
    sent: r.reqs.length, failed: all.length, inBlink: all.length - failed.length,
    firstFail: failed[0]?.at ?? Number.NaN, lastFail: failed.at(-1)?.at ?? Number.NaN,
    beforeKill: failed.filter((q) => q.at < 0).length,
    afterSuspect: failed.filter((q) => q.at > r.suspectMs + slackMs).length,
    afterDown: failed.filter((q) => q.at > r.downMs + slackMs).length,
    errors: [...errors].map(([e, n]) => `${n} ${e}`).join(', ') || 'none',
    inFlight: inFlight.length === 0 ? 'none' : `${inFlight.filter((q) => q.ok).length} of ${inFlight.length} answered`,
    answeredByVictimAfter: victimAnswers.filter((q) => q.at >= 0).length,
    lastVictimSent: victimAnswers.at(-1)?.at ?? Number.NaN,
  };
}

/** How late the kills ran after their plan, over the rounds (`a-b ms`). */
function fmtLate(rounds: readonly Round[]): string {
  const late = rounds.map((r) => -r.plannedMs);
  return `${fmt(Math.min(...late))}-${fmt(Math.max(...late))} ms`;
}

function heldCell(r: Round, writeMs: number): string {
  const cs = r.conns.filter((c) => c.wroteAt !== undefined && Math.abs(c.wroteAt - r.plannedMs - writeMs) < 1_000);
  const unopened = r.conns.filter((c) => c.wroteAt === undefined);
  if (cs.length === 0 && unopened.length > 0) return `none opened (${[...new Set(unopened.map((c) => c.error ?? '?'))].join(', ')})`;
  const part = (on: 'dead' | 'live' | '?'): string => {
    const xs = cs.filter((c) => c.on === on);
    if (xs.length === 0) return '';
    const outcomes = xs.map((c) => (c.ok ? 'answered' : `${c.error ?? '?'} at ${fmt(c.end ?? Number.NaN)} ms`));
    const name = on === 'dead' ? `${r.victim}'s task` : on === 'live' ? 'the other task' : 'unknown task';
    return `${name}: ${[...new Set(outcomes)].map((o) => `${outcomes.filter((x) => x === o).length}× ${o}`).join(', ')}`;
  };
  return [part('dead'), part('live'), part('?')].filter(Boolean).join('; ') || '-';
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, write: { type: 'boolean', default: false } } });
  const rounds: Round[] = [];
  for (let i = 1; i <= Number(values.rounds); i++) {
    let r: Round;
    try {
      r = await round(i);
    } catch (err) {
      console.log(`round ${i} failed, left out: ${(err as Error).stack ?? String(err)}`);
      continue;
    }
    rounds.push(r);
    const s = summarize(r);
    console.log(`round ${i}: ${s.failed}/${s.sent} failed (${s.inBlink} while n1 lacked the VIP), the others sent ${fmt(s.firstFail)}..${fmt(s.lastFail)} ms (${s.errors}); outside [kill, suspect + ${slackMs}]: ${s.beforeKill + s.afterSuspect}; after down + ${slackMs}: ${s.afterDown}; in flight at the kill: ${s.inFlight}`);
  }
  const rows = rounds.map((r, i) => {
    const s = summarize(r);
    return `| ${i + 1} | ${s.sent} | ${s.failed} | ${s.inBlink} | ${s.failed - s.inBlink} (${s.errors}) | ${fmt(s.firstFail)} to ${fmt(s.lastFail)} | ${fmt(r.suspectMs)} | ${fmt(r.downMs)} | ${fmt(r.leftTableMs)} | ${s.beforeKill} / ${s.afterSuspect} / ${s.afterDown} | ${s.inFlight} |`;
  });
  const heldRows = rounds.map((r, i) => `| ${i + 1} | ${heldCell(r, writeAfterMs[0])} | ${heldCell(r, writeAfterMs[1])} |`);
  const text = [
    '## Virtual IP and the routing mesh: a client\'s requests when a task\'s node dies (issue 38; three nodes with Docker and a LAN client in namespaces)',
    '',
    `\`flock /tmp/shoal-heavy.lock npm run bench:vip-task-loss -- --rounds ${rounds.length} --write\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${os.cpus().length} cores, shared with other jobs. `
      + 'The overlay lab (three `shoal serve` nodes in namespaces, each with the WireGuard mesh and its own dockerd, the firewall on) and a LAN client; node health at the defaults '
      + `(suspect after ${nodeHealthDefaults.suspectAfterMs} ms of silence, down after ${nodeHealthDefaults.downAfterMs} ms). n1 leads and alone may hold the VIP; a service of 2 replicas kept off n1 (busybox httpd answering its hostname) publishes ${port} in ingress mode, so n1 DNATs VIP:${port} to the task on n2 or n3. `
      + `The client sends a request on a new connection every ${everyMs} ms (${timeoutMs / 1000} s timeout), not waiting for the one before. At t = 0 n3 dies (links down, then its shoal, containers and dockerd SIGKILLed); a fresh lab each round. `
      + 'Times in ms from the kill; a request\'s time is when it was sent; suspect and down from the leader\'s (n1\'s) log; polled from n1 every 50 ms: "left n1\'s table" (n3\'s task no longer in n1\'s ingress `backends` set) and whether n1 had the VIP (a failed request sent from 150 ms before a poll that found it missing to the end of that blink counts as the VIP\'s).',
    '',
    `| round | requests | failed | of them while n1 lacked the VIP | the others (how) | the others sent (ms) | suspect (ms) | down (ms) | left n1's table (ms) | the others: before the kill / after suspect + ${slackMs} / after down + ${slackMs} | in flight at the kill |`,
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `Held connections (${holdCount} opened 2 s before the kill and left idle; half written their request ${writeAfterMs[0]} ms after the planned kill, half ${writeAfterMs[1]} ms after (the kill ran ${fmtLate(rounds)} late); which task each was on from n1's conntrack):`,
    '',
    `| round | written at +${writeAfterMs[0]} ms | written at +${writeAfterMs[1]} ms |`,
    '|---|---|---|',
    ...heldRows,
  ].join('\n');
  console.log(text);
  if (values.write) writeNamedSection('vip-task-loss', text);
}

await main();
