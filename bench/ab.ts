// Two builds of shoal side by side, to tell whether a change is faster on a machine whose speed
// drifts by tens of percent within a minute: three nodes of each build on 127.0.0.1, the load
// generator of compare.ts, one cluster loaded at a time in short rounds ordered A B B A, cycle
// after cycle, so that the drift weighs on both builds alike. See docs/benchmarks.md.
//
//   npm run bench:ab -- --build NAME          bundle the working tree as build NAME
//   npm run bench:ab -- --a NAME --b NAME     compare two builds

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { abandonOnSignal, killAllStarted } from './lib/proc.ts';
import { ShoalCluster } from './lib/shoal-cluster.ts';
import { benchCollection, fill, pointOf, runRound, type PointResult, type PointRound, type PointSpec } from './lib/throughput.ts';
import { writeRunner } from '../scripts/bundle.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const buildsDir = path.join(root, 'bench', '.builds');
const keys = 10_000;

const help = `usage: npm run bench:ab -- --build NAME
       npm run bench:ab -- --a BUILD --b BUILD [options]

Compares two builds of shoal on this machine. --build bundles the working tree (as
'npm run build' does) into bench/.builds/NAME, so a comparison is: build the base, make the
change, build again, compare. A BUILD is the name of such a build or the path of an entry
point that runs like bin/shoal.js.

Both clusters run at once (three nodes each, on 127.0.0.1); one is loaded at a time. After a
warm-up of each, every cycle measures the point in four rounds, A B B A, and the figures of a
build are its rounds counted together. The output gives each cycle's throughput ratio B/A, then
the totals: throughput, p50 and p99 of each build, B/A, and in how many cycles B was faster.

Options:
  --op write|read       what the clients do (default write: PUT of 256-byte documents)
  --clients N           concurrent clients, each one request at a time (default 1)
  --to leader|spread    where requests go (default spread: each client walks the nodes)
  --cycles N            A B B A cycles (default 6)
  --seconds N           measured seconds per round (default 4)
  --warmup N            seconds of writes on each cluster before the first cycle (default 10)
  --timeouts H/E        heartbeat/election timeout in ms (default 100/1000)
  --a-flags=FLAGS       node flags for build A's nodes, space-separated (e.g. --a-flags='--jitless')
  --b-flags=FLAGS       the same for build B's; with the same build for --a and --b, this compares flags
  -h, --help            show this help

Exit codes: 0 done, 1 the run failed, 2 usage error.`;

class UsageError extends Error {}

interface Options {
  spec: PointSpec;
  cycles: number;
  seconds: number;
  warmup: number;
  heartbeatMs: number;
  electionMs: number;
  a: string;
  b: string;
  aFlags: string[];
  bFlags: string[];
}

function count(raw: string, what: string, min: number): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < min) throw new UsageError(`--${what}: expected a number of at least ${min}, got '${raw}'`);
  return n;
}

function oneOf<T extends string>(raw: string, allowed: readonly T[], what: string): T {
  if (!(allowed as readonly string[]).includes(raw)) throw new UsageError(`--${what}: expected one of ${allowed.join(', ')}, got '${raw}'`);
  return raw as T;
}

/** Node flags, space-separated; each must look like one ('--name' or '--name=value'). */
function flagsOf(raw: string, what: string): string[] {
  const flags = raw.split(' ').filter((f) => f !== '');
  const bad = flags.find((f) => !/^--?[\w-]+(=\S+)?$/.test(f));
  if (bad !== undefined) throw new UsageError(`--${what}: '${bad}' is not a node flag (expected e.g. --max-semi-space-size=32)`);
  return flags;
}

/** A build's entry point: a name under bench/.builds, or a file. */
function entryOf(raw: string, what: string): string {
  const named = path.join(buildsDir, raw, 'run.mjs');
  if (/^[\w.-]+$/.test(raw) && existsSync(named)) return named;
  if (existsSync(raw)) return path.resolve(raw);
  throw new UsageError(`--${what}: no build '${raw}' in bench/.builds and no such file; make one with --build ${raw}`);
}

function parseOptions(argv: string[]): Options | { build: string } | 'help' {
  const { values: v } = parseArgs({
    args: argv, strict: true,
    options: {
      build: { type: 'string' }, a: { type: 'string' }, b: { type: 'string' },
      op: { type: 'string', default: 'write' }, clients: { type: 'string', default: '1' }, to: { type: 'string', default: 'spread' },
      cycles: { type: 'string', default: '6' }, seconds: { type: 'string', default: '4' }, warmup: { type: 'string', default: '10' },
      timeouts: { type: 'string', default: '100/1000' }, 'a-flags': { type: 'string', default: '' }, 'b-flags': { type: 'string', default: '' }, help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (v.help) return 'help';
  if (v.build !== undefined) {
    if (!/^[\w.-]+$/.test(v.build)) throw new UsageError(`--build: a name of letters, digits, '.', '_' or '-', got '${v.build}'`);
    return { build: v.build };
  }
  if (v.a === undefined || v.b === undefined) throw new UsageError('give --build NAME, or both --a and --b');
  const [hb, el] = v.timeouts.split('/').map((s) => count(s, 'timeouts', 1));
  if (hb === undefined || el === undefined || el <= hb || el % hb !== 0) throw new UsageError('--timeouts: expected HEARTBEAT/ELECTION in ms, the election a multiple of the heartbeat, e.g. 100/1000');
  return {
    spec: { op: oneOf(v.op, ['write', 'read'] as const, 'op'), clients: Math.round(count(v.clients, 'clients', 1)), to: oneOf(v.to, ['leader', 'spread'] as const, 'to') },
    cycles: Math.round(count(v.cycles, 'cycles', 1)), seconds: count(v.seconds, 'seconds', 0.5), warmup: count(v.warmup, 'warmup', 0),
    heartbeatMs: hb, electionMs: el, a: entryOf(v.a, 'a'), b: entryOf(v.b, 'b'),
    aFlags: flagsOf(v['a-flags'], 'a-flags'), bFlags: flagsOf(v['b-flags'], 'b-flags'),
  };
}

/** Bundles the working tree into bench/.builds/NAME, with a run.mjs that runs it as bin/shoal.js does. */
async function bundle(name: string): Promise<string> {
  const dir = path.join(buildsDir, name);
  // The script empties the folder first.
  execFileSync(process.execPath, [path.join(root, 'scripts', 'bundle.mjs'), dir], { stdio: 'inherit' });
  writeRunner(dir);
  return dir;
}

const progress = (msg: string): void => { process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`); };

async function compare(o: Options): Promise<void> {
  const timeouts = { heartbeatMs: o.heartbeatMs, electionMs: o.electionMs };
  const clusters = { A: new ShoalCluster(timeouts, false, o.a, o.aFlags), B: new ShoalCluster(timeouts, false, o.b, o.bFlags) };
  const rounds: Record<'A' | 'B', PointRound[]> = { A: [], B: [] };
  const roundOpts = { warmupMs: 1000, durationMs: o.seconds * 1000, keys, timeoutMs: 10_000 };
  const ratios: number[] = [];
  try {
    for (const [label, c] of Object.entries(clusters)) {
      const flags = (label === 'A' ? o.aFlags : o.bFlags).join(' ');
      progress(`starting build ${label} (${label === 'A' ? o.a : o.b}${flags === '' ? '' : `, node ${flags}`})`);
      await c.start();
    }
    if (o.warmup > 0) {
      for (const [label, c] of Object.entries(clusters)) {
        progress(`[${label}] warm-up: ${o.warmup} s of writes, 16 clients spread over the nodes`);
        await runRound(c, { op: 'write', clients: 16, to: 'spread' }, { ...roundOpts, warmupMs: 0, durationMs: o.warmup * 1000 });
      }
    }
    if (o.spec.op === 'read') {
      for (const [label, c] of Object.entries(clusters)) {
        progress(`[${label}] writing all ${keys} keys so that reads find them`);
        await fill(c, (await c.leader()) ?? 0, benchCollection, keys, 64);
      }
    }
    for (let cycle = 1; cycle <= o.cycles; cycle++) {
      const mine: Record<'A' | 'B', PointRound[]> = { A: [], B: [] };
      for (const label of ['A', 'B', 'B', 'A'] as const) {
        const r = await runRound(clusters[label], o.spec, roundOpts);
        if (r.leaderChanged) progress(`[${label}] the leader changed during a round`);
        mine[label].push(r);
        rounds[label].push(r);
      }
      const [a, b] = [pointOf(o.spec, mine.A).perSecond, pointOf(o.spec, mine.B).perSecond];
      ratios.push(b / a);
      progress(`cycle ${cycle} of ${o.cycles}: A ${a.toFixed(0)}/s, B ${b.toFixed(0)}/s, B/A ${(b / a).toFixed(3)}`);
    }
  } finally {
    for (const c of Object.values(clusters)) await c.destroy();
  }
  const [a, b] = [pointOf(o.spec, rounds.A), pointOf(o.spec, rounds.B)];
  console.log(report(o, a, b, ratios));
}

function report(o: Options, a: PointResult, b: PointResult, ratios: readonly number[]): string {
  const row = (label: string, p: PointResult, entry: string, flags: readonly string[]): string =>
    `| ${label} | ${p.perSecond.toFixed(0)} | ${p.p50Ms.toFixed(2)} | ${p.p99Ms.toFixed(2)} | ${Math.round(p.serverCpuMicrosPerReq)} | ${p.failed} | \`${path.relative(root, entry)}\`${flags.length > 0 ? ` \`${flags.join(' ')}\`` : ''} |`;
  const sorted = [...ratios].sort((x, y) => x - y);
  const faster = ratios.filter((r) => r > 1).length;
  return [
    `${o.spec.op} ${o.spec.clients} → ${o.spec.to}, ${o.cycles} cycles of A B B A, ${o.seconds} s per round`,
    '',
    '| build | req/s | p50 ms | p99 ms | server CPU µs/req | failed | entry |',
    '|---|---|---|---|---|---|---|',
    row('A', a, o.a, o.aFlags),
    row('B', b, o.b, o.bFlags),
    `| B/A | ${(b.perSecond / a.perSecond).toFixed(3)} | ${(b.p50Ms / a.p50Ms).toFixed(3)} | ${(b.p99Ms / a.p99Ms).toFixed(3)} | ${(b.serverCpuMicrosPerReq / a.serverCpuMicrosPerReq).toFixed(3)} | | |`,
    '',
    `Throughput B/A per cycle: ${ratios.map((r) => r.toFixed(3)).join(', ')} (median ${(sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN).toFixed(3)}); B faster in ${faster} of ${ratios.length}.`,
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  let o: ReturnType<typeof parseOptions>;
  try {
    o = parseOptions(argv);
  } catch (err) {
    console.error(`${(err as Error).message}\nrun 'npm run bench:ab -- --help' for usage`);
    return 2;
  }
  if (o === 'help') {
    console.log(help);
    return 0;
  }
  if ('build' in o) {
    const dir = await bundle(o.build);
    console.log(`built ${path.relative(root, dir)} from the working tree; compare with --a ${o.build} or --b ${o.build}`);
    return 0;
  }
  abandonOnSignal();
  try {
    await compare(o);
    return 0;
  } catch (err) {
    console.error(`the run failed: ${(err as Error).stack ?? String(err)}`);
    return 1;
  } finally {
    killAllStarted();
  }
}

process.exitCode = await main(process.argv.slice(2));
