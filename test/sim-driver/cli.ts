// The driver simulator's command line. `--seed S [--verbose]` replays one seed (with --verbose,
// its whole trace as it runs); `--seeds N [--from K]` runs a range. Exit code 0 when every seed
// passed, 1 when one failed, 2 on a usage error.

import { runSeed, type SeedResult } from './run-seed.ts';

const usage = `usage: npm run sim:driver -- [--seeds N] [--from K] [--seed S] [--verbose] [--lying-disks]

  --seeds N      run N seeds (default 200) from --from (default 1)
  --seed S       run the one seed S, print its scenario, stats and failures
  --verbose      with --seed: print the whole trace as it runs
  --lying-disks  plant a bug (disks lose synced writes in a crash) to see the checkers fail
exit code: 0 all seeds passed, 1 some seed failed, 2 usage error`;

interface Args { from: number; count: number; verbose: boolean; lyingDisks: boolean }

function parseArgs(argv: string[]): Args | string {
  const a: Args = { from: 1, count: 200, verbose: false, lyingDisks: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${flag} needs a whole number`);
      return v;
    };
    if (flag === '--seeds') a.count = num();
    else if (flag === '--from') a.from = num();
    else if (flag === '--seed') { a.from = num(); a.count = 1; }
    else if (flag === '--verbose') a.verbose = true;
    else if (flag === '--lying-disks') a.lyingDisks = true;
    else if (flag === '--help' || flag === '-h') return 'help';
    else throw new Error(`unknown argument ${flag ?? ''}`);
  }
  return a;
}

export function replayCommand(seed: number): string {
  return `npx tsx test/sim-driver/cli.ts --seed ${seed} --verbose`;
}

export function formatFailure(r: SeedResult): string {
  return [`seed ${r.seed} FAILED (${r.scenario})`, ...r.failures.map((f) => `  ${f}`), `  replay: ${replayCommand(r.seed)}`].join('\n');
}

async function main(): Promise<number> {
  let args: Args | string;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`${(err as Error).message}\n${usage}`);
    return 2;
  }
  if (args === 'help') { console.log(usage); return 0; }
  if (typeof args === 'string') return 2;
  const single = args.count === 1;
  const failed: SeedResult[] = [];
  const started = Date.now();
  for (let seed = args.from; seed < args.from + args.count; seed++) {
    const t0 = Date.now();
    const r = await runSeed(seed, { lyingDisks: args.lyingDisks, ...(args.verbose && single ? { onTrace: (l: string) => console.log(l) } : {}) });
    if (single) console.log(`${r.scenario}\n${JSON.stringify(r.stats)}\ntrace ${r.traceHash.slice(0, 16)}`);
    if (r.failures.length > 0) { failed.push(r); console.log(`${formatFailure(r)}\n  (${Date.now() - t0} ms)`); }
  }
  console.log(`${args.count - failed.length}/${args.count} seeds passed (${args.from}..${args.from + args.count - 1}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  for (const r of failed) console.log(`failing seed ${r.seed}: ${replayCommand(r.seed)}`);
  return failed.length > 0 ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) process.exitCode = await main();
