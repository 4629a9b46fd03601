// The control-plane simulator's command line: `npm run sim:control -- --seeds N` runs seeds
// 1..N (or from --from K), `--seed S` replays one seed (with --verbose, its whole trace),
// `--jobs J` splits the seeds over J processes. Exit code 0 when every seed passed, 1 when any
// failed, 2 on a usage error.

import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { defaultSafetySteps, runSeed, type Failure, type SeedResult } from './run-seed.ts';
import { addStats, emptyStats, type SimStats } from './stats.ts';

interface Args {
  from: number;
  count: number;
  single: boolean;
  verbose: boolean;
  perSeed: boolean;
  json: boolean;
  steps: number;
  jobs: number;
}

interface Summary {
  from: number;
  seeds: number;
  failures: Failure[];
  seconds: number;
  totals: SimStats;
}

const usage = `usage: npm run sim:control -- [--seeds N] [--from K] [--seed S] [--verbose] [--per-seed] [--steps T] [--jobs J] [--json]

  --seeds N     run N seeds (default 100), starting at --from (default 1)
  --seed S      run the one seed S and print its scenario and stats; replays a failure exactly
  --verbose     with --seed: print the whole trace as it runs
  --per-seed    print one line of stats per seed
  --steps T     steps (100 ms of simulated time each) of the safety phase per seed (default ${defaultSafetySteps})
  --jobs J      run the seeds in J processes (default 1)
  --json        print the summary as JSON
exit code: 0 all seeds passed, 1 some seed failed, 2 usage error`;

function parseArgs(argv: string[]): Args | 'help' {
  const a: Args = { from: 1, count: 100, single: false, verbose: false, perSeed: false, json: false, steps: defaultSafetySteps, jobs: 1 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 0) throw new Error(`${flag} needs a non-negative integer`);
      return v;
    };
    switch (flag) {
      case '--seeds': a.count = num(); break;
      case '--from': a.from = num(); break;
      case '--seed': a.from = num(); a.count = 1; a.single = true; break;
      case '--verbose': a.verbose = true; break;
      case '--per-seed': a.perSeed = true; break;
      case '--steps': a.steps = num(); break;
      case '--json': a.json = true; break;
      case '--jobs': a.jobs = Math.max(1, num()); break;
      case '--help': case '-h': return 'help';
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  return a;
}

export function statsLine(s: SimStats): string {
  return `steps ${s.steps}, entries ${s.entries}, elections ${s.elections} (${s.transfers} transfers), late proposals: ${s.forwarded} forwarded `
    + `(${s.staleTermRefused} refused stale_term), ${s.survived} survived, ${s.lost} lost; operator races ${s.races}, `
    + `loop conflicts ${s.loopConflicts} (+${s.loopWritesRefused} writes refused), reports refused ${s.reportsRefused}; `
    + `placements ${s.placements}, nodes declared down ${s.nodesDeclaredDown}; partitions ${s.partitions}, crashes ${s.crashes}, machine deaths ${s.machineDeaths}, `
    + `restarts ${s.restarts}, runtime outages ${s.runtimeOutages}, container exits ${s.containerExits}; updates ${s.updates} (${s.badUpdates} bad: `
    + `${s.updatesPaused} paused, ${s.updatesRolledBack} rolled back; ${s.updatesCompleted} completed), scales ${s.scales}, drains ${s.drains}, rebalances ${s.rebalances}; `
    + `budget: ${s.budgetedStops} slots taken down voluntarily (${s.budgetAtLimit} at the limit); `
    + `shoal frozen ${s.freezes}, machines suspended ${s.suspends}, fence kills ${s.fenceKills}; `
    + `links cut ${s.linkCuts}, graceful stops ${s.gracefulStops}, node-health hand-overs ${s.healthTransfers}; `
    + `volume: ${s.volumeVersions} versions, ${s.volumeCopies} copies accepted, ${s.volumeRefused} refused as stale, ${s.volumeTaskStarts} task starts, ${s.volumeFailovers} failovers; liveness ${s.livenessMs} ms`;
}

function printFailure(f: Failure): void {
  console.log(`\nFAIL seed ${f.seed}: ${f.checker} in the ${f.phase} phase at step ${f.step} (${f.atMs} ms)`);
  console.log(`  ${f.message}`);
  if (f.trace.length > 0) {
    console.log('  trace tail:');
    for (const line of f.trace) console.log(`    ${line}`);
  }
  console.log(`  replay: npm run sim:control -- --seed ${f.seed} --verbose`);
}

async function runSeeds(args: Args): Promise<Summary> {
  const echo = args.single && args.verbose ? (line: string) => console.log(line) : undefined;
  const totals = emptyStats();
  const failures: Failure[] = [];
  const started = performance.now();
  for (let seed = args.from; seed < args.from + args.count; seed++) {
    const r: SeedResult = await runSeed(seed, { safetySteps: args.steps, ...(echo !== undefined ? { echo } : {}) });
    addStats(totals, r.stats);
    if (r.failure !== undefined) failures.push(r.failure);
    if (args.single && !args.json) console.log(`seed ${seed}: ${JSON.stringify(r.scenario)}\n${statsLine(r.stats)}`);
    else if (args.perSeed && !args.json) console.log(`seed ${seed} ${r.failure === undefined ? 'ok' : `FAIL (${r.failure.checker})`}: ${statsLine(r.stats)}`);
    const done = seed - args.from + 1;
    if (!args.single && done % 100 === 0 && done < args.count) {
      process.stderr.write(`seeds ${args.from}..: ${done}/${args.count} done, ${failures.length} failed, ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
    }
  }
  return { from: args.from, seeds: args.count, failures, seconds: (performance.now() - started) / 1000, totals };
}

async function runJobs(args: Args): Promise<Summary> {
  const started = performance.now();
  const per = Math.ceil(args.count / args.jobs);
  const parts: Promise<Summary>[] = [];
  for (let from = args.from; from < args.from + args.count; from += per) {
    const count = Math.min(per, args.from + args.count - from);
    parts.push(runChild(['--from', String(from), '--seeds', String(count), '--steps', String(args.steps), '--json']));
  }
  const results = await Promise.all(parts);
  const totals = emptyStats();
  for (const r of results) addStats(totals, r.totals);
  return { from: args.from, seeds: args.count, failures: results.flatMap((r) => r.failures), seconds: (performance.now() - started) / 1000, totals };
}

function runChild(argv: string[]): Promise<Summary> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, process.argv[1] as string, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => { out += chunk; });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0 && code !== 1) reject(new Error(`job ${argv.join(' ')} exited with ${code}`));
      else resolve(JSON.parse(out) as Summary);
    });
  });
}

function printSummary(args: Args, s: Summary): void {
  if (args.json) {
    console.log(JSON.stringify(s, null, 2));
    return;
  }
  for (const f of s.failures) printFailure(f);
  console.log(`\n${s.seeds} seeds (${s.from}..${s.from + s.seeds - 1}) in ${s.seconds.toFixed(1)} s `
    + `(${((s.seconds * 1000) / Math.max(1, s.seeds)).toFixed(1)} ms/seed${args.jobs > 1 ? `, ${args.jobs} jobs` : ''}); ${s.failures.length} failed`
    + (s.failures.length > 0 ? `: seeds ${s.failures.map((f) => `${f.seed} (${f.checker})`).join(', ')}` : ''));
  console.log(`totals: ${statsLine(s.totals)}`);
}

async function main(): Promise<number> {
  let args: Args | 'help';
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`${(e as Error).message}\n${usage}`);
    return 2;
  }
  if (args === 'help') {
    console.log(usage);
    return 0;
  }
  const summary = args.jobs > 1 && !args.single ? await runJobs(args) : await runSeeds(args);
  printSummary(args, summary);
  return summary.failures.length > 0 ? 1 : 0;
}

process.exitCode = await main();
