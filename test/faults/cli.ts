// `npm run test:faults -- --minutes N [--seed S] [--keep] [--run-seconds R] [--json]`: fault runs
// back to back (seeds S, S+1, ...) until N minutes have passed, each with a nemesis of about R
// seconds, then a summary. Exit code: 0 every run passed, 1 some run failed, 2 usage error,
// 3 this machine cannot run fault tests (not root, or ip/nft missing).

import { performance } from 'node:perf_hooks';
import { prerequisiteProblems } from './netns.ts';
import { runFaults, summarize, type RunResult } from './run-faults.ts';

const usage = `usage: npm run test:faults -- [--minutes N] [--seed S] [--run-seconds R] [--keep] [--results DIR] [--json] [--stale-reads]

Runs fault-injection runs on real shoal processes in network namespaces (needs root, ip and nft),
back to back, until N minutes have passed; each run's nemesis lasts about R seconds, then every
fault is healed, the cluster is restarted and the history is checked (see docs/testing.md).

  --minutes N       total time budget in minutes (default 1); a run started is finished
  --seed S          seed of the first run (default: from the clock); run i uses S + i
  --run-seconds R   nemesis time per run (default 60; at least one cycle of every fault)
  --keep            keep every run's directory, passing ones too (failing ones are always kept)
  --results DIR     where run directories go (default test-results)
  --json            print the results as JSON
  --stale-reads     self-check of the harness: reads skip ReadIndex (?consistency=stale), which
                    partitions make non-linearizable; such runs are expected to FAIL
exit code: 0 all runs passed, 1 some run failed, 2 usage error, 3 cannot run here`;

interface Args {
  minutes: number;
  seed: number;
  runSeconds: number;
  keep: boolean;
  results: string;
  json: boolean;
  staleReads: boolean;
}

function parseArgs(argv: string[]): Args | 'help' {
  const a: Args = { minutes: 1, seed: Date.now() % 1_000_000, runSeconds: 60, keep: false, results: 'test-results', json: false, staleReads: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v < 0) throw new Error(`${flag} needs a non-negative number`);
      return v;
    };
    switch (flag) {
      case '--minutes': a.minutes = num(); break;
      case '--seed': a.seed = Math.floor(num()); break;
      case '--run-seconds': a.runSeconds = num(); break;
      case '--keep': a.keep = true; break;
      case '--results': {
        const v = argv[++i];
        if (v === undefined) throw new Error('--results needs a directory');
        a.results = v;
        break;
      }
      case '--json': a.json = true; break;
      case '--stale-reads': a.staleReads = true; break;
      case '--help': case '-h': return 'help';
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  return a;
}

async function main(argv: string[]): Promise<number> {
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
  const problems = prerequisiteProblems();
  if (problems.length > 0) {
    console.error(`cannot run fault tests here:\n  ${problems.join('\n  ')}`);
    return 3;
  }
  // Ctrl-C: exit normally so the exit hook deletes namespaces and kills nodes.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => { console.error(`${sig}: cleaning up`); process.exit(130); });
  const end = performance.now() + args.minutes * 60_000;
  const results: RunResult[] = [];
  const log = args.json ? (): void => undefined : (line: string): void => console.log(line);
  do {
    const seed = args.seed + results.length;
    const r = await runFaults({ seed, durationMs: args.runSeconds * 1000, resultsDir: args.results, keep: args.keep, log, staleReads: args.staleReads });
    results.push(r);
    if (!args.json) console.log(summarize(r));
  } while (performance.now() < end);
  const failed = results.filter((r) => !r.ok);
  if (args.json) console.log(JSON.stringify({ passed: results.length - failed.length, failed: failed.length, results }, null, 2));
  else {
    const ops = results.reduce((s, r) => s + r.okOps, 0);
    const checkerMs = results.reduce((s, r) => s + r.checker.ms, 0);
    console.log(`\n${results.length - failed.length} passed, ${failed.length} failed (${ops} ok operations, checker ${(checkerMs / 1000).toFixed(1)} s in all)`);
    for (const r of failed) console.log(`failed: seed ${r.seed}, kept in ${r.dir}; re-check: npx tsx test/faults/check-history.ts ${r.dir}/history.jsonl`);
  }
  return failed.length === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
