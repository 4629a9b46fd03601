// Summarises V8 .cpuprofile files (from SHOAL_CPU_PROF=<dir> npm run bench ...): where the
// CPU time went, by area (a package, a folder of this repository, Node internals, GC) and by
// function, self and inclusive. Idle time is left out of the percentages.
//
//   npx tsx bench/cpu-profile-summary.ts <dir or files...> [--top N] [--by-file] [--skip-s S]
//
// --skip-s leaves out the first S seconds of each profile (process start-up, module loading).

import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

/** Where a frame's code lives: a package, a folder of this repository, or a V8/Node category. */
function areaOf(f: CallFrame): string {
  const url = f.url.replace(/^file:\/\//, '');
  if (url === '') return f.functionName.startsWith('(') ? f.functionName : '(native)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[1] === undefined ? url.slice(5) : url.slice(5).split('/').slice(0, 2).join('/')}`;
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0] ?? url;
  }
  if (url.startsWith(repoRoot)) return path.relative(repoRoot, url).split('/').slice(0, 2).join('/');
  return url;
}

function frameName(f: CallFrame): string {
  const url = f.url.replace(/^file:\/\//, '');
  const where = url === '' ? '' : ` ${url.startsWith(repoRoot) ? path.relative(repoRoot, url) : url.replace(/.*\/node_modules\//, '')}:${f.lineNumber + 1}`;
  return `${f.functionName || '(anonymous)'}${where}`;
}

interface Totals {
  totalMs: number;
  idleMs: number;
  selfByArea: Map<string, number>;
  selfByFn: Map<string, number>;
  inclusiveByFn: Map<string, number>;
}

function add(m: Map<string, number>, k: string, v: number): void {
  m.set(k, (m.get(k) ?? 0) + v);
}

function accumulate(p: Profile, t: Totals, byFile: boolean, skipMs: number): void {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let atMs = 0;
  for (let i = 0; i < p.samples.length; i++) {
    atMs += (p.timeDeltas[i] ?? 0) / 1000;
    // A sample lasts until the next one; the last sample gets the mean interval.
    const ms = ((p.timeDeltas[i + 1] ?? (p.endTime - p.startTime) / p.samples.length)) / 1000;
    if (atMs < skipMs) continue;
    const leaf = byId.get(p.samples[i] ?? -1);
    if (!leaf) continue;
    t.totalMs += ms;
    if (leaf.callFrame.functionName === '(idle)') { t.idleMs += ms; continue; }
    add(t.selfByArea, byFile ? frameName({ ...leaf.callFrame, functionName: '', lineNumber: -1 }).trim() || areaOf(leaf.callFrame) : areaOf(leaf.callFrame), ms);
    add(t.selfByFn, frameName(leaf.callFrame), ms);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const n = byId.get(id);
      if (!n) break;
      const name = frameName(n.callFrame);
      if (!seen.has(name)) { seen.add(name); add(t.inclusiveByFn, name, ms); }
    }
  }
}

function top(m: Map<string, number>, busyMs: number, n: number): string {
  return [...m].sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([k, v]) => `${((v / busyMs) * 100).toFixed(1).padStart(5)}%  ${v.toFixed(0).padStart(7)} ms  ${k}`).join('\n');
}

function files(args: string[]): string[] {
  return args.flatMap((a) => statSync(a).isDirectory()
    ? readdirSync(a).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(a, f))
    : [a]);
}

function main(): number {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '25' }, 'skip-s': { type: 'string', default: '0' }, 'by-file': { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
  });
  if (values.help || positionals.length === 0) {
    console.log('usage: npx tsx bench/cpu-profile-summary.ts <dir or .cpuprofile files...> [--top N] [--by-file] [--skip-s S]\n' +
      'Self time by area (package / repository folder / Node internals / GC), by function, and inclusive time by function.');
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  const n = Number(values.top);
  for (const f of files(positionals)) {
    const t: Totals = { totalMs: 0, idleMs: 0, selfByArea: new Map(), selfByFn: new Map(), inclusiveByFn: new Map() };
    accumulate(JSON.parse(readFileSync(f, 'utf8')) as Profile, t, values['by-file'], Number(values['skip-s']) * 1000);
    const busy = t.totalMs - t.idleMs;
    console.log(`\n=== ${path.basename(f)}: ${(t.totalMs / 1000).toFixed(1)} s profiled, ${(busy / 1000).toFixed(1)} s busy (${((busy / t.totalMs) * 100).toFixed(0)}%)`);
    console.log(`\n-- self time by ${values['by-file'] ? 'file' : 'area'}\n${top(t.selfByArea, busy, n)}`);
    console.log(`\n-- self time by function\n${top(t.selfByFn, busy, n)}`);
    console.log(`\n-- inclusive time by function\n${top(t.inclusiveByFn, busy, n)}`);
  }
  return 0;
}

process.exitCode = main();
