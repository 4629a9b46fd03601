// Re-checks a recorded history: `npx tsx test/faults/check-history.ts <history.jsonl | run dir>`.
// Prints what the history holds per key, the verdict, and for a violation the operations around
// it together with the nemesis steps (from nemesis.jsonl beside the history) that overlap them.
// Exit code: 0 linearizable, 1 not linearizable or the history breaks the recording rules,
// 2 usage error or unreadable file, 3 undecided within the time budget.

import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pairOperations, readHistory, type HistoryEvent, type Operation } from './history.ts';
import { checkLinearizable, describeOperation } from './linearizability.ts';

const usage = `usage: npx tsx test/faults/check-history.ts <history.jsonl | run directory> [--key K] [--timeout-ms N] [--json]

  --key K          check only register K
  --timeout-ms N   budget for the check (default 600000); past it the verdict is "unknown"
  --json           print the result as JSON
exit code: 0 linearizable, 1 not linearizable or malformed, 2 usage error, 3 undecided`;

interface Args {
  file: string;
  key: string | undefined;
  timeoutMs: number;
  json: boolean;
}

function parseArgs(argv: string[]): Args | 'help' {
  let file: string | undefined;
  let key: string | undefined;
  let timeoutMs = 600_000;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--help' || a === '-h') return 'help';
    else if (a === '--json') json = true;
    else if (a === '--key') key = argv[++i];
    else if (a === '--timeout-ms') timeoutMs = Number(argv[++i]);
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else if (file === undefined) file = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (file === undefined) throw new Error('which history? give a history.jsonl or a kept run directory');
  if (!(timeoutMs > 0)) throw new Error('--timeout-ms needs a positive number');
  if (existsSync(file) && statSync(file).isDirectory()) file = path.join(file, 'history.jsonl');
  return { file, key, timeoutMs, json };
}

interface NemesisLine {
  time: number;
  event: string;
  kind?: string;
  detail: string;
}

/** Nemesis steps between `from` and `to` (ms on the history's clock), and the last one before. */
function nemesisAround(historyFile: string, from: number, to: number): NemesisLine[] {
  const file = path.join(path.dirname(historyFile), 'nemesis.jsonl');
  if (!existsSync(file)) return [];
  const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as NemesisLine);
  const before = lines.filter((l) => l.time < from).slice(-2);
  return [...before, ...lines.filter((l) => l.time >= from && l.time <= to)];
}

function perKey(ops: Operation[]): string[] {
  const byKey = new Map<string, Record<string, number>>();
  for (const o of ops) {
    const c = byKey.get(o.key) ?? {};
    const name = `${o.op} ${o.outcome}`;
    c[name] = (c[name] ?? 0) + 1;
    byKey.set(o.key, c);
  }
  return [...byKey].sort(([a], [b]) => a.localeCompare(b)).map(([k, c]) => `  ${k}: ${Object.entries(c).sort().map(([n, v]) => `${n} ${v}`).join(', ')}`);
}

function main(argv: string[]): number {
  let args: Args | 'help';
  try {
    args = parseArgs(argv);
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${usage}`);
    return 2;
  }
  if (args === 'help') {
    console.log(usage);
    return 0;
  }
  let parsed: ReturnType<typeof readHistory>;
  try {
    parsed = readHistory(args.file);
  } catch (err) {
    console.error(`cannot read ${args.file}: ${(err as Error).message}`);
    return 2;
  }
  const key = args.key;
  const events: HistoryEvent[] = key === undefined ? parsed.events : parsed.events.filter((e) => e.key === key);
  const t0 = performance.now();
  let result: ReturnType<typeof checkLinearizable>;
  let ops: Operation[];
  try {
    ops = pairOperations(events);
    result = checkLinearizable(events, { timeoutMs: args.timeoutMs });
  } catch (err) {
    console.error(`${args.file} breaks the recording rules: ${(err as Error).message}`);
    return 1;
  }
  const ms = performance.now() - t0;
  if (args.json) {
    console.log(JSON.stringify({ file: args.file, events: events.length, parseErrors: parsed.errors, ms, result }, null, 2));
  } else {
    console.log(`${args.file}: ${events.length} events, ${ops.length} operations${key === undefined ? '' : ` on ${key}`}`);
    for (const e of parsed.errors.slice(0, 20)) console.log(`  unreadable line ${e.line}: ${e.message}`);
    console.log(perKey(ops).join('\n'));
    if (result.ok === true) console.log(`linearizable (checked in ${(ms / 1000).toFixed(2)} s)`);
    else if (result.ok === 'unknown') {
      const why = result.reason === 'timeout' ? `ran out of the ${args.timeoutMs} ms budget` : 'hit the search limit (configurations held in memory)';
      console.log(`undecided: key ${result.key} ${why}; try a larger --timeout-ms, or check one --key at a time`);
    }
    else {
      console.log(`NOT linearizable: key ${result.key}: ${result.reason}\noperations around it (event n is the history's n-th event from 0${key === undefined ? ', line n+1 of the file' : ` of key ${key}`}):`);
      for (const o of result.ops) console.log(`  ${describeOperation(o)}${o.node === undefined ? '' : ` via ${o.node}`}`);
      const from = Math.min(...result.ops.map((o) => o.invokeTime));
      const to = Math.max(...result.ops.map((o) => o.completeTime ?? o.invokeTime));
      const steps = nemesisAround(args.file, from, to);
      if (steps.length > 0) console.log(`nemesis at that time:\n${steps.map((l) => `  ${l.time.toFixed(3)} ${l.event} ${l.kind ?? ''} ${l.detail}`).join('\n')}`);
    }
  }
  if (parsed.errors.length > 0) return 1;
  return result.ok === true ? 0 : result.ok === 'unknown' ? 3 : 1;
}

process.exitCode = main(process.argv.slice(2));
