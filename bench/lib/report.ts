// The written record of a side-by-side run: the machine, the tables (shoal, etcd, shoal/etcd),
// which targets were met, and the section of bench/RESULTS.md between this benchmark's markers.

import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, fsyncSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FailoverResult } from './failover.ts';
import type { MemoryRejoinResult } from './memory-rejoin.ts';
import type { PointResult } from './throughput.ts';

export interface Machine {
  cpu: string;
  cores: number;
  ramGiB: number;
  kernel: string;
  node: string;
  etcd: string;
  fsyncMs: number;
}

export function etcdVersion(bin: string): string | undefined {
  try {
    const out = execFileSync(bin, ['--version'], { encoding: 'utf8' });
    const v = /etcd Version: (\S+)/.exec(out)?.[1];
    const go = /Go Version: (\S+)/.exec(out)?.[1];
    return v ? `${v}${go ? ` (${go})` : ''}` : undefined;
  } catch {
    return undefined;
  }
}

/** Mean latency of a 4 KiB write + fsync in the temp directory, where both systems keep data. */
export function fsyncProbeMs(rounds = 100): number {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fsync-probe-'));
  const fd = openSync(path.join(dir, 'probe'), 'w');
  const block = Buffer.alloc(4096, 1);
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) {
    writeSync(fd, block);
    fsyncSync(fd);
  }
  const ms = (performance.now() - t0) / rounds;
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
  return ms;
}

export function machine(etcd: string): Machine {
  return {
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown', cores: os.cpus().length, ramGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`, node: process.version, etcd, fsyncMs: fsyncProbeMs(),
  };
}

const fmtInt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const fmtMs = (n: number): string => (!Number.isFinite(n) ? '–' : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
const ratio = (a: number, b: number): string => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? (a / b).toFixed(2) : '–');
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const fmtMiB = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(' / ');

export interface RunRecord {
  command: string;
  date: string;
  machine: Machine;
  timeouts: string;
  etcdPeers: string;
  secondsPerPoint: number;
  /** Seconds of writes on each system before the first point; absent in records from before it existed. */
  warmupSeconds?: number;
  /** Measured rounds per point and system (A B B A); absent means one round. */
  roundsPerPoint?: number;
  /** Client timeout per write during the leader kills. */
  failoverTimeoutMs: number;
  /** 1-minute load averages at the start and the end of the run. */
  loadAvg: [number, number];
  points: PointResult[];
  failovers: FailoverResult[];
  memory: MemoryRejoinResult[];
}

type Pair<T> = { shoal: T | undefined; etcd: T | undefined };

function pairPoints(points: PointResult[]): Pair<PointResult>[] {
  const key = (p: PointResult): string => `${p.op}/${p.clients}/${p.to}`;
  const keys = [...new Set(points.map(key))];
  return keys.map((k) => ({ shoal: points.find((p) => key(p) === k && p.system === 'shoal'), etcd: points.find((p) => key(p) === k && p.system === 'etcd') }));
}

export function throughputTable(points: PointResult[]): string {
  const head = '| workload | clients | sent to | shoal req/s | etcd req/s | shoal/etcd | shoal p50 ms | etcd p50 ms | shoal p99 ms | etcd p99 ms | p99 shoal/etcd |';
  const rows = pairPoints(points).map(({ shoal: s, etcd: e }) => {
    const p = s ?? e;
    if (!p) return '';
    const op = p.op === 'write' ? 'write' : 'linearizable read';
    return `| ${op} | ${p.clients} | ${p.to === 'leader' ? 'leader' : 'all nodes'} | ${fmtInt(s?.perSecond ?? NaN)} | ${fmtInt(e?.perSecond ?? NaN)} | ${ratio(s?.perSecond ?? NaN, e?.perSecond ?? NaN)} | ${fmtMs(s?.p50Ms ?? NaN)} | ${fmtMs(e?.p50Ms ?? NaN)} | ${fmtMs(s?.p99Ms ?? NaN)} | ${fmtMs(e?.p99Ms ?? NaN)} | ${ratio(s?.p99Ms ?? NaN, e?.p99Ms ?? NaN)} |`;
  });
  return [head, '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|', ...rows].join('\n');
}

export function cpuTable(points: PointResult[]): string {
  const head = '| workload | clients | sent to | shoal µs CPU/req | etcd µs CPU/req | shoal/etcd | other load % (shoal run / etcd run) | failed requests (shoal / etcd) |';
  const rows = pairPoints(points).map(({ shoal: s, etcd: e }) => {
    const p = s ?? e;
    if (!p) return '';
    const flag = (r: PointResult | undefined): string => (r?.leaderChanged ? ' (leader changed!)' : '');
    return `| ${p.op} | ${p.clients} | ${p.to === 'leader' ? 'leader' : 'all nodes'} | ${fmtInt(s?.serverCpuMicrosPerReq ?? NaN)} | ${fmtInt(e?.serverCpuMicrosPerReq ?? NaN)} | ${ratio(s?.serverCpuMicrosPerReq ?? NaN, e?.serverCpuMicrosPerReq ?? NaN)} | ${fmtInt(s?.otherCpuPercent ?? NaN)} / ${fmtInt(e?.otherCpuPercent ?? NaN)} | ${s?.failed ?? '–'}${flag(s)} / ${e?.failed ?? '–'}${flag(e)} |`;
  });
  return [head, '|---|---:|---|---:|---:|---:|---:|---:|', ...rows].join('\n');
}

interface FailoverSummary {
  rounds: number;
  newLeaderMs: number[];
  gapMs: number[];
  acked: number;
  lost: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
};

function summarize(all: FailoverResult[], system: string): FailoverSummary | undefined {
  const fs = all.filter((f) => f.system === system);
  if (fs.length === 0) return undefined;
  return {
    rounds: fs.length, newLeaderMs: fs.map((f) => f.newLeaderMs), gapMs: fs.map((f) => f.writeGapMs),
    acked: sum(fs.map((f) => f.acked)), lost: sum(fs.map((f) => f.lost)),
  };
}

/** The median, and the range when there is more than one value. */
const spread = (xs: number[] | undefined): string => {
  if (!xs || xs.length === 0) return '–';
  if (xs.length === 1) return fmtInt(xs[0] ?? NaN);
  return `${fmtInt(median(xs))} (${fmtInt(Math.min(...xs))}–${fmtInt(Math.max(...xs))})`;
};

export function otherTable(failovers: FailoverResult[], memory: MemoryRejoinResult[]): string {
  const f: Pair<FailoverSummary> = { shoal: summarize(failovers, 'shoal'), etcd: summarize(failovers, 'etcd') };
  const m: Pair<MemoryRejoinResult> = { shoal: memory.find((x) => x.system === 'shoal'), etcd: memory.find((x) => x.system === 'etcd') };
  const rows: string[] = [];
  const row = (label: string, s: number | undefined, e: number | undefined, fmt: (n: number) => string, shown?: [string, string]): void => {
    rows.push(`| ${label} | ${shown?.[0] ?? fmt(s ?? NaN)} | ${shown?.[1] ?? fmt(e ?? NaN)} | ${ratio(s ?? NaN, e ?? NaN)} |`);
  };
  if (f.shoal || f.etcd) {
    const n = (f.shoal ?? f.etcd)?.rounds ?? 1;
    const of = n > 1 ? `, median of ${n} (range)` : '';
    row(`leader kill -9: kill → new leader agreed by survivors (ms${of})`, median(f.shoal?.newLeaderMs ?? []), median(f.etcd?.newLeaderMs ?? []), fmtInt,
      [spread(f.shoal?.newLeaderMs), spread(f.etcd?.newLeaderMs)]);
    row(`leader kill -9: longest gap between successful writes (ms${of})`, median(f.shoal?.gapMs ?? []), median(f.etcd?.gapMs ?? []), fmtInt,
      [spread(f.shoal?.gapMs), spread(f.etcd?.gapMs)]);
    row('leader kill -9: acknowledged writes, all read back from a survivor', f.shoal?.acked, f.etcd?.acked, fmtInt);
    row('leader kill -9: acknowledged writes lost', f.shoal?.lost, f.etcd?.lost, fmtInt);
  }
  if (m.shoal || m.etcd) {
    const docs = (m.shoal ?? m.etcd)?.docs ?? 0;
    const mib = (r: MemoryRejoinResult | undefined, xs: number[] | undefined): string => (r && xs ? `${fmtInt(sum(xs))} (${fmtMiB(xs)})` : '–');
    row('RSS idle after start, MiB (sum of 3; each)', m.shoal ? sum(m.shoal.idleMiB) : undefined, m.etcd ? sum(m.etcd.idleMiB) : undefined, fmtInt,
      [mib(m.shoal, m.shoal?.idleMiB), mib(m.etcd, m.etcd?.idleMiB)]);
    row('CPU while idle, % of one core (sum of 3; each)', m.shoal ? sum(m.shoal.idleCpuPercent) : undefined, m.etcd ? sum(m.etcd.idleCpuPercent) : undefined, (x) => x.toFixed(1),
      [m.shoal ? `${sum(m.shoal.idleCpuPercent).toFixed(1)} (${m.shoal.idleCpuPercent.map((x) => x.toFixed(1)).join(' / ')})` : '–',
        m.etcd ? `${sum(m.etcd.idleCpuPercent).toFixed(1)} (${m.etcd.idleCpuPercent.map((x) => x.toFixed(1)).join(' / ')})` : '–']);
    row(`RSS after ${fmtInt(docs)} documents, MiB (sum of 3; each)`, m.shoal ? sum(m.shoal.loadedMiB) : undefined, m.etcd ? sum(m.etcd.loadedMiB) : undefined, fmtInt,
      [mib(m.shoal, m.shoal?.loadedMiB), mib(m.etcd, m.etcd?.loadedMiB)]);
    row(`loading ${fmtInt(docs)} documents, 64 clients to the leader (s)`, m.shoal?.loadSeconds, m.etcd?.loadSeconds, (x) => x.toFixed(1));
    if (m.shoal?.rejoin || m.etcd?.rejoin) {
      row(`wiped follower: start → caught up with ${fmtInt(docs)} documents (ms)`, m.shoal?.rejoin?.catchUpMs, m.etcd?.rejoin?.catchUpMs, fmtInt);
      row('… of which until its API first answered (process start-up)', m.shoal?.rejoin?.startMs, m.etcd?.rejoin?.startMs, fmtInt);
      row('wiped follower: member remove + add before the start (ms)', m.shoal?.rejoin?.membershipMs, m.etcd?.rejoin?.membershipMs, fmtInt);
    }
  }
  return ['| measure | shoal | etcd | shoal/etcd |', '|---|---:|---:|---:|', ...rows].join('\n');
}

export function targets(r: RunRecord): string[] {
  const out: string[] = [];
  const pairs = pairPoints(r.points).filter((p) => p.shoal && p.etcd) as { shoal: PointResult; etcd: PointResult }[];
  const name = (p: PointResult): string => `${p.op} ${p.clients} → ${p.to}`;
  if (pairs.length > 0) {
    const slower = pairs.filter((p) => p.shoal.perSecond < p.etcd.perSecond);
    out.push(`- Throughput ≥ etcd at every concurrency level: ${slower.length === 0 ? '**met**' : `**not met** in ${slower.length} of ${pairs.length} rows (${slower.map((p) => name(p.shoal)).join('; ')})`}.`);
    const worse = pairs.filter((p) => p.shoal.p99Ms > p.etcd.p99Ms);
    out.push(`- p99 ≤ etcd's: ${worse.length === 0 ? '**met**' : `**not met** in ${worse.length} of ${pairs.length} rows (${worse.map((p) => name(p.shoal)).join('; ')})`}.`);
  }
  const fs = summarize(r.failovers, 'shoal');
  const fe = summarize(r.failovers, 'etcd');
  if (fs && fe) {
    const [gs, ge] = [median(fs.gapMs), median(fe.gapMs)];
    out.push(`- Write gap after a leader kill ≤ etcd's with equal timeouts: ${gs <= ge ? '**met**' : '**not met**'} (median ${fmtInt(gs)} ms vs ${fmtInt(ge)} ms over ${fs.rounds} kill${fs.rounds > 1 ? 's' : ''} each).`);
  }
  if (fs) out.push(`- Zero acknowledged writes lost: ${fs.lost === 0 ? '**met**' : `**not met** (${fs.lost} of ${fs.acked} lost)`} (${fmtInt(fs.acked)} read back; etcd: ${fe ? `${fe.lost} of ${fmtInt(fe.acked)} lost` : 'not run'}).`);
  return out;
}

/** The order of `rounds` rounds per system: A B B A, A B B A A B, … */
function abba(rounds: number): string {
  return Array.from({ length: rounds }, (_, i) => (i % 2 === 0 ? 'A B' : 'B A')).join(' ');
}

function measuring(r: RunRecord): string {
  const rounds = r.roundsPerPoint ?? 1;
  const per = rounds > 1
    ? `${r.secondsPerPoint} s measured per point and system, in ${rounds} rounds of ${r.secondsPerPoint / rounds} s ordered ${abba(rounds)} (which system is A alternates between points), each after its own warm-up.`
    : `${r.secondsPerPoint} s measured per point after a warm-up.`;
  const before = r.warmupSeconds !== undefined && r.warmupSeconds > 0
    ? ` Before the first point, each system ran ${r.warmupSeconds} s of writes (16 clients, spread) that were not measured.`
    : '';
  return per + before;
}

export function section(r: RunRecord, analysis: string | undefined): string {
  const mc = r.machine;
  const parts = [
    '## shoal vs etcd, side by side (three processes each, one machine, one run)',
    '',
    `Command: \`${r.command}\``,
    `Date: ${r.date}`,
    `Machine: ${mc.cpu}, ${mc.cores} cores, ${mc.ramGiB} GiB RAM, ${mc.kernel}, Node ${mc.node}, etcd ${mc.etcd}; ` +
      `4 KiB write + fsync in the temp dir: ${mc.fsyncMs.toFixed(2)} ms`,
    `Machine load: 1-minute load average ${r.loadAvg[0].toFixed(1)} at the start and ${r.loadAvg[1].toFixed(1)} at the end` +
      (r.points.length > 0 ? `; other processes took ${fmtInt(sum(r.points.map((p) => p.otherCpuPercent)) / r.points.length)}% of the machine on average during the throughput points.` : '.'),
    `Raft timing on both: ${r.timeouts}. etcd peers: ${r.etcdPeers}; shoal peers: mutual TLS 1.3 (always). ` +
      `${measuring(r)} The load generator runs on the same cores.`,
    '',
  ];
  if (r.points.length > 0) parts.push('### Throughput and latency (closed loop, 256-byte values, 10,000 keys)', '', throughputTable(r.points), '');
  if (r.failovers.length > 0 || r.memory.length > 0) parts.push('### Failover, memory, rejoin', '', otherTable(r.failovers, r.memory), '');
  if (r.failovers.length > 0) {
    parts.push(`Leader kills: 16 writing clients spread over the nodes, ${fmtInt(r.failoverTimeoutMs)} ms client timeout per write, ` +
      'next node and a 25 ms pause after any failure; the same client for both systems. A system that holds requests ' +
      'during an election (etcd) has its gap rounded up to that timeout; one that refuses them at once (shoal) does not.', '');
  }
  const notes = [
    ...r.failovers.map((f) => `- ${f.system} failover${f.round > 1 || r.failovers.some((g) => g.round > 1) ? ` round ${f.round}` : ''}: killed ${f.killed}, new leader ${f.newLeader}; the longest gap began ${fmtInt(f.gapStartMs)} ms from the kill; ${fmtInt(f.failedRequests)} requests failed and were retried elsewhere.`),
    ...r.memory.filter((m) => m.rejoin).map((m) => `- ${m.system} rejoin of ${m.rejoin?.node}: ${m.rejoin?.how}.`),
  ];
  if (notes.length > 0) parts.push(...notes, '');
  const t = targets(r);
  if (t.length > 0) parts.push('### Targets', '', ...t, '');
  if (r.points.length > 0) {
    parts.push('### Server CPU per request (three nodes together) and machine load', '', cpuTable(r.points), '',
      '"other load" is CPU used by processes other than the cluster under test and the load generator ' +
      '(including the idle other cluster), in % of the whole machine: high values mean a noisy figure.', '');
  }
  if (analysis) parts.push(analysis.trim(), '');
  return parts.join('\n').trimEnd();
}

export const beginMarker = '<!-- etcd-compare:begin -->';
export const endMarker = '<!-- etcd-compare:end -->';

/** Replaces this benchmark's section of RESULTS.md, leaving every other section as it is. */
export function writeSection(file: string, body: string): void {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  const block = `${beginMarker}\n${body}\n${endMarker}`;
  const b = text.indexOf(beginMarker);
  const e = text.indexOf(endMarker);
  text = b >= 0 && e > b ? `${text.slice(0, b)}${block}${text.slice(e + endMarker.length)}` : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, text);
}

/**
 * Replaces the section `name` of RESULTS.md (between <!-- name:begin --> and <!-- name:end -->),
 * or appends it; every other section is left as it is. The benchmarks other than compare.ts use it.
 */
export function writeNamedSection(name: string, body: string): void {
  const file = new URL('../RESULTS.md', import.meta.url);
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  const begin = `<!-- ${name}:begin -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${begin}\n${body}\n${end}`;
  const b = text.indexOf(begin);
  const e = text.indexOf(end);
  writeFileSync(file, b >= 0 && e > b ? `${text.slice(0, b)}${block}${text.slice(e + end.length)}` : `${text.trimEnd()}\n\n${block}\n`);
}
