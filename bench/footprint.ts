// The footprint of an idle node (issue 45: fit for a Raspberry Pi). Bundles the working tree (as
// `npm run build` does) into bench/.builds/footprint, starts three `shoal serve` nodes of it
// (bench/lib/shoal-cluster.ts; the default runtime, Docker, unless --runtime) and, in the same
// run, three etcd members, then measures per process:
// - RSS (VmRSS of /proc/PID/status) after --idle seconds with nothing to do;
// - idle CPU (utime + stime of /proc/PID/stat) and context switches (all threads) over the last
//   --cpu seconds of that idle time;
// - start to API answering: each shoal node in turn is stopped (SIGTERM) and started again on its
//   data; from the spawn to the first 200 from /healthz;
// - `shoal --version`: the peak RSS (getrusage maxRSS) of the process, and of a bare `node -e 0`;
// then the breakdown: each process's RSS by kind of mapping (/proc/PID/smaps), the pages of the
// `node` binary each node and a bare Node.js process touched, by ELF section
// (bench/lib/binary-pages.ts), the V8 heap figures of each idle node, a heap snapshot of one summarised by
// constructor (self size), and the code loaded at start (`serve` and `--version`) by npm package
// and src/ folder (the ESM loader's URLs mapped through esbuild's metafile).
//
//   flock /tmp/shoal-heavy.lock npm run bench:footprint -- [--write]
//
// Every node runs with bench/lib/footprint-probe.mjs preloaded (a SIGUSR2 handler and an exit
// handler; no timer). The run takes --idle + about 60 s.
//
// --leak [--minutes 30] is the leak check instead (bench/lib/leak-check.ts): 500 services / 5,000
// tasks in the store (the in-memory runtime unless --runtime), then the leader's RSS, heap after
// GC, CPU and loops' pass time once a minute; --write puts it in the "footprint-leak" section.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { bundle, bundleConsole, writeRunner } from '../scripts/bundle.mjs';
import { EtcdCluster, etcdBinary } from './lib/etcd-cluster.ts';
import { summariseHeapSnapshot, type HeapGroup } from './lib/heap-summary.ts';
import { binaryPages, type BinaryPages } from './lib/binary-pages.ts';
import { once } from './lib/http.ts';
import { breakdown, type LoadBreakdown, type Metafile } from './lib/load-breakdown.ts';
import { abandonOnSignal, cpuMs, killAllStarted, memoryMap, rssMiB, sleep, spawnLogged, stopProcess, trackTempDir, type MemoryMap } from './lib/proc.ts';
import { agreedLeader, docsFootprint, type DocsFigures } from './lib/docs-footprint.ts';
import { leakCheck, leakReport, type LeakOptions } from './lib/leak-check.ts';
import { etcdVersion, writeNamedSection } from './lib/report.ts';
import { findJemalloc, nodeEnvironment } from '../src/cli/node-environment.ts';
import { boundMsOf, ShoalCluster } from './lib/shoal-cluster.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
/** The build of a mode: footprint, footprint-leak, footprint-docs (one each, so that a run of one mode never rebuilds under another's running nodes). */
const buildDirOf = (mode: string): string => path.join(root, 'bench', '.builds', mode);
const buildDir = buildDirOf('footprint');
const probe = fileURLToPath(new URL('./lib/footprint-probe.mjs', import.meta.url));
const timeouts = { heartbeatMs: 100, electionMs: 1000 };

const help = `usage: npm run bench:footprint -- [options]

Bundles the working tree into bench/.builds/footprint, starts three shoal nodes of it and three
etcd members, and measures each idle: RSS after --idle seconds, CPU and context switches over the
last --cpu seconds; then start to API answering (each node restarted on its data), the peak RSS
of 'shoal --version', the V8 heap of the idle nodes (a snapshot of one, by constructor) and the
code loaded at start by package and src/ folder. Run it under flock /tmp/shoal-heavy.lock.

Options:
  --idle N             seconds idle before RSS is read (default 60)
  --cpu N              seconds of CPU measurement, the last of the idle ones (default 30)
  --runtime KIND       the nodes' runtime.kind: docker (default), memory or none
  --no-etcd            no etcd members (no ratio)
  --by-hand            run the nodes as 'shoal serve' started from a shell runs: without the
                       environment 'shoal install' writes into the unit on this machine
                       (src/cli/node-environment.ts: NODE_OPTIONS by the cores, jemalloc
                       when installed), which the nodes of the idle and --docs runs
                       run with by default
  --write              write the "footprint" section of bench/RESULTS.md
                       (with --leak: the "footprint-leak" section)
  --leak               the leak check instead: --services services of --replicas tasks
                       in the store (runtime memory unless --runtime), then the leader's
                       RSS, V8 heap used after a full GC, process CPU and its loops' pass
                       time once a minute for --minutes minutes, and the machine's load
                       average; verdict flat or not on the last 10 minutes' slopes
  --docs N             instead: the memory after N documents (RSS <= 1.5x etcd's): three
                       shoal nodes and three etcd members each loaded as npm run bench's
                       memory group loads them, RSS 3 s and 35 s after the last write,
                       the nodes' V8 figures and a heap snapshot of the leader by
                       constructor; --write: the "footprint-docs" section
  --minutes N          minutes sampled by --leak (default 30)
  --services N         services written by --leak (default 500)
  --replicas N         replicas of each of them (default 10)
  -h, --help           show this help`;

interface Options { idle: number; cpu: number; runtime: 'docker' | 'memory' | 'none'; etcd: boolean; write: boolean; leak: LeakOptions | undefined; docs: number | undefined; env: Record<string, string> }

function parseOptions(): Options | 'help' {
  const { values: v } = parseArgs({
    options: {
      idle: { type: 'string', default: '60' }, cpu: { type: 'string', default: '30' }, runtime: { type: 'string' },
      'no-etcd': { type: 'boolean', default: false }, 'by-hand': { type: 'boolean', default: false }, write: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
      leak: { type: 'boolean', default: false }, docs: { type: 'string' }, minutes: { type: 'string', default: '30' }, services: { type: 'string', default: '500' }, replicas: { type: 'string', default: '10' },
    },
  });
  if (v.help) return 'help';
  const whole = (s: string, name: string, min: number): number => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of ${min} or more, not ${JSON.stringify(s)}`);
    return n;
  };
  const idle = whole(v.idle, 'idle', 1);
  const cpu = whole(v.cpu, 'cpu', 1);
  if (cpu > idle) throw new Error(`--cpu (${cpu}) must not exceed --idle (${idle}): the CPU is measured in the idle time`);
  const runtime = (v.runtime ?? (v.leak ? 'memory' : 'docker')) as Options['runtime'];
  if (runtime !== 'docker' && runtime !== 'memory' && runtime !== 'none') throw new Error(`--runtime must be docker, memory or none, not ${JSON.stringify(runtime)}`);
  const leak = v.leak ? { minutes: whole(v.minutes, 'minutes', 2), services: whole(v.services, 'services', 1), replicas: whole(v.replicas, 'replicas', 1), runtime } : undefined;
  const docs = v.docs === undefined ? undefined : whole(v.docs, 'docs', 1);
  if (docs !== undefined && leak) throw new Error('--docs and --leak are two runs: give one');
  const env = v['by-hand'] ? {} : nodeEnvironment({ allocator: 'auto', cpus: os.cpus().length, jemalloc: findJemalloc() });
  return { idle, cpu, runtime, etcd: !v['no-etcd'] && !v.leak, write: v.write, leak, docs, env };
}

const progress = (msg: string): void => { process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`); };

/** Bundles the working tree with its metafile; returns the metafile (output paths relative to the root). */
async function build(dir = buildDir): Promise<Metafile> {
  const cwd = process.cwd();
  process.chdir(root);
  try {
    const meta = await bundle(dir, { metafile: true });
    await bundleConsole(dir);
    writeRunner(dir);
    return meta;
  } finally {
    process.chdir(cwd);
  }
}

/** Context switches (voluntary + involuntary) of every thread of a process so far. */
function switches(pid: number): number {
  let n = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
      for (const m of s.matchAll(/^(?:nonvoluntary_|voluntary_)ctxt_switches:\s+(\d+)/gm)) n += Number(m[1]);
    } catch { /* the thread ended */ }
  }
  return n;
}

interface Idle { name: string; pid: number; rssMiB: number; map: MemoryMap; cpuPct: number; switchesPerS: number; threads: number }

/** Idles `idle` seconds; CPU and switches over the last `cpu` of them; RSS at the end. */
async function measureIdle(procs: { name: string; pid: number }[], o: Options): Promise<Idle[]> {
  progress(`idle ${o.idle - o.cpu} s, then CPU over ${o.cpu} s`);
  await sleep((o.idle - o.cpu) * 1000);
  const before = procs.map((p) => ({ cpu: cpuMs(p.pid), sw: switches(p.pid) }));
  const t0 = performance.now();
  await sleep(o.cpu * 1000);
  const elapsed = performance.now() - t0;
  return procs.map((p, i) => ({
    name: p.name, pid: p.pid, rssMiB: rssMiB(p.pid), map: memoryMap(p.pid),
    cpuPct: ((cpuMs(p.pid) - (before[i]?.cpu ?? 0)) / elapsed) * 100,
    switchesPerS: ((switches(p.pid) - (before[i]?.sw ?? 0)) / elapsed) * 1000,
    threads: readdirSync(`/proc/${p.pid}/task`).length,
  }));
}

interface HeapFigures { heap: { used_heap_size: number; total_heap_size: number }; memory: { rss: number; heapUsed: number; external: number; arrayBuffers: number } }

/** Asks each probe for its V8 figures (SIGUSR2), node `snapshotOf` for a heap snapshot too. */
async function heapFigures(procs: { name: string; pid: number }[], probeDir: string, snapshotOf: number): Promise<{ figures: (HeapFigures | undefined)[]; snapshot: string | undefined }> {
  const snapPid = procs[snapshotOf]?.pid;
  if (snapPid !== undefined) writeFileSync(path.join(probeDir, `${snapPid}.snapshot-wanted`), '');
  for (const p of procs) process.kill(p.pid, 'SIGUSR2');
  const deadline = Date.now() + 60_000;
  const done = (pid: number): boolean => existsSync(path.join(probeDir, `${pid}.json`));
  const snapDone = (): boolean => snapPid === undefined || existsSync(path.join(probeDir, `${snapPid}.snapshot-done`));
  while (Date.now() < deadline && !(procs.every((p) => done(p.pid)) && snapDone())) await sleep(200);
  const snapFile = snapPid === undefined || !snapDone() ? undefined : path.join(probeDir, `${snapPid}.heapsnapshot`);
  const figures = procs.map((p) => (done(p.pid) ? JSON.parse(readFileSync(path.join(probeDir, `${p.pid}.json`), 'utf8')) as HeapFigures : undefined));
  return { figures, snapshot: snapFile !== undefined && existsSync(snapFile) ? snapFile : undefined };
}

/**
 * Stops each node in turn and starts it again; ms from the spawn to the first 200 of /healthz,
 * and the CPU the node had used by then (ms; less moved by a busy machine than the wall clock).
 */
async function startTimes(sys: ShoalCluster, loadsFile: string, codeCache: string): Promise<{ ms: number[]; cpuMs: number[]; boundMs: number[]; firstMs: number; firstCpuMs: number }> {
  const out: number[] = [];
  const cpu: number[] = [];
  const bound: number[] = [];
  // Each node twice (a median of six: the spread of one restart is tens of ms), then node 2 with
  // the code cache removed first: a build's first start. A last restart of node 1 records the
  // modules it loads (not timed: the hooks slow it).
  const timed = [0, 1, 2, 0, 1, 2];
  for (const i of [...timed, 1, 0]) {
    const n = sys.nodes[i];
    if (!n?.proc) throw new Error(`node ${i + 1} is not running`);
    await stopProcess(n.proc, 'SIGTERM');
    n.proc = undefined;
    if (out.length === timed.length) rmSync(codeCache, { force: true });
    const recording = out.length === timed.length + 1;
    // The ESM loader records modules only: that restart loads serve's code as ES modules.
    if (recording) Object.assign(process.env, { SHOAL_FOOTPRINT_LOADS: loadsFile, SHOAL_CODE_CACHE: '0' });
    const logFrom = sys.logText(i).length;
    const t0 = performance.now();
    const restarted = sys.restart(i, 60_000);
    delete process.env.SHOAL_FOOTPRINT_LOADS;
    delete process.env.SHOAL_CODE_CACHE;
    let answered = Number.NaN;
    while (Number.isNaN(answered) && performance.now() - t0 < 60_000) {
      const r = await once(n.client, { method: 'GET', path: '/healthz' }, 1000).catch(() => undefined);
      if (r?.status === 200) {
        answered = performance.now() - t0;
        const pid = n.pid;
        if (!recording) cpu.push(pid !== undefined ? cpuMs(pid) : Number.NaN);
      } else {
        await sleep(5);
      }
    }
    await restarted;
    if (!recording) {
      out.push(answered);
      bound.push(boundMsOf(sys.logText(i).slice(logFrom)));
    }
  }
  return {
    ms: out.slice(0, timed.length), cpuMs: cpu.slice(0, timed.length), boundMs: bound.slice(0, timed.length),
    firstMs: out[timed.length] ?? Number.NaN, firstCpuMs: cpu[timed.length] ?? Number.NaN,
  };
}

/** Peak RSS (MiB) of `args` run by node with the probe preloaded, median of `runs`. */
function peakRss(args: string[], probeDir: string, runs: number, loadsFile?: string): number {
  const peaks: number[] = [];
  for (let r = 0; r < runs; r++) {
    const env = { ...process.env, SHOAL_FOOTPRINT_DIR: probeDir, ...(loadsFile !== undefined && r === runs - 1 ? { SHOAL_FOOTPRINT_LOADS: loadsFile } : {}) };
    const res = spawnSync(process.execPath, ['--import', probe, ...args], { env, encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`node ${args.join(' ')}: exit ${res.status}: ${res.stderr}`);
    const exit = path.join(probeDir, `${res.pid}.exit.json`);
    if (loadsFile === undefined || r < runs - 1) peaks.push((JSON.parse(readFileSync(exit, 'utf8')) as { maxRssKiB: number }).maxRssKiB / 1024);
  }
  peaks.sort((a, b) => a - b);
  return peaks[Math.floor(peaks.length / 2)] ?? Number.NaN;
}

interface Run {
  o: Options;
  shoal: Idle[];
  etcd: Idle[];
  heap: (HeapFigures | undefined)[];
  snapshot: { groups: HeapGroup[]; totalBytes: number; nodes: number } | undefined;
  startMs: number[];
  /** ms from each restarted node's process start to its API bound, by its own start-up line. */
  startBoundMs: number[];
  /** CPU of each restarted node (ms) from its spawn to its API answering. */
  startCpuMs: number[];
  /** The same for one restart with no code cache (a build's first start): ms, and its CPU. */
  firstMs: number;
  firstCpuMs: number;
  versionMiB: number;
  bareMiB: number;
  /** The resident pages of the node binary by section: each shoal node, then a bare Node.js process idle as long. */
  binaries: { name: string; pages: BinaryPages }[];
  serveLoads: LoadBreakdown;
  versionLoads: LoadBreakdown;
  etcdVersion: string;
}

async function run(o: Options): Promise<Run> {
  progress('bundling the working tree into bench/.builds/footprint');
  const meta = await build();
  const bin = path.join(buildDir, 'run.mjs');
  const work = mkdtempSync(path.join(os.tmpdir(), 'shoal-footprint-'));
  trackTempDir(work);
  process.env.SHOAL_FOOTPRINT_DIR = work;
  const versionLoads = path.join(work, 'version.loads');
  const versionMiB = peakRss([bin, '--version'], work, 6, versionLoads);
  const bareMiB = peakRss(['-e', '0'], work, 5);
  const sys = new ShoalCluster(timeouts, false, bin, ['--import', probe], { runtime: { kind: o.runtime } }, true, o.env);
  const etcd = o.etcd ? new EtcdCluster(timeouts) : undefined;
  try {
    progress(`starting three shoal nodes (runtime ${o.runtime})${etcd ? ' and three etcd members' : ''}`);
    await sys.start();
    if (etcd) await etcd.start();
    const shoalProcs = sys.nodes.map((n) => ({ name: n.name, pid: n.pid ?? -1 }));
    const etcdProcs = etcd ? etcd.nodes.map((n) => ({ name: n.name, pid: n.pid ?? -1 })) : [];
    // A bare Node.js process idle as long as the nodes: the pages of the binary any process touches.
    const bare = spawnLogged(process.execPath, ['-e', 'setInterval(() => {}, 1e6)'], path.join(work, 'bare.log'));
    let idle: Idle[];
    let binaries: Run['binaries'];
    try {
      idle = await measureIdle([...shoalProcs, ...etcdProcs], o);
      binaries = [...shoalProcs.map((p) => ({ name: `shoal ${p.name}`, pages: binaryPages(p.pid) })), { name: 'bare `node`', pages: binaryPages(bare.pid) }];
    } finally {
      await stopProcess(bare);
    }
    progress('V8 heap figures and a heap snapshot of n1');
    const { figures, snapshot } = await heapFigures(shoalProcs, work, 0);
    const summary = snapshot !== undefined ? summariseHeapSnapshot(snapshot) : undefined;
    if (snapshot !== undefined) rmSync(snapshot, { force: true });
    progress('start to API answering: each node restarted in turn');
    const serveLoads = path.join(work, 'serve.loads');
    const { ms: startMs, cpuMs: startCpuMs, boundMs: startBoundMs, firstMs, firstCpuMs } = await startTimes(sys, serveLoads, path.join(buildDir, 'serve.cjs.cache'));
    return {
      o, shoal: idle.slice(0, 3), etcd: idle.slice(3), heap: figures, snapshot: summary, startMs, startBoundMs, startCpuMs, firstMs, firstCpuMs, versionMiB, bareMiB, binaries,
      serveLoads: breakdown(serveLoads, meta, root), versionLoads: breakdown(versionLoads, meta, root),
      etcdVersion: etcd ? etcdVersion(etcdBinary) ?? 'unknown' : 'not run',
    };
  } finally {
    await sys.destroy();
    if (etcd) await etcd.destroy();
    rmSync(work, { recursive: true, force: true });
  }
}

const mib = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : '–');
const kib = (bytes: number): string => `${Math.round(bytes / 1024).toLocaleString('en-US')}`;
const median = (xs: number[]): number => { const s = [...xs].filter(Number.isFinite).sort((a, b) => a - b); return s[Math.floor(s.length / 2)] ?? Number.NaN; };
const avg = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

function idleTable(r: Run): string[] {
  const rows = [...r.shoal.map((x) => ({ ...x, kind: 'shoal' })), ...r.etcd.map((x) => ({ ...x, kind: 'etcd' }))];
  return [
    `| process | RSS after ${r.o.idle} s idle (MiB) | idle CPU over ${r.o.cpu} s (% of a core) | context switches/s (all threads) | threads |`,
    '|---|---:|---:|---:|---:|',
    ...rows.map((x) => `| ${x.kind} ${x.name} | ${mib(x.rssMiB)} | ${x.cpuPct.toFixed(2)} | ${x.switchesPerS.toFixed(0)} | ${x.threads} |`),
  ];
}

/** The pages of the node binary each process touched, by ELF section. */
function binaryLines(rows: Run['binaries']): string[] {
  const total = (b: BinaryPages): number => b.text + b.rodata + b.icu + b.symbols + b.other;
  return [
    '| process | .text: machine code (MiB) | .rodata: constants, the JavaScript of Node.js\'s own modules (MiB) | ICU data (MiB) | dynamic symbols (MiB) | other (MiB) | in all (MiB) |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map((x) => `| ${x.name} | ${mib(x.pages.text)} | ${mib(x.pages.rodata)} | ${mib(x.pages.icu)} | ${mib(x.pages.symbols)} | ${mib(x.pages.other)} | ${mib(total(x.pages))} |`),
  ];
}

/** Where each process's resident memory lies, by kind of mapping (from /proc/PID/smaps). */
function mapLines(rows: { kind: string; name: string; map: MemoryMap }[]): string[] {
  return [
    '| process | mapped files: node binary, libraries (MiB) | malloc main heap, brk (MiB) | malloc thread arenas (MiB) | other anonymous: V8 heap and code, large buffers (MiB) | stacks, other (MiB) |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows.map((x) => `| ${x.kind} ${x.name} | ${mib(x.map.files)} | ${mib(x.map.brkHeap)} | ${mib(x.map.threadArenas)} | ${mib(x.map.otherAnonymous)} | ${mib(x.map.other)} |`),
  ];
}

function targetLines(r: Run): string[] {
  const rss = avg(r.shoal.map((x) => x.rssMiB));
  const cpu = avg(r.shoal.map((x) => x.cpuPct));
  const start = median(r.startMs);
  const eRss = r.etcd.length > 0 ? avg(r.etcd.map((x) => x.rssMiB)) : Number.NaN;
  const eCpu = r.etcd.length > 0 ? avg(r.etcd.map((x) => x.cpuPct)) : Number.NaN;
  const verdict = (ok: boolean): string => (ok ? 'met' : '**not met**');
  return [
    '| figure | measured | target | |',
    '|---|---:|---:|---|',
    `| idle RSS per node (mean of 3) | ${mib(rss)} MiB (etcd ${mib(eRss)} MiB, ${(rss / eRss).toFixed(1)}x) | <= 70 MB | ${verdict(rss * 2 ** 20 <= 70e6)} |`,
    `| idle CPU per node (mean of 3) | ${cpu.toFixed(2)} % (etcd ${eCpu.toFixed(2)} %, ${(cpu / eCpu).toFixed(1)}x) | <= 0.5 % | ${verdict(cpu <= 0.5)} |`,
    `| start to API answering (median of ${r.startMs.length} restarts: ${r.startMs.map((x) => x.toFixed(0)).join(', ')} ms) | ${start.toFixed(0)} ms | <= 300 ms | ${verdict(start <= 300)} |`,
    `| of which: the process's start to its API bound, by the node's start-up line (median of the same restarts: ${r.startBoundMs.map((x) => x.toFixed(0)).join(', ')} ms) | ${median(r.startBoundMs).toFixed(0)} ms | – | |`,
    `| of which: bound to the first 200 (the first TLS handshake and request, behind the node's first passes; the spawn itself), median of the differences | ${median(r.startMs.map((x, k) => x - (r.startBoundMs[k] ?? Number.NaN))).toFixed(0)} ms | – | |`,
    `| CPU of a node from its spawn to API answering (median of the same restarts: ${r.startCpuMs.map((x) => x.toFixed(0)).join(', ')} ms) | ${median(r.startCpuMs).toFixed(0)} ms | – | |`,
    `| start to API answering at a build's first start (one restart with the code cache removed; its CPU ${r.firstCpuMs.toFixed(0)} ms) | ${r.firstMs.toFixed(0)} ms | – | |`,
    `| \`shoal --version\` peak RSS (median of 5) | ${mib(r.versionMiB)} MiB (bare \`node -e 0\`: ${mib(r.bareMiB)} MiB) | – | |`,
  ];
}

function heapLines(r: Run): string[] {
  const lines = [
    '| node | V8 heap used (MiB) | V8 heap total (MiB) | external (MiB) | of which array buffers (MiB) | RSS at that moment (MiB) |',
    '|---|---:|---:|---:|---:|---:|',
    ...r.heap.map((h, i) => (h ? `| n${i + 1} | ${mib(h.memory.heapUsed / 2 ** 20)} | ${mib(h.heap.total_heap_size / 2 ** 20)} | ${mib(h.memory.external / 2 ** 20)} | ${mib(h.memory.arrayBuffers / 2 ** 20)} | ${mib(h.memory.rss / 2 ** 20)} |` : `| n${i + 1} | – | – | – | – | – |`)),
  ];
  if (r.snapshot) {
    lines.push('', `Heap snapshot of n1 (idle): ${r.snapshot.nodes.toLocaleString('en-US')} objects, ${mib(r.snapshot.totalBytes / 2 ** 20)} MiB self size; the top 20 by self size (constructor, or kind in brackets):`, '',
      '| what | count | self size (KiB) |', '|---|---:|---:|',
      ...r.snapshot.groups.slice(0, 20).map((g) => `| ${g.what.replaceAll('|', '\\|')} | ${g.count.toLocaleString('en-US')} | ${kib(g.bytes)} |`));
  }
  return lines;
}

function loadLines(what: string, b: LoadBreakdown, top: number): string[] {
  return [
    `${what}: ${b.outputsLoaded} of the bundle's ${b.outputsTotal} files (${kib(b.bundleBytesLoaded)} of ${kib(b.bundleBytesTotal)} KiB of JavaScript), ${b.builtins} node: modules through the ESM loader, ${b.external.files} files outside the bundle (native packages, ${kib(b.external.bytes)} KiB). The sources in the loaded files, by package or folder (top ${top}):`,
    '',
    '| package / folder | source files | bytes in the bundle (KiB) |',
    '|---|---:|---:|',
    ...b.groups.slice(0, top).map((g) => `| ${g.what} | ${g.files} | ${kib(g.bytes)} |`),
    `| (the other ${Math.max(0, b.groups.length - top)}) | ${b.groups.slice(top).reduce((a, g) => a + g.files, 0)} | ${kib(b.groups.slice(top).reduce((a, g) => a + g.bytes, 0))} |`,
  ];
}

/** The nodes' environment, in words, for a section's header. */
function environmentWords(env: Record<string, string>): string {
  const set = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  return set.length === 0 ? 'run as started by hand (no environment of `shoal install`)' : `run with the environment \`shoal install\` writes into the unit on this machine (src/cli/node-environment.ts): ${set.map((e) => `\`${e}\``).join(', ')}`;
}

function report(r: Run, cmd: string): string {
  return [
    '## Footprint of an idle node (issue 45: fit for a Raspberry Pi)',
    '',
    `\`${cmd}\`, ${new Date().toISOString().slice(0, 10)}; ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, etcd ${r.etcdVersion}. `
      + `Three \`shoal serve\` processes of the bundled working tree (runtime ${r.o.runtime}, HTTPS API, Raft heartbeat 100 ms / election 1000 ms; serve run as bin/shoal.js runs it, from dist/serve.cjs with the V8 code cache the first start of the build wrote) and three etcd members (same timing, client TLS), idle side by side on one machine; each node with bench/lib/footprint-probe.mjs preloaded (a signal and an exit handler), ${environmentWords(r.o.env)}. `
      + 'Start to API answering: each node stopped (SIGTERM) and started again on its data, from the spawn to the first 200 of /healthz.',
    '',
    ...targetLines(r),
    '',
    ...idleTable(r),
    '',
    '### Where the memory goes',
    '',
    'By kind of mapping, RSS after the idle time (/proc/PID/smaps):',
    '',
    ...mapLines([...r.shoal.map((x) => ({ ...x, kind: 'shoal' })), ...r.etcd.map((x) => ({ ...x, kind: 'etcd' }))]),
    '',
    'Of the mapped files, the pages of the `node` binary each process has touched, by ELF section (/proc/PID/pagemap; bench/lib/binary-pages.ts): clean pages that every Node.js process on the machine shares and the kernel can drop and read again.',
    '',
    ...binaryLines(r.binaries),
    '',
    ...heapLines(r),
    '',
    '### Code loaded at start',
    '',
    ...loadLines('`shoal serve` (node 1 restarted with the ESM loader recorded, its code as ES modules: SHOAL_CODE_CACHE=0; otherwise serve runs from serve.cjs, one script)', r.serveLoads, 25),
    '',
    ...loadLines('`shoal --version`', r.versionLoads, 8),
  ].join('\n');
}

/** The leak check: the bundle's three nodes with --expose-gc and the probe (bench/lib/leak-check.ts). */
async function runLeak(leak: LeakOptions): Promise<string> {
  progress('bundling the working tree into bench/.builds/footprint-leak');
  await build(buildDirOf('footprint-leak'));
  const work = mkdtempSync(path.join(os.tmpdir(), 'shoal-footprint-'));
  trackTempDir(work);
  process.env.SHOAL_FOOTPRINT_DIR = work;
  const sys = new ShoalCluster(timeouts, false, path.join(buildDirOf('footprint-leak'), 'run.mjs'), ['--expose-gc', '--import', probe], {
    runtime: { kind: leak.runtime }, node: { cpuMillis: 64_000, memoryBytes: 128 * 2 ** 30 },
  }, true);
  try {
    progress(`starting three shoal nodes (runtime ${leak.runtime})`);
    await sys.start();
    const r = await leakCheck(sys, leak, work);
    return leakReport(r, `npm run bench:footprint -- ${process.argv.slice(2).join(' ')}`.trim());
  } finally {
    await sys.destroy();
    rmSync(work, { recursive: true, force: true });
  }
}

interface DocsRun {
  docs: number;
  runtime: string;
  env: Record<string, string>;
  shoal: DocsFigures;
  etcd: DocsFigures | undefined;
  at3s: (HeapFigures | undefined)[];
  at35s: (HeapFigures | undefined)[];
  /** Each shoal node's RSS by kind of mapping, 35 s after the last write. */
  maps: { kind: string; name: string; map: MemoryMap }[];
  leader: number;
  snapshot: { groups: HeapGroup[]; totalBytes: number; nodes: number } | undefined;
  etcdVersion: string;
}

/** --docs: the memory after N documents, shoal beside etcd, and where a shoal node's goes. */
async function runDocs(o: Options, docs: number): Promise<DocsRun> {
  progress('bundling the working tree into bench/.builds/footprint-docs');
  await build(buildDirOf('footprint-docs'));
  const work = mkdtempSync(path.join(os.tmpdir(), 'shoal-footprint-'));
  trackTempDir(work);
  process.env.SHOAL_FOOTPRINT_DIR = work;
  const sys = new ShoalCluster(timeouts, false, path.join(buildDirOf('footprint-docs'), 'run.mjs'), ['--import', probe], { runtime: { kind: o.runtime } }, true, o.env);
  try {
    progress(`three shoal nodes (runtime ${o.runtime}): ${docs} documents`);
    await sys.start();
    const procs = (): { name: string; pid: number }[] => sys.nodes.map((n) => ({ name: n.name, pid: n.pid ?? -1 }));
    let at3s: (HeapFigures | undefined)[] = [];
    const shoal = await docsFootprint(sys, docs, async () => {
      for (const p of procs()) rmSync(path.join(work, `${p.pid}.json`), { force: true });
      at3s = (await heapFigures(procs(), work, -1)).figures;
    });
    const maps = procs().map((p) => ({ kind: 'shoal', name: p.name, map: memoryMap(p.pid) }));
    const leader = await agreedLeader(sys);
    progress(`shoal: loaded in ${shoal.loadSeconds.toFixed(1)} s; RSS at 3 s ${shoal.rssAt3s.map(mib).join(' / ')}, at 35 s ${shoal.rssAt35s.map(mib).join(' / ')} MiB; heap used at 3 s ${at3s.map((h) => mib((h?.memory.heapUsed ?? Number.NaN) / 2 ** 20)).join(' / ')} MiB`);
    progress(`V8 figures and a heap snapshot of the leader (n${leader + 1})`);
    for (const p of procs()) rmSync(path.join(work, `${p.pid}.json`), { force: true });
    const { figures: at35s, snapshot } = await heapFigures(procs(), work, leader);
    const summary = snapshot !== undefined ? summariseHeapSnapshot(snapshot) : undefined;
    if (snapshot !== undefined) rmSync(snapshot, { force: true });
    await sys.destroy();
    let etcdFigures: DocsFigures | undefined;
    if (o.etcd) {
      const etcd = new EtcdCluster(timeouts);
      try {
        progress(`three etcd members: ${docs} documents`);
        await etcd.start();
        etcdFigures = await docsFootprint(etcd, docs);
        progress(`etcd: loaded in ${etcdFigures.loadSeconds.toFixed(1)} s; RSS at 3 s ${etcdFigures.rssAt3s.map(mib).join(' / ')}, at 35 s ${etcdFigures.rssAt35s.map(mib).join(' / ')} MiB`);
      } finally {
        await etcd.destroy();
      }
    }
    return { docs, runtime: o.runtime, env: o.env, shoal, etcd: etcdFigures, at3s, at35s, maps, leader, snapshot: summary, etcdVersion: o.etcd ? etcdVersion(etcdBinary) ?? 'unknown' : 'not run' };
  } finally {
    await sys.destroy();
    rmSync(work, { recursive: true, force: true });
  }
}

function docsReport(r: DocsRun, cmd: string): string {
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  const each = (xs: number[]): string => xs.map(mib).join(' / ');
  const ratio = (a: number[], b: number[] | undefined): string => (b ? (sum(a) / sum(b)).toFixed(2) : '–');
  const e = r.etcd;
  const heapRow = (when: string, hs: (HeapFigures | undefined)[]): string[] => hs.map((h, i) => (h
    ? `| n${i + 1}${i === r.leader ? ' (leader)' : ''}, ${when} | ${mib(h.memory.heapUsed / 2 ** 20)} | ${mib(h.heap.total_heap_size / 2 ** 20)} | ${mib(h.memory.external / 2 ** 20)} | ${mib(h.memory.arrayBuffers / 2 ** 20)} | ${mib(h.memory.rss / 2 ** 20)} |`
    : `| n${i + 1}, ${when} | – | – | – | – | – |`));
  return [
    `## Memory after ${r.docs.toLocaleString('en-US')} documents (issue 45: RSS <= 1.5x etcd's)`,
    '',
    `\`${cmd}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${os.cpus().length} cores, Node ${process.version}, etcd ${r.etcdVersion}; load average ${os.loadavg().map((x) => x.toFixed(1)).join(' / ')} at the end (the machine is shared). `
      + `Three \`shoal serve\` processes of the bundled working tree (runtime ${r.runtime}; ${environmentWords(r.env)}), then three etcd members, each loaded as \`npm run bench -- --only memory\` loads them: ${r.docs.toLocaleString('en-US')} documents of a 256-character value by 64 clients to the leader, one system at a time.`,
    '',
    '| figure (MiB) | shoal (sum of 3; each) | etcd (sum of 3; each) | shoal/etcd | target |',
    '|---|---:|---:|---:|---|',
    `| RSS 3 s after the last write (as \`npm run bench\` reads it) | ${mib(sum(r.shoal.rssAt3s))} (${each(r.shoal.rssAt3s)}) | ${e ? `${mib(sum(e.rssAt3s))} (${each(e.rssAt3s)})` : '–'} | ${ratio(r.shoal.rssAt3s, e?.rssAt3s)} | <= 1.5 |`,
    `| RSS 35 s after the last write | ${mib(sum(r.shoal.rssAt35s))} (${each(r.shoal.rssAt35s)}) | ${e ? `${mib(sum(e.rssAt35s))} (${each(e.rssAt35s)})` : '–'} | ${ratio(r.shoal.rssAt35s, e?.rssAt35s)} | |`,
    `| loading (s) | ${r.shoal.loadSeconds.toFixed(1)} | ${e ? e.loadSeconds.toFixed(1) : '–'} | | |`,
    '',
    'V8 figures of each shoal node (the probe\'s, no GC of ours), 3 s and 35 s after the last write:',
    '',
    '| node | V8 heap used (MiB) | V8 heap total (MiB) | external (MiB) | of which array buffers (MiB) | RSS at that moment (MiB) |',
    '|---|---:|---:|---:|---:|---:|',
    ...heapRow('3 s', r.at3s),
    ...heapRow('35 s', r.at35s),
    '',
    'Each shoal node\'s RSS 35 s after the last write by kind of mapping (/proc/PID/smaps):',
    '',
    ...mapLines(r.maps),
    ...(r.snapshot ? ['', `Heap snapshot of the leader after the 35 s figures: ${r.snapshot.nodes.toLocaleString('en-US')} objects, ${mib(r.snapshot.totalBytes / 2 ** 20)} MiB self size; the top 25 by self size:`, '',
      '| what | count | self size (KiB) |', '|---|---:|---:|',
      ...r.snapshot.groups.slice(0, 25).map((g) => `| ${g.what.replaceAll('|', '\\|')} | ${g.count.toLocaleString('en-US')} | ${kib(g.bytes)} |`)] : []),
  ].join('\n');
}

async function main(): Promise<void> {
  const o = parseOptions();
  if (o === 'help') { console.log(help); return; }
  abandonOnSignal();
  if (o.docs !== undefined) {
    const text = docsReport(await runDocs(o, o.docs), `npm run bench:footprint -- ${process.argv.slice(2).join(' ')}`.trim());
    console.log(text);
    if (o.write) writeNamedSection('footprint-docs', text);
    return;
  }
  if (o.leak) {
    const text = await runLeak(o.leak);
    console.log(text);
    if (o.write) writeNamedSection('footprint-leak', text);
    return;
  }
  const r = await run(o);
  const text = report(r, `npm run bench:footprint -- ${process.argv.slice(2).join(' ')}`.trim());
  console.log(text);
  if (o.write) writeNamedSection('footprint', text);
}

main().catch((err: unknown) => {
  console.error(`bench:footprint: ${(err as Error).message}`);
  killAllStarted();
  process.exit(1);
});
