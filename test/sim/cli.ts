// The simulator's command line: `npm run sim -- --seeds N` runs seeds 1..N (or from --from K),
// `--seed S` replays one seed (with --verbose, its whole trace), `--jobs J` splits the seeds
// over J processes, `--soak` runs a fresh range that starts at random (`npm run sim:soak`).
// Exit code 0 when every seed passed, 1 when any failed, 2 on a usage error.

import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { defaultSafetyTicks, runSeed, type Failure, type SeedResult } from './run-seed.ts';
import { addStats, emptyStats, type SeedStats } from './stats.ts';

interface Args {
  from: number;
  count: number;
  single: boolean;
  verbose: boolean;
  perSeed: boolean;
  json: boolean;
  ticks: number;
  jobs: number;
  soak: boolean;
  /** --soak drew the start at random (no --from). */
  startDrawn: boolean;
}

/** Seeds a soak runs unless --seeds says otherwise. */
const soakSeedsDefault = 3000;
/**
 * Where a soak's random start is drawn: above every range a person or the default test run
 * uses, and below 2^32 (seeds are 32-bit) with room for the run.
 */
const soakStartMin = 10_000_000;
const soakStartMax = 4_000_000_000;

/** What a run (or one job of a parallel run) reports with --json. */
interface Summary {
  from: number;
  seeds: number;
  failures: Failure[];
  seconds: number;
  totals: SeedStats;
}

const usage = `usage: npm run sim -- [--seeds N] [--from K] [--seed S] [--verbose] [--per-seed] [--ticks T] [--jobs J] [--json] [--soak]

  --seeds N     run N seeds (default 100; ${soakSeedsDefault} with --soak), starting at --from (default 1)
  --seed S      run the one seed S and print its scenario and stats; replays a failure exactly
  --verbose     with --seed: print the whole trace as it runs
  --per-seed    print one line of stats per seed
  --ticks T     ticks of the safety phase per seed (default ${defaultSafetyTicks})
  --jobs J      run the seeds in J processes (default 1)
  --json        print the summary as JSON
  --soak        a fresh range: start at random in [${soakStartMin}, ${soakStartMax}) unless --from
                is given, print the range first and the failing seeds last, each with its replay
                command (npm run sim:soak is --soak --jobs 2)
exit code: 0 all seeds passed, 1 some seed failed, 2 usage error`;

function parseArgs(argv: string[]): Args | 'help' {
  const a: Args = { from: 1, count: 100, single: false, verbose: false, perSeed: false, json: false, ticks: defaultSafetyTicks, jobs: 1, soak: false, startDrawn: false };
  let fromGiven = false;
  let countGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 0) throw new Error(`${flag} needs a non-negative integer`);
      return v;
    };
    switch (flag) {
      case '--seeds': a.count = num(); countGiven = true; break;
      case '--from': a.from = num(); fromGiven = true; break;
      case '--seed': a.from = num(); a.count = 1; a.single = true; break;
      case '--verbose': a.verbose = true; break;
      case '--per-seed': a.perSeed = true; break;
      case '--ticks': a.ticks = num(); break;
      case '--json': a.json = true; break;
      case '--jobs': a.jobs = Math.max(1, num()); break;
      case '--soak': a.soak = true; break;
      case '--help': case '-h': return 'help';
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  if (a.soak) {
    if (a.single) throw new Error('--soak runs a range; replay one seed with --seed alone');
    if (!countGiven) a.count = soakSeedsDefault;
    if (!fromGiven) {
      a.from = randomInt(soakStartMin, soakStartMax - a.count);
      a.startDrawn = true;
    }
  }
  if (a.from + a.count - 1 > 0xffffffff) throw new Error('seeds are 32-bit: --from plus --seeds must stay below 2^32');
  return a;
}

function statsLine(s: SeedStats): string {
  return `elections ${s.elections}, commit ${s.commitIndex}, acked ${s.acked}/${s.proposals}, crashes ${s.crashes} (${s.crashesMidReady} mid-Ready), `
    + `restarts ${s.restarts}, partitions ${s.partitions}, snapshots sent ${s.snapshotsSent} installed ${s.snapshotsInstalled}, `
    + `compactions ${s.compactions}, conf changes ${s.confChangesApplied}/${s.confChangesProposed} (+${s.nodesAdded} -${s.nodesRemoved} nodes, ${s.majorityReplacements} replacing a majority, ${s.jointSplits} joint splits), `
    + `persisted notices ${s.persistedNotices} (${s.followerCommits} committing at once), follower reads without a round ${s.followerReads}, `
    + `transfers ${s.transfersCompleted}/${s.transfersRequested}, reads ${s.readsServed}/${s.readsIssued}, `
    + `messages ${s.messagesSent} (${s.messagesLost} lost, ${s.messagesDuplicated} dup), liveness ${s.livenessTicks} ticks`;
}

function printFailure(f: Failure): void {
  console.log(`\nFAIL seed ${f.seed}: ${f.checker} in the ${f.phase} phase at tick ${f.tick} (step ${f.step})`);
  console.log(`  ${f.message}`);
  if (f.trace.length > 0) {
    console.log('  trace tail:');
    for (const line of f.trace) console.log(`    ${line}`);
  }
  console.log(`  replay: npm run sim -- --seed ${f.seed} --verbose`);
}

/** Runs the seeds here, one after another. */
function runSeeds(args: Args): Summary {
  const echo = args.single && args.verbose ? (line: string) => console.log(line) : undefined;
  const totals = emptyStats();
  const failures: Failure[] = [];
  const started = performance.now();
  for (let seed = args.from; seed < args.from + args.count; seed++) {
    const r: SeedResult = runSeed(seed, { safetyTicks: args.ticks, ...(echo !== undefined ? { echo } : {}) });
    addStats(totals, r.stats);
    if (r.failure !== undefined) {
      failures.push(r.failure);
      // Said at once, so that a long run's failures can be looked at while it goes on.
      if (!args.single) process.stderr.write(`seed ${seed} FAILED (${r.failure.checker} in the ${r.failure.phase} phase)\n`);
    }
    if (args.single && !args.json) console.log(`seed ${seed}: ${JSON.stringify(r.scenario)}\n${statsLine(r.stats)}`);
    else if (args.perSeed && !args.json) console.log(`seed ${seed} ${r.failure === undefined ? 'ok' : 'FAIL'}: ${statsLine(r.stats)}`);
    const done = seed - args.from + 1;
    if (!args.single && done % 500 === 0 && done < args.count) {
      process.stderr.write(`seeds ${args.from}..: ${done}/${args.count} done, ${failures.length} failed, ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
    }
  }
  return { from: args.from, seeds: args.count, failures, seconds: (performance.now() - started) / 1000, totals };
}

/** Splits the seeds into `jobs` ranges, each run by a child process of this same command. */
async function runJobs(args: Args): Promise<Summary> {
  const started = performance.now();
  const per = Math.ceil(args.count / args.jobs);
  const parts: Array<Promise<Summary>> = [];
  for (let from = args.from; from < args.from + args.count; from += per) {
    const count = Math.min(per, args.from + args.count - from);
    parts.push(runChild(['--from', String(from), '--seeds', String(count), '--ticks', String(args.ticks), '--json']));
  }
  const results = await Promise.all(parts);
  const totals = emptyStats();
  for (const r of results) addStats(totals, r.totals);
  return {
    from: args.from, seeds: args.count, failures: results.flatMap((r) => r.failures),
    seconds: (performance.now() - started) / 1000, totals,
  };
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
  if (args.soak) printSoakEnd(args, s);
}

/** The range, first, so that a run that dies still says what it was running. */
function printSoakStart(args: Args): void {
  console.log(`soak: seeds ${args.from}..${args.from + args.count - 1} (${args.startDrawn ? 'a fresh range, its start drawn at random' : 'from --from'}; `
    + `this run again: npm run sim -- --from ${args.from} --seeds ${args.count} --jobs ${args.jobs})`);
}

/** The verdict, last, with a replay command per failing seed. */
function printSoakEnd(args: Args, s: Summary): void {
  const range = `seeds ${args.from}..${args.from + args.count - 1}`;
  if (s.failures.length === 0) {
    console.log(`\nsoak passed: ${range}, ${s.seeds} seeds`);
    return;
  }
  console.log(`\nsoak FAILED: ${s.failures.length} of ${s.seeds} seeds (${range}):`);
  for (const f of s.failures) console.log(`  seed ${f.seed} (${f.checker} in the ${f.phase} phase): npm run sim -- --seed ${f.seed} --verbose`);
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
  if (args.soak && !args.json) printSoakStart(args);
  const summary = args.jobs > 1 && !args.single ? await runJobs(args) : runSeeds(args);
  printSummary(args, summary);
  return summary.failures.length > 0 ? 1 : 0;
}

process.exitCode = await main();
