// shoal and etcd side by side, in one run on one machine: three shoal processes and three etcd
// processes on 127.0.0.1, the same Raft timing, the same closed-loop load generator, one system
// loaded at a time. See docs/benchmarks.md for what each figure means.
//
//   npm run bench -- [--quick] [--seconds N] [--only writes,reads,failover,memory,rejoin] [--write]
//
// --write replaces the section between <!-- etcd-compare:begin --> and <!-- etcd-compare:end -->
// of bench/RESULTS.md; every other section of that file is left as it is.

import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { EtcdCluster, etcdBinary } from './lib/etcd-cluster.ts';
import { runFailover, type FailoverResult } from './lib/failover.ts';
import { runMemoryRejoin, type MemoryRejoinResult } from './lib/memory-rejoin.ts';
import { abandonOnSignal, killAllStarted } from './lib/proc.ts';
import { etcdVersion, machine, section, writeSection, type RunRecord } from './lib/report.ts';
import { ShoalCluster } from './lib/shoal-cluster.ts';
import type { System, SystemKind, Timeouts } from './lib/system.ts';
import { benchCollection, fill, pointOf, runRound, type Placement, type PointResult, type PointRound, type PointSpec } from './lib/throughput.ts';

const groups = ['writes', 'reads', 'failover', 'memory', 'rejoin'] as const;
type Group = (typeof groups)[number];
const installCommand = 'apt-get update && apt-get install -y --no-install-recommends etcd-server etcd-client';
const resultsFile = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
const analysisFile = fileURLToPath(new URL('./compare-analysis.md', import.meta.url));
const recordFile = fileURLToPath(new URL('./compare-results.json', import.meta.url));
const keys = 10_000;

const help = `usage: npm run bench -- [options]

Runs a three-node shoal cluster and a three-node etcd cluster on 127.0.0.1, one loaded at a
time, with the same Raft timing and the same closed-loop HTTP load generator, and prints a table
of shoal's figure, etcd's figure and the ratio shoal/etcd. Needs etcd (${etcdBinary}) on PATH.

Options:
  --quick               short run (3 s per point, 10,000 documents, one leader kill; under 4 minutes)
  --seconds N           measured seconds per throughput point and system (default 10; 3 with --quick)
  --rounds N            rounds the seconds are split into, per system, ordered A B B A A B B A
                        (default 4; 2 with --quick)
  --warmup N            seconds of writes on each system before the first point, not measured
                        (default 10; 3 with --quick; 0 to skip)
  --only LIST           groups to run, of ${groups.join(',')} (default: all)
  --clients LIST        concurrency levels (default 1,16,64)
  --to LIST             leader,spread: where throughput requests go (default both)
  --systems LIST        shoal,etcd (default both; --write needs both)
  --timeouts H/E        heartbeat/election timeout in ms for both systems (default 100/1000)
  --docs N              documents for the memory and rejoin figures (default 100000; 10000 with --quick)
  --failover-timeout-ms N  client timeout per write during the leader kills (default 1000)
  --etcd-peer-tls       etcd peers over mutual TLS, as shoal's always are (default: etcd's plain HTTP)
  --client-plain        both client APIs as plain HTTP without credentials (shoal's
                        api.insecureLoopback); default: both HTTPS with a client certificate
  --keep                keep the temporary data directories and logs
  --write               write the figures to bench/RESULTS.md (between the etcd-compare markers)
  --json                print the figures as JSON instead of Markdown
  --from-json FILE      run nothing: render (and with --write, record) the figures of an earlier
                        run saved by --write in bench/compare-results.json, e.g. after editing
                        bench/compare-analysis.md
  --install             install etcd with apt-get first if it is missing (root only)
  -h, --help            show this help

Environment: SHOAL_CPU_PROF=DIR starts every shoal node under node --cpu-prof, writing a
.cpuprofile per process to DIR when it stops (npx tsx bench/cpu-profile-summary.ts DIR).
SHOAL_BIN=FILE runs another shoal entry point than bin/shoal.js (e.g. the run.mjs of a build
made by npm run bench:ab -- --build NAME).
SHOAL_NODE_FLAGS='--trace-gc ...' adds node flags to every shoal node (their output goes to the
node logs that --keep keeps).
ETCD_BIN=FILE runs another etcd binary than the one on the PATH.

Exit codes: 0 done, 1 the run failed, 2 usage error, 3 etcd is not installed.`;

interface Options {
  quick: boolean;
  seconds: number;
  /** Rounds per point and system, ordered A B B A A B B A. */
  rounds: number;
  /** Per round: load before the measured window opens. */
  warmupMs: number;
  /** Once per system, before the first point. */
  warmupSeconds: number;
  only: Set<Group>;
  clients: number[];
  placements: Placement[];
  systems: SystemKind[];
  timeouts: Timeouts;
  docs: number;
  etcdPeerTls: boolean;
  /** Both client APIs over HTTPS with a client certificate (the default), or both plain. */
  clientTls: boolean;
  failoverTimeoutMs: number;
  keep: boolean;
  write: boolean;
  json: boolean;
  fromJson: string | undefined;
  install: boolean;
}

class UsageError extends Error {}

function list<T extends string>(raw: string, allowed: readonly T[], what: string): T[] {
  const items = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
  if (bad.length > 0 || items.length === 0) throw new UsageError(`--${what}: expected some of ${allowed.join(',')}, got '${raw}'`);
  return items as T[];
}

function nonNegative(raw: string, what: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0) throw new UsageError(`--${what}: expected a number of 0 or more, got '${raw}'`);
  return n;
}

function positive(raw: string, what: string): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${what}: expected a positive number, got '${raw}'`);
  return n;
}

function positiveInteger(raw: string, what: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--${what}: expected a whole number of 1 or more, got '${raw}'`);
  return n;
}

function parseOptions(argv: string[]): Options | 'help' {
  const { values: v } = parseArgs({
    args: argv, strict: true,
    options: {
      quick: { type: 'boolean', default: false }, seconds: { type: 'string' }, rounds: { type: 'string' }, warmup: { type: 'string' }, only: { type: 'string' },
      clients: { type: 'string', default: '1,16,64' }, to: { type: 'string', default: 'leader,spread' }, systems: { type: 'string', default: 'shoal,etcd' },
      timeouts: { type: 'string', default: '100/1000' }, docs: { type: 'string' },
      'etcd-peer-tls': { type: 'boolean', default: false }, 'client-plain': { type: 'boolean', default: false }, 'failover-timeout-ms': { type: 'string', default: '1000' }, keep: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false }, json: { type: 'boolean', default: false }, 'from-json': { type: 'string' },
      install: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (v.help) return 'help';
  const [hb, el] = v.timeouts.split('/').map((s) => positive(s, 'timeouts'));
  if (hb === undefined || el === undefined || el <= hb || el % hb !== 0) throw new UsageError('--timeouts: expected HEARTBEAT/ELECTION in ms, the election a multiple of the heartbeat, e.g. 100/1000');
  const systems = list(v.systems, ['shoal', 'etcd'] as const, 'systems');
  if (v.write && systems.length < 2 && v['from-json'] === undefined) throw new UsageError('--write records ratios and needs both systems');
  return {
    quick: v.quick, seconds: v.seconds !== undefined ? positive(v.seconds, 'seconds') : v.quick ? 3 : 10,
    rounds: v.rounds !== undefined ? positiveInteger(v.rounds, 'rounds') : v.quick ? 2 : 4,
    warmupMs: v.quick ? 1000 : 2000,
    warmupSeconds: v.warmup !== undefined ? nonNegative(v.warmup, 'warmup') : v.quick ? 3 : 10,
    only: new Set(v.only !== undefined ? list(v.only, groups, 'only') : groups),
    clients: v.clients.split(',').map((s) => Math.round(positive(s, 'clients'))),
    placements: list(v.to, ['leader', 'spread'] as const, 'to'),
    systems, timeouts: { heartbeatMs: hb, electionMs: el },
    docs: Math.round(v.docs !== undefined ? positive(v.docs, 'docs') : v.quick ? 10_000 : 100_000),
    etcdPeerTls: v['etcd-peer-tls'], clientTls: !v['client-plain'], failoverTimeoutMs: positive(v['failover-timeout-ms'], 'failover-timeout-ms'), keep: v.keep, write: v.write, json: v.json, fromJson: v['from-json'], install: v.install,
  };
}

/** etcd's version string; installs it first when asked to and allowed to. */
function ensureEtcd(install: boolean): string | undefined {
  const found = etcdVersion(etcdBinary);
  if (found || !install) return found;
  if (process.getuid?.() !== 0) {
    console.error('--install needs root; run the install command yourself.');
    return undefined;
  }
  console.error(`installing etcd: ${installCommand}`);
  execFileSync('apt-get', ['update'], { stdio: 'inherit' });
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'etcd-server', 'etcd-client'], { stdio: 'inherit' });
  return etcdVersion(etcdBinary);
}

function makeSystem(kind: SystemKind, o: Options): System {
  return kind === 'shoal' ? new ShoalCluster(o.timeouts, o.keep, undefined, [], {}, o.clientTls) : new EtcdCluster(o.timeouts, o.etcdPeerTls, o.keep, o.clientTls);
}

const progress = (msg: string): void => { process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`); };

function plan(o: Options): PointSpec[] {
  const specs: PointSpec[] = [];
  for (const op of ['write', 'read'] as const) {
    if (!o.only.has(op === 'write' ? 'writes' : 'reads')) continue;
    for (const to of o.placements) for (const clients of o.clients) specs.push({ op, clients, to });
  }
  return specs;
}

function describePoint(p: PointResult): string {
  const f = p.failed > 0 ? ` ${p.failed} failed (${p.failures.map(([r, n]) => `${n}× ${r}`).join('; ')})` : '';
  return `[${p.system}] ${p.op} ${p.clients} → ${p.to}: ${Math.round(p.perSecond)} req/s, p50 ${p.p50Ms.toFixed(2)} ms, p99 ${p.p99Ms.toFixed(2)} ms, ` +
    `${Math.round(p.serverCpuMicrosPerReq)} µs server CPU/req, other load ${Math.round(p.otherCpuPercent)}%${f}${p.leaderChanged ? ' LEADER CHANGED' : ''}`;
}

/**
 * Throughput points, then a leader kill on each system. Before the first point each system gets
 * a warm-up load, so that no point measures a cold process. Each point is measured in o.rounds
 * rounds per system, in the order A B B A A B B A (which system is A alternates between
 * points), so a drift in the machine's speed during a point weighs on both systems alike.
 */
async function runLiveGroups(o: Options, points: PointResult[], failovers: FailoverResult[]): Promise<void> {
  const specs = plan(o);
  if (specs.length === 0 && !o.only.has('failover')) return;
  const systems = o.systems.map((k) => makeSystem(k, o));
  try {
    for (const s of systems) {
      progress(`starting three ${s.kind} nodes`);
      await s.start();
    }
    if (specs.length > 0 && o.warmupSeconds > 0) {
      for (const s of systems) {
        progress(`[${s.kind}] warm-up: ${o.warmupSeconds} s of writes, 16 clients spread over the nodes (not measured)`);
        await runRound(s, { op: 'write', clients: 16, to: 'spread' }, { warmupMs: 0, durationMs: o.warmupSeconds * 1000, keys, timeoutMs: 10_000 });
      }
    }
    let filled = false;
    for (const [i, spec] of specs.entries()) {
      if (spec.op === 'read' && !filled) {
        for (const s of systems) {
          const l = (await s.leader()) ?? 0;
          progress(`[${s.kind}] writing all ${keys} keys so that reads find them`);
          await fill(s, l, benchCollection, keys, 64);
        }
        filled = true;
      }
      const first = i % 2 === 0 ? systems : [...systems].reverse();
      const rounds = new Map<System, PointRound[]>(systems.map((s) => [s, []]));
      const order = Array.from({ length: o.rounds }, (_, r) => (r % 2 === 0 ? first : [...first].reverse())).flat();
      for (const s of order) {
        rounds.get(s)?.push(await runRound(s, spec, { warmupMs: o.warmupMs, durationMs: (o.seconds * 1000) / o.rounds, keys, timeoutMs: 10_000 }));
      }
      for (const s of first) {
        const r = pointOf(spec, rounds.get(s) ?? []);
        points.push(r);
        progress(describePoint(r));
      }
    }
    if (o.only.has('failover')) {
      for (const s of systems) {
        await runFailoverRounds(s, o, failovers);
        await s.destroy();
      }
    }
  } finally {
    for (const s of systems) await s.destroy();
  }
}

/** Kills the leader under load `rounds` times, bringing the killed node back between rounds. */
async function runFailoverRounds(s: System, o: Options, failovers: FailoverResult[]): Promise<void> {
  const rounds = o.quick ? 1 : 3;
  for (let round = 1; round <= rounds; round++) {
    progress(`[${s.kind}] kill -9 of the leader under 16 writing clients (round ${round} of ${rounds})`);
    const f = await runFailover(s, { clients: 16, beforeMs: o.quick ? 2000 : 3000, afterMs: o.quick ? 4500 : 6000, timeoutMs: o.failoverTimeoutMs, round });
    failovers.push(f);
    progress(`[${s.kind}] new leader after ${Math.round(f.newLeaderMs)} ms, longest write gap ${Math.round(f.writeGapMs)} ms, ${f.lost} of ${f.acked} acknowledged writes lost`);
    if (round < rounds) await s.restart(f.killedIndex, 120_000);
  }
}

/** On a fresh cluster of each system in turn: memory idle and loaded, then a wiped follower. */
async function runStoredGroups(o: Options, memory: MemoryRejoinResult[]): Promise<void> {
  if (!o.only.has('memory') && !o.only.has('rejoin')) return;
  for (const kind of o.systems) {
    const s = makeSystem(kind, o);
    try {
      progress(`starting three fresh ${kind} nodes`);
      await s.start();
      progress(`[${kind}] memory idle, then after ${o.docs} documents${o.only.has('rejoin') ? ', then a wiped follower rejoins' : ''}`);
      const m = await runMemoryRejoin(s, { docs: o.docs, settleMs: o.quick ? 1500 : 3000, idleWindowMs: o.quick ? 2000 : 5000, rejoin: o.only.has('rejoin'), rejoinTimeoutMs: 300_000 });
      memory.push(m);
      progress(`[${kind}] idle CPU % ${m.idleCpuPercent.map((x) => x.toFixed(1)).join('/')}; RSS MiB idle ${m.idleMiB.map((x) => x.toFixed(0)).join('/')}, loaded ${m.loadedMiB.map((x) => x.toFixed(0)).join('/')} (load ${m.loadSeconds.toFixed(1)} s)` +
        (m.rejoin ? `; rejoin ${Math.round(m.rejoin.catchUpMs)} ms (${m.rejoin.how})` : ''));
    } finally {
      await s.destroy();
    }
  }
}

/** Runs the selected groups; a number is an exit code (etcd missing), undefined a failed run. */
async function run(o: Options, argv: string[]): Promise<RunRecord | number | undefined> {
  const etcd = o.systems.includes('etcd') ? ensureEtcd(o.install) : 'not run';
  if (etcd === undefined) {
    console.error(`etcd is not installed (cannot run '${etcdBinary} --version'). Install it with:\n  sudo sh -c '${installCommand}'\nor run this benchmark as root with --install.`);
    return 3;
  }
  abandonOnSignal();
  const record: RunRecord = {
    command: `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`, date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    machine: machine(etcd), timeouts: `heartbeat ${o.timeouts.heartbeatMs} ms, election timeout ${o.timeouts.electionMs} ms`,
    etcdPeers: o.etcdPeerTls ? 'mutual TLS' : 'plain HTTP (etcd default)', secondsPerPoint: o.seconds, warmupSeconds: o.warmupSeconds, roundsPerPoint: o.rounds, failoverTimeoutMs: o.failoverTimeoutMs, loadAvg: [os.loadavg()[0] ?? 0, 0], points: [], failovers: [], memory: [],
  };
  const started = performance.now();
  try {
    await runLiveGroups(o, record.points, record.failovers);
    await runStoredGroups(o, record.memory);
  } catch (err) {
    console.error(`the run failed: ${(err as Error).stack ?? String(err)}\nprocesses were killed; rerun with --keep to keep the data directories and logs`);
    return undefined;
  } finally {
    killAllStarted();
  }
  progress(`done in ${((performance.now() - started) / 60_000).toFixed(1)} min`);
  record.loadAvg[1] = os.loadavg()[0] ?? 0;
  return record;
}

async function main(argv: string[]): Promise<number> {
  let o: Options | 'help';
  try {
    o = parseOptions(argv);
  } catch (err) {
    console.error(`${(err as Error).message}\nrun 'npm run bench -- --help' for usage`);
    return 2;
  }
  if (o === 'help') {
    console.log(help);
    return 0;
  }
  let record: RunRecord;
  if (o.fromJson !== undefined) {
    record = JSON.parse(readFileSync(o.fromJson, 'utf8')) as RunRecord;
  } else {
    const r = await run(o, argv);
    if (r === undefined) return 1;
    if (typeof r === 'number') return r;
    record = r;
  }
  const analysis = existsSync(analysisFile) ? readFileSync(analysisFile, 'utf8') : undefined;
  const text = section(record, analysis);
  console.log(o.json ? JSON.stringify(record, null, 2) : `\n${text}`);
  if (o.write) {
    writeSection(resultsFile, text);
    if (o.fromJson === undefined) writeFileSync(recordFile, `${JSON.stringify(record, null, 2)}\n`);
    progress(`wrote ${resultsFile}${o.fromJson === undefined ? ` and ${recordFile}` : ''}`);
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
