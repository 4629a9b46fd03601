// The leak check of bench/footprint.ts (`--leak`, issue 45): three shoal nodes with
// `--services` services of `--replicas` tasks each in the store (the in-memory runtime by
// default: Docker cannot run 5,000 containers on a benchmark machine), then once a minute for
// `--minutes` minutes, of the leader: RSS and V8 heap used after a full collection (the nodes run
// with --expose-gc, and the preloaded probe collects before it reports), the process's CPU over
// the minute, the time its loops spent in passes (shoal_control_reconcile_duration_seconds_sum of
// /metrics, by loop) and the machine's load average (the machine may be shared: the figure says
// how much). The verdict is on the last (up to) 10 minutes' least-squares slopes; see `verdict`.

import { existsSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { once, Client, jsonBody } from './http.ts';
import { cpuMs, machineJiffies, sleep } from './proc.ts';
import type { ShoalCluster } from './shoal-cluster.ts';

export interface LeakOptions {
  minutes: number;
  services: number;
  replicas: number;
  runtime: 'docker' | 'memory' | 'none';
}

/** One sample of the leader, at the end of a minute (minute 0: the baseline after the settle minute). */
export interface LeakSample {
  minute: number;
  leader: string;
  rssMiB: number;
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
  /** CPU of the leader's process over the minute that ended (ms); NaN at minute 0 or after a change of leader. */
  cpuMsPerMin: number;
  /** Seconds the leader's loops spent in passes over the minute that ended, by loop; empty at minute 0 or after a change of leader. */
  loopS: Record<string, number>;
  /** Passes the loops completed over the minute (all loops). */
  passes: number;
  /** 1-minute load average of the machine when sampled. */
  load1: number;
  /** Busy share of the whole machine's CPU over the minute (%). */
  machineBusyPct: number;
}

export interface Slope { perTenMin: number; limit: number; flat: boolean }

export interface LeakVerdict {
  window: number;
  heap: Slope;
  rss: Slope;
  cpu: Slope;
  loops: Slope;
  flat: boolean;
}

export interface LeakRun {
  o: LeakOptions;
  tasksRunning: number;
  placeS: number;
  samples: LeakSample[];
  leaderChanges: number;
  verdict: LeakVerdict;
}

type Figures = { collected: boolean; memory: { rss: number; heapUsed: number; heapTotal: number; external: number } };

const progress = (msg: string): void => { process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`); };

/** Loop → [seconds in passes, passes] so far, from the Prometheus text of /metrics. */
export function loopTotals(metricsText: string): Map<string, { s: number; n: number }> {
  const out = new Map<string, { s: number; n: number }>();
  for (const m of metricsText.matchAll(/^shoal_control_reconcile_duration_seconds_(sum|count)\{([^}]*)\}\s+(\S+)/gm)) {
    const loop = /loop="([^"]*)"/.exec(m[2] ?? '')?.[1] ?? '?';
    const cur = out.get(loop) ?? { s: 0, n: 0 };
    if (m[1] === 'sum') cur.s += Number(m[3]);
    else cur.n += Number(m[3]);
    out.set(loop, cur);
  }
  return out;
}

/** Least-squares slope of ys over xs. */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return Number.NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += ((xs[i] ?? 0) - mx) * ((ys[i] ?? 0) - my);
    den += ((xs[i] ?? 0) - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

/** Heap after GC: at most 1 MiB per 10 minutes. */
export const heapLimitMiBPer10 = 1;
/** RSS: at most 4 MiB per 10 minutes (V8 and the allocator return pages lazily). */
export const rssLimitMiBPer10 = 4;
/** CPU and loop time per minute: at most 10 % of their mean per 10 minutes (and 50 ms / 0.05 s at least). */
export const cpuLimitShare = 0.1;

/**
 * Flat: over the last (up to) 10 minutes' samples, the least-squares slope of the leader's heap
 * used after a full GC is at most 1 MiB per 10 minutes, that of its RSS at most 4 MiB per 10
 * minutes, and those of its CPU per minute and its loops' pass time per minute at most 10 % of
 * their mean per 10 minutes. Minutes after a change of leader have no CPU figure and are left out.
 */
export function verdict(samples: LeakSample[]): LeakVerdict {
  const last = samples.filter((s) => s.minute > 0).slice(-10);
  const xs = last.map((s) => s.minute);
  const mk = (ys: number[], limit: number, x = xs): Slope => {
    const per = slope(x, ys) * 10;
    return { perTenMin: per, limit, flat: Number.isFinite(per) && per <= limit };
  };
  const withCpu = last.filter((s) => Number.isFinite(s.cpuMsPerMin));
  const cpuMean = withCpu.reduce((a, s) => a + s.cpuMsPerMin, 0) / Math.max(1, withCpu.length);
  const loopSum = (s: LeakSample): number => Object.values(s.loopS).reduce((a, b) => a + b, 0);
  const loopMean = withCpu.reduce((a, s) => a + loopSum(s), 0) / Math.max(1, withCpu.length);
  const heap = mk(last.map((s) => s.heapUsedMiB), heapLimitMiBPer10);
  const rss = mk(last.map((s) => s.rssMiB), rssLimitMiBPer10);
  const cpu = mk(withCpu.map((s) => s.cpuMsPerMin), Math.max(50, cpuLimitShare * cpuMean), withCpu.map((s) => s.minute));
  const loops = mk(withCpu.map(loopSum), Math.max(0.05, cpuLimitShare * loopMean), withCpu.map((s) => s.minute));
  return { window: last.length, heap, rss, cpu, loops, flat: heap.flat && rss.flat && cpu.flat && loops.flat };
}

async function leaderIndex(sys: ShoalCluster): Promise<number> {
  for (let i = 0; i < 600; i++) {
    const l = await sys.leader().catch(() => undefined);
    if (l !== undefined) return l;
    await sleep(100);
  }
  throw new Error('no agreed leader within 60 s');
}

/** Writes the services in applies of at most 125 (an apply changes at most 128), through the leader. */
async function writeServices(sys: ShoalCluster, o: LeakOptions): Promise<void> {
  const l = await leaderIndex(sys);
  const client = new Client(sys.nodes[l]?.client ?? (() => { throw new Error('no leader'); })(), 1);
  try {
    for (let from = 0; from < o.services; from += 125) {
      const documents = [];
      for (let i = from; i < Math.min(o.services, from + 125); i++) {
        documents.push({ apiVersion: 'shoal/v1', kind: 'Service', name: `leak-${String(i).padStart(4, '0')}`, image: 'busybox:local', command: ['sleep', '3600'], replicas: o.replicas });
      }
      const a = await client.send({ method: 'POST', path: '/v1/apply', body: jsonBody({ documents }) }, 120_000);
      if (a.status !== 200) throw new Error(`POST /v1/apply: HTTP ${a.status} ${a.body.toString().slice(0, 300)}`);
    }
  } finally {
    client.destroy();
  }
}

/** Tasks running on all nodes, as the leader sees them (GET /v1/nodes). */
async function running(sys: ShoalCluster): Promise<number> {
  const l = await leaderIndex(sys);
  const r = await once<{ items: { running: number }[] }>(sys.nodes[l]?.client ?? { host: '127.0.0.1', port: 0 }, { method: 'GET', path: '/v1/nodes' }, 30_000);
  if (r.status !== 200) throw new Error(`GET /v1/nodes: HTTP ${r.status}`);
  return r.body.items.reduce((a, n) => a + (typeof n.running === 'number' ? n.running : 0), 0);
}

/** The probe's figures of `pid` (SIGUSR2; a full GC first, as the node runs with --expose-gc). */
async function figuresOf(pid: number, probeDir: string): Promise<Figures> {
  const file = `${probeDir}/${pid}.json`;
  rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 60_000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`no figures from pid ${pid} within 60 s`);
    await sleep(100);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as Figures;
}

async function metricsOf(sys: ShoalCluster, i: number): Promise<string> {
  const c = new Client(sys.nodes[i]?.client ?? { host: '127.0.0.1', port: 0 }, 1);
  try {
    const a = await c.send({ method: 'GET', path: '/metrics' }, 30_000);
    if (a.status !== 200) throw new Error(`GET /metrics: HTTP ${a.status}`);
    return a.body.toString('utf8');
  } finally {
    c.destroy();
  }
}

/** Runs the check on a started cluster whose nodes run with --expose-gc and the probe (SHOAL_FOOTPRINT_DIR = probeDir). */
export async function leakCheck(sys: ShoalCluster, o: LeakOptions, probeDir: string): Promise<LeakRun> {
  // Every node registered before the apply, so placement spreads over the three.
  await sleep(2000);
  const want = o.services * o.replicas;
  progress(`writing ${o.services} services of ${o.replicas} tasks (${want} tasks)`);
  const t0 = performance.now();
  await writeServices(sys, o);
  progress(`written in ${((performance.now() - t0) / 1000).toFixed(0)} s; waiting for every task to run`);
  let tasksRunning = 0;
  const deadline = performance.now() + 15 * 60_000;
  let told = performance.now();
  while (tasksRunning < want) {
    if (performance.now() > deadline) throw new Error(`only ${tasksRunning} of ${want} tasks running after 15 minutes`);
    await sleep(2000);
    tasksRunning = await running(sys).catch(() => tasksRunning);
    if (performance.now() - told > 30_000) {
      told = performance.now();
      progress(`${tasksRunning} of ${want} tasks running`);
    }
  }
  const placeS = (performance.now() - t0) / 1000;
  progress(`${tasksRunning} tasks running after ${placeS.toFixed(0)} s; a settle minute, then ${o.minutes} one-minute samples`);
  await sleep(60_000);

  const samples: LeakSample[] = [];
  let leaderChanges = 0;
  let prev: { leader: string; cpu: number; loops: Map<string, { s: number; n: number }>; jiffies: { busy: number; total: number } } | undefined;
  const sampling = performance.now();
  for (let minute = 0; minute <= o.minutes; minute++) {
    // On the minute from the first sample (a sample takes a moment: the next is not pushed back by it).
    await sleep(Math.max(0, sampling + minute * 60_000 - performance.now()));
    const l = await leaderIndex(sys);
    const node = sys.nodes[l];
    const pid = node?.pid;
    if (!node || pid === undefined) throw new Error('the leader has no process');
    // CPU and the loops' totals before the probe's GC, so that this minute's figures hold no GC of ours (the next one's do: one full GC a minute, in every minute alike).
    const cpu = cpuMs(pid);
    const jiffies = machineJiffies();
    const loops = loopTotals(await metricsOf(sys, l));
    const f = await figuresOf(pid, probeDir);
    const same = prev !== undefined && prev.leader === node.name;
    if (prev !== undefined && !same) leaderChanges++;
    const loopS: Record<string, number> = {};
    let passes = 0;
    if (same && prev) {
      for (const [loop, v] of loops) {
        const before = prev.loops.get(loop) ?? { s: 0, n: 0 };
        loopS[loop] = v.s - before.s;
        passes += v.n - before.n;
      }
    }
    const sample: LeakSample = {
      minute, leader: node.name, rssMiB: f.memory.rss / 2 ** 20, heapUsedMiB: f.memory.heapUsed / 2 ** 20, heapTotalMiB: f.memory.heapTotal / 2 ** 20, externalMiB: f.memory.external / 2 ** 20,
      cpuMsPerMin: same && prev ? cpu - prev.cpu : Number.NaN, loopS, passes,
      load1: os.loadavg()[0] ?? Number.NaN,
      machineBusyPct: prev ? ((jiffies.busy - prev.jiffies.busy) / Math.max(1, jiffies.total - prev.jiffies.total)) * 100 : Number.NaN,
    };
    if (!f.collected) throw new Error('the probe did not collect garbage: the node does not run with --expose-gc');
    samples.push(sample);
    progress(`minute ${minute}: ${node.name} RSS ${sample.rssMiB.toFixed(1)} MiB, heap ${sample.heapUsedMiB.toFixed(1)} MiB, CPU ${sample.cpuMsPerMin.toFixed(0)} ms, loops ${Object.values(loopS).reduce((a, b) => a + b, 0).toFixed(2)} s, load ${sample.load1.toFixed(2)}`);
    prev = { leader: node.name, cpu, loops, jiffies };
  }
  return { o, tasksRunning, placeS, samples, leaderChanges, verdict: verdict(samples) };
}

const f1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : '–');
const f2 = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : '–');

export function leakReport(r: LeakRun, cmd: string): string {
  const v = r.verdict;
  const loops = [...new Set(r.samples.flatMap((s) => Object.keys(s.loopS)))].sort();
  const loads = r.samples.map((s) => s.load1).filter(Number.isFinite);
  const busy = r.samples.map((s) => s.machineBusyPct).filter(Number.isFinite);
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const row = (name: string, s: Slope, unit: string): string => `| ${name} | ${s.perTenMin >= 0 ? '+' : ''}${f2(s.perTenMin)} ${unit} | <= ${f2(s.limit)} ${unit} | ${s.flat ? 'flat' : '**not flat**'} |`;
  return [
    `## Leak check: the leader with ${r.o.services.toLocaleString('en-US')} services / ${(r.o.services * r.o.replicas).toLocaleString('en-US')} tasks over time (issue 45)`,
    '',
    `\`${cmd}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}. `
      + `Three \`shoal serve\` processes of the bundled working tree, runtime ${r.o.runtime}${r.o.runtime === 'memory' ? ' (Docker cannot run 5,000 containers on this machine)' : ''}, node capacity 64 CPUs / 128 GiB so every task fits; `
      + `${r.o.services} services of ${r.o.replicas} replicas written in applies of 125 through the leader: ${r.tasksRunning.toLocaleString('en-US')} tasks running ${r.placeS.toFixed(0)} s after the first apply. `
      + 'After a settle minute, the leader sampled once a minute: RSS and V8 heap after a full GC (the nodes run with `--expose-gc`; the preloaded probe collects on SIGUSR2, so each minute\'s CPU holds one full GC of the previous sample), '
      + 'its process CPU over the minute, and its loops\' time in passes (`shoal_control_reconcile_duration_seconds_sum` by loop).',
    '',
    `**The machine was shared** with other work during the run: 1-minute load average ${f2(Math.min(...loads))} to ${f2(Math.max(...loads))} (mean ${f2(mean(loads))}) on ${os.cpus().length} cores, the whole machine ${f1(mean(busy))} % busy on average. CPU time (not wall time) is little moved by that; loop pass times (wall time, awaiting Raft commits) are.`,
    '',
    `Verdict over the last ${v.window} minutes (least-squares slope per 10 minutes): **${v.flat ? 'flat' : 'not flat'}**${r.leaderChanges > 0 ? `; the leader changed ${r.leaderChanges} times (the minute after a change has no CPU figure)` : ''}. `
      + `Over the whole run (minutes 0-${r.samples.length - 1}): heap used after GC ${f1(r.samples[0]?.heapUsedMiB ?? Number.NaN)} → ${f1(r.samples.at(-1)?.heapUsedMiB ?? Number.NaN)} MiB (slope ${f2(slope(r.samples.map((s) => s.minute), r.samples.map((s) => s.heapUsedMiB)) * 10)} MiB per 10 min), `
      + `RSS ${f1(r.samples[0]?.rssMiB ?? Number.NaN)} → ${f1(r.samples.at(-1)?.rssMiB ?? Number.NaN)} MiB (slope ${f2(slope(r.samples.map((s) => s.minute), r.samples.map((s) => s.rssMiB)) * 10)} MiB per 10 min).`,
    '',
    '| figure of the leader | slope per 10 min | flat when | |',
    '|---|---:|---:|---|',
    row('V8 heap used after a full GC', v.heap, 'MiB'),
    row('RSS (after the same GC)', v.rss, 'MiB'),
    row('process CPU per minute (10 % of the mean, at least 50 ms)', v.cpu, 'ms'),
    row('loops\' pass time per minute (10 % of the mean, at least 0.05 s)', v.loops, 's'),
    '',
    `| minute | leader | RSS (MiB) | heap used after GC (MiB) | heap total (MiB) | external (MiB) | CPU (ms/min) | loops (s/min: ${loops.join(', ')}) | passes/min | load avg (1 min) | machine busy (%) |`,
    '|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|',
    ...r.samples.map((s) => `| ${s.minute} | ${s.leader} | ${f1(s.rssMiB)} | ${f1(s.heapUsedMiB)} | ${f1(s.heapTotalMiB)} | ${f1(s.externalMiB)} | ${Number.isFinite(s.cpuMsPerMin) ? s.cpuMsPerMin.toFixed(0) : '–'} | ${loops.map((l) => (s.loopS[l] !== undefined ? f2(s.loopS[l]) : '–')).join(' / ')} | ${s.minute > 0 ? s.passes : '–'} | ${f2(s.load1)} | ${f1(s.machineBusyPct)} |`),
  ].join('\n');
}
