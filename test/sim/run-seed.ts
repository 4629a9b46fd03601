// Runs one seed: the safety phase (faults, membership changes, transfers and client load, with
// every checker watching every step), then the liveness phase. A failing seed is replayed with the
// trace on to show how it got there; the replay must fail the same way, or the run was not
// deterministic.

import { AssertionError } from '../../src/base/assert.ts';
import { SeededPrng } from '../../src/raft/prng.ts';
import { Violation } from './checkers/events.ts';
import { Clients } from './clients.ts';
import { runLiveness } from './liveness.ts';
import { Nemesis } from './nemesis.ts';
import { Operator } from './operator.ts';
import { drawScenario, type Scenario } from './scenario.ts';
import type { SeedStats } from './stats.ts';
import { Trace } from './trace.ts';
import { World } from './world.ts';

export const defaultSafetyTicks = 400;

export interface Failure {
  seed: number;
  phase: 'safety' | 'liveness';
  tick: number;
  step: number;
  checker: string;
  message: string;
  /** The last lines of the trace, from a replay of the seed. */
  trace: string[];
}

export interface SeedResult {
  seed: number;
  scenario: Scenario;
  stats: SeedStats;
  failure?: Failure;
}

export interface RunOptions {
  safetyTicks?: number;
  /** Keep a trace (the tail goes into a failure). */
  trace?: boolean;
  traceTailLines?: number;
  /** Print every trace line as it happens. */
  echo?: (line: string) => void;
}

export function runSeed(seed: number, opts: RunOptions = {}): SeedResult {
  const result = runOnce(seed, opts);
  if (result.failure === undefined || opts.trace === true) return result;
  const replay = runOnce(seed, { ...opts, trace: true });
  const f = result.failure;
  const r = replay.failure;
  f.trace = replay.failure?.trace ?? [];
  if (r === undefined || r.message !== f.message || r.tick !== f.tick || r.step !== f.step) {
    f.message += ` [NONDETERMINISTIC: the replay ${r === undefined ? 'passed' : `failed differently: ${r.message}`}]`;
  }
  return result;
}

function runOnce(seed: number, opts: RunOptions): SeedResult {
  const prng = new SeededPrng(seed);
  const scenario = drawScenario(seed, prng.fork(), opts.safetyTicks ?? defaultSafetyTicks);
  const trace = new Trace(opts.trace === true || opts.echo !== undefined, opts.traceTailLines ?? 60, opts.echo);
  const world = new World(scenario, prng.fork(), trace);
  const nemesis = new Nemesis(world, prng.fork());
  const operator = new Operator(world, prng.fork());
  const clients = new Clients(world, prng.fork());
  let phase: Failure['phase'] = 'safety';
  try {
    world.found(scenario.voters, scenario.learners);
    world.settle();
    for (let t = 0; t < scenario.safetyTicks; t++) {
      nemesis.onTick();
      operator.onTick();
      clients.onTick();
      world.settle();
      world.runTick();
    }
    phase = 'liveness';
    world.stats.livenessTicks = runLiveness(world, nemesis, clients);
  } catch (e) {
    const { checker, message } = classify(e);
    world.log(`FAILED ${checker}: ${message}`);
    return {
      seed, scenario, stats: world.finishStats(),
      failure: { seed, phase, tick: world.tick, step: world.now, checker, message, trace: trace.tail() },
    };
  }
  return { seed, scenario, stats: world.finishStats() };
}

function classify(e: unknown): { checker: string; message: string } {
  if (e instanceof Violation) return { checker: e.checker, message: e.message };
  if (e instanceof AssertionError) return { checker: 'core-assertion', message: withFrames(e) };
  if (e instanceof Error) return { checker: 'exception', message: withFrames(e) };
  return { checker: 'exception', message: String(e) };
}

function withFrames(e: Error): string {
  const frames = (e.stack ?? '').split('\n').slice(1, 6).map((l) => l.trim());
  return `${e.message} (${frames.join(' < ')})`;
}
