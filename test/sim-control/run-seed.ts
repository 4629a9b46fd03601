// Runs one seed: the safety phase (faults, operator actions, every checker after every step),
// then the liveness phase. A failing seed is replayed with the trace on to show how it got
// there; the replay must fail the same way, or the run was not deterministic.

import { SeededPrng } from '../../src/raft/prng.ts';
import { Trace } from '../sim/trace.ts';
import { Violation } from './checkers/violation.ts';
import { runLiveness } from './liveness.ts';
import { Nemesis } from './nemesis.ts';
import { Operator } from './operator.ts';
import { drawScenario, type ControlScenario } from './scenario.ts';
import type { SimStats } from './stats.ts';
import { World } from './world.ts';

/** Steps of the safety phase (100 ms of simulated time each). */
export const defaultSafetySteps = 200;

export interface Failure {
  seed: number;
  phase: 'safety' | 'liveness';
  step: number;
  /** Simulated ms since the start. */
  atMs: number;
  checker: string;
  message: string;
  /** The last lines of the trace, from a replay of the seed. */
  trace: string[];
}

export interface SeedResult {
  seed: number;
  scenario: ControlScenario;
  stats: SimStats;
  failure?: Failure;
}

export interface RunOptions {
  safetySteps?: number;
  /** Keep a trace (its tail goes into a failure). */
  trace?: boolean;
  traceTailLines?: number;
  /** Print every trace line as it happens. */
  echo?: (line: string) => void;
}

export async function runSeed(seed: number, opts: RunOptions = {}): Promise<SeedResult> {
  const result = await runOnce(seed, opts);
  if (result.failure === undefined || opts.trace === true || opts.echo !== undefined) return result;
  const replay = await runOnce(seed, { ...opts, trace: true });
  const f = result.failure;
  const r = replay.failure;
  f.trace = r?.trace ?? [];
  if (r === undefined || r.message !== f.message || r.step !== f.step) {
    f.message += ` [NONDETERMINISTIC: the replay ${r === undefined ? 'passed' : `failed differently: ${r.message}`}]`;
  }
  return result;
}

async function runOnce(seed: number, opts: RunOptions): Promise<SeedResult> {
  const prng = new SeededPrng(seed);
  const scenario = drawScenario(seed, prng.fork(), opts.safetySteps ?? defaultSafetySteps);
  const trace = new Trace(opts.trace === true || opts.echo !== undefined, opts.traceTailLines ?? 80, opts.echo);
  const world = new World(scenario, prng.fork(), trace);
  const nemesis = new Nemesis(world, prng.fork(), new SeededPrng(seed ^ 0x5eed_1ea5), new SeededPrng(seed ^ 0x4ea1_7400));
  const operator = new Operator(world, prng.fork(), new SeededPrng(seed ^ 0x0ace_5e75), new SeededPrng(seed ^ 0x0b0d_9e75));
  let phase: Failure['phase'] = 'safety';
  try {
    world.boot();
    for (let s = 0; s < scenario.safetySteps; s++) {
      nemesis.onStep();
      operator.onStep();
      await world.runStep(true);
    }
    phase = 'liveness';
    world.stats.livenessMs = await runLiveness(world, nemesis, operator);
  } catch (e) {
    const { checker, message } = classify(e);
    world.log(`FAILED ${checker}: ${message}`);
    return { seed, scenario, stats: world.stats, failure: { seed, phase, step: world.step, atMs: world.now(), checker, message, trace: trace.tail() } };
  } finally {
    world.dispose();
  }
  return { seed, scenario, stats: world.stats };
}

function classify(e: unknown): { checker: string; message: string } {
  if (e instanceof Violation) return { checker: e.checker, message: e.message };
  if (e instanceof Error) return { checker: 'exception', message: `${e.message} (${(e.stack ?? '').split('\n').slice(1, 6).map((l) => l.trim()).join(' < ')})` };
  return { checker: 'exception', message: String(e) };
}
