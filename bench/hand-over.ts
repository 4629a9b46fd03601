// Leadership hand-over under load, shoal beside etcd's move-leader, in one run on one machine:
// three processes of each, the same Raft timing, the same clients. Writers and readers spread
// over the three nodes, each moving to the next node only after a failed request (as the
// failover benchmark's clients do); every few seconds leadership moves to the next node.
// For each move: the longest gap between two successful writes around it, the requests that
// failed, and the p99 latency of the requests started during it.
//
//   npm run bench:handover -- [--moves 10] [--writers 4] [--readers 2] [--systems shoal,etcd] [--write]
//
// --write replaces the "hand-over" section of bench/RESULTS.md.

import { parseArgs } from 'node:util';
import { EtcdCluster, etcdBinary } from './lib/etcd-cluster.ts';
import { Client } from './lib/http.ts';
import { abandonOnSignal, killAllStarted, sleep } from './lib/proc.ts';
import { etcdVersion, machine, writeNamedSection } from './lib/report.ts';
import { ShoalCluster } from './lib/shoal-cluster.ts';
import type { System, SystemKind, Timeouts } from './lib/system.ts';
import { value256 } from './lib/throughput.ts';

const help = `usage: npm run bench:handover -- [options]

Moves leadership around a three-node shoal cluster and a three-node etcd cluster (etcd's
move-leader) under a steady load of writers and linearizable readers spread over the nodes, and
prints per system: the longest gap between successful writes around a move, failed requests,
and the p99 latency of requests started during a move (from 100 ms before the move until 1 s
after it), beside the p99 outside the moves.

Options:
  --moves N        hand-overs per system (default 10)
  --writers N      writing clients (default 4)
  --readers N      reading clients (default 2)
  --systems LIST   shoal,etcd (default both; --write needs both)
  --timeouts H/E   heartbeat/election timeout in ms for both systems (default 100/1000)
  --write          write the figures to bench/RESULTS.md (between the hand-over markers)
  -h, --help       show this help`;

interface Done {
  write: boolean;
  ok: boolean;
  startMs: number;
  endMs: number;
  reason?: string;
}

interface MoveFigures {
  gapMs: number;
  failed: number;
  p99Ms: number;
}

interface SystemFigures {
  kind: SystemKind;
  moves: MoveFigures[];
  failures: Map<string, number>;
  p99OutsideMs: number;
  writesPerSecond: number;
}

const windowBeforeMs = 100;
const windowAfterMs = 1000;
const requestTimeoutMs = 5000;

async function runSystem(sys: System, o: { moves: number; writers: number; readers: number }): Promise<SystemFigures> {
  await sys.start();
  try {
    const seed = new Client(sys.nodes[0]?.client ?? { host: '127.0.0.1', port: 0 });
    await seed.send(sys.writeRequest('handover', 'r', value256('seed')), 10_000);
    seed.destroy();
    const done: Done[] = [];
    let running = true;
    const clients = sys.nodes.map((n) => new Client(n.client, o.writers + o.readers));
    const worker = async (w: number, write: boolean): Promise<void> => {
      let at = w % clients.length;
      for (let s = 0; running; s++) {
        const req = write ? sys.writeRequest('handover', `w${w}-${s}`, value256(String(s))) : sys.readRequest('handover', 'r');
        const startMs = performance.now();
        let reason: string | undefined;
        try {
          const a = await (clients[at] as Client).send(req, requestTimeoutMs);
          if (a.status !== 200) reason = `HTTP ${a.status} ${a.body.toString('utf8', 0, 160)}`;
        } catch (err) {
          reason = (err as Error).message.slice(0, 120);
        }
        done.push({ write, ok: reason === undefined, startMs, endMs: performance.now(), ...(reason !== undefined ? { reason } : {}) });
        if (reason !== undefined) {
          at = (at + 1) % clients.length;
          await sleep(25);
        }
      }
    };
    const loops = [
      ...Array.from({ length: o.writers }, (_, w) => worker(w, true)),
      ...Array.from({ length: o.readers }, (_, r) => worker(o.writers + r, false)),
    ];
    await sleep(2000);
    const began = performance.now();
    const movedAt: number[] = [];
    for (let m = 0; m < o.moves; m++) {
      const leader = await sys.leader();
      if (leader === undefined) throw new Error(`${sys.kind}: no agreed leader before move ${m + 1}`);
      const to = (leader + 1) % sys.nodes.length;
      movedAt.push(performance.now());
      await sys.transferLeader(to);
      while ((await sys.leader().catch(() => undefined)) !== to) await sleep(10);
      await sleep(1500);
    }
    const ended = performance.now();
    running = false;
    await Promise.all(loops);
    for (const c of clients) c.destroy();
    return figures(sys.kind, done, movedAt, began, ended);
  } finally {
    await sys.destroy();
  }
}

function figures(kind: SystemKind, done: Done[], movedAt: number[], began: number, ended: number): SystemFigures {
  const inMove = (t: number): boolean => movedAt.some((m) => t >= m - windowBeforeMs && t <= m + windowAfterMs);
  const moves = movedAt.map((m) => {
    const okWrites = done.filter((d) => d.write && d.ok).map((d) => d.endMs).sort((a, b) => a - b);
    // The gap that spans the move: from the last success before it to the first after, and any gap in the window.
    let gap = 0;
    for (let i = 1; i < okWrites.length; i++) {
      const a = okWrites[i - 1] as number;
      const b = okWrites[i] as number;
      if (b >= m - windowBeforeMs && a <= m + windowAfterMs) gap = Math.max(gap, b - a);
    }
    const during = done.filter((d) => d.startMs >= m - windowBeforeMs && d.startMs <= m + windowAfterMs);
    return { gapMs: gap, failed: during.filter((d) => !d.ok).length, p99Ms: p99(during.map((d) => d.endMs - d.startMs)) };
  });
  const failures = new Map<string, number>();
  for (const d of done) if (!d.ok && d.startMs >= began) failures.set(d.reason ?? '?', (failures.get(d.reason ?? '?') ?? 0) + 1);
  const outside = done.filter((d) => d.startMs >= began && d.startMs <= ended && !inMove(d.startMs));
  const writes = done.filter((d) => d.write && d.ok && d.endMs >= began && d.endMs <= ended).length;
  return { kind, moves, failures, p99OutsideMs: p99(outside.map((d) => d.endMs - d.startMs)), writesPerSecond: writes / ((ended - began) / 1000) };
}

function p99(xs: number[]): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] as number;
}

const fmt = (n: number): string => (!Number.isFinite(n) ? '–' : Number.isInteger(n) ? String(n) : n.toFixed(n >= 100 ? 0 : 1));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

function table(all: SystemFigures[], o: { moves: number; writers: number; readers: number; timeouts: Timeouts }): string {
  const m = machine(etcdVersion(etcdBinary) ?? 'not installed');
  const lines = [
    '## Leadership hand-over under load: shoal beside etcd move-leader',
    '',
    `Command: \`npm run bench:handover -- --moves ${o.moves} --writers ${o.writers} --readers ${o.readers} --write\`. ` +
      `Machine: ${m.cpu}, ${m.cores} cores, ${m.ramGiB} GiB, ${m.kernel}, Node ${m.node}, etcd ${m.etcd}; ` +
      `heartbeat/election ${o.timeouts.heartbeatMs}/${o.timeouts.electionMs} ms for both; ${new Date().toISOString().slice(0, 10)}.`,
    `${o.writers} writers (a new 256-byte key per write) and ${o.readers} linearizable readers spread over the three nodes; a client moves to the next node only after a failed request. A move's window runs from ${windowBeforeMs} ms before the transfer request to ${windowAfterMs} ms after it.`,
    '',
    '| figure | ' + all.map((s) => s.kind).join(' | ') + (all.length === 2 ? ' | shoal/etcd |' : ' |'),
    '|---|' + all.map(() => '---:').join('|') + (all.length === 2 ? '|---:|' : '|'),
  ];
  const row = (name: string, f: (s: SystemFigures) => number, ratio = true): void => {
    const v = all.map(f);
    const r = all.length === 2 && ratio && (v[1] as number) > 0 ? ((v[0] as number) / (v[1] as number)).toFixed(2) : '–';
    lines.push(`| ${name} | ${v.map(fmt).join(' | ')}${all.length === 2 ? ` | ${r}` : ''} |`);
  };
  row('longest write gap over all moves (ms)', (s) => Math.max(...s.moves.map((x) => x.gapMs)));
  row('median write gap per move (ms)', (s) => median(s.moves.map((x) => x.gapMs)));
  row('failed requests, all moves', (s) => s.moves.reduce((a, x) => a + x.failed, 0), false);
  row('failed requests per move', (s) => s.moves.reduce((a, x) => a + x.failed, 0) / s.moves.length, false);
  row('p99 latency during moves (ms), worst move', (s) => Math.max(...s.moves.map((x) => x.p99Ms)));
  row('p99 latency outside moves (ms)', (s) => s.p99OutsideMs);
  row('writes per second over the run', (s) => s.writesPerSecond);
  for (const s of all) {
    if (s.failures.size > 0) lines.push('', `${s.kind} failures: ${[...s.failures].map(([k, n]) => `${n} × ${k}`).join('; ')}`);
  }
  return lines.join('\n');
}


async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      moves: { type: 'string', default: '10' }, writers: { type: 'string', default: '4' }, readers: { type: 'string', default: '2' },
      systems: { type: 'string', default: 'shoal,etcd' }, timeouts: { type: 'string', default: '100/1000' },
      write: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (v.help) { console.log(help); return; }
  const whole = (s: string, name: string, min: number): number => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of ${min} or more, not ${JSON.stringify(s)}`);
    return n;
  };
  const [h, e] = v.timeouts.split('/');
  const timeouts: Timeouts = { heartbeatMs: whole(h ?? '', 'timeouts heartbeat', 1), electionMs: whole(e ?? '', 'timeouts election', 2) };
  const o = { moves: whole(v.moves, 'moves', 1), writers: whole(v.writers, 'writers', 1), readers: whole(v.readers, 'readers', 0), timeouts };
  const kinds = v.systems.split(',').map((k) => k.trim());
  for (const k of kinds) if (k !== 'shoal' && k !== 'etcd') throw new Error(`--systems: unknown system ${JSON.stringify(k)} (shoal, etcd)`);
  if (v.write && kinds.join(',') !== 'shoal,etcd') throw new Error('--write needs --systems shoal,etcd');
  abandonOnSignal();
  const all: SystemFigures[] = [];
  for (const k of kinds as SystemKind[]) {
    const sys: System = k === 'shoal' ? new ShoalCluster(timeouts) : new EtcdCluster(timeouts);
    console.error(`${k}: ${o.moves} hand-overs under load...`);
    all.push(await runSystem(sys, o));
  }
  const out = table(all, o);
  console.log(out);
  if (v.write) writeNamedSection('hand-over', out);
}

main().catch((err: unknown) => {
  console.error(`bench:handover: ${(err as Error).message}`);
  killAllStarted();
  process.exit(1);
});
