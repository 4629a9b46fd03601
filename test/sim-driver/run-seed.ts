// One seed of the driver simulator, start to end: boot the cluster under virtual time, run the
// clients and the nemesis for the scenario's fault phase, heal, check liveness, then check the
// end state and the history. A pure function of the seed: the trace (and its hash) replays.

import { createHash } from 'node:crypto';
import { checkLinearizable } from '../faults/linearizability.ts';
import { Clients } from './clients.ts';
import { checkLiveness, livenessBoundMs } from './liveness.ts';
import { Nemesis } from './nemesis.ts';
import { describeScenario, drawScenario } from './scenario.ts';
import { installVirtualTime } from './virtual-time.ts';
import { World } from './world.ts';

export interface SeedStats {
  virtualMs: number;
  writesOk: number;
  outcomesUnknown: number;
  refused: number;
  applies: number;
  snapshots: number;
  crashes: number;
  terms: number;
  delivered: number;
  lost: number;
  diskStalls: number;
  sendsBeforeWrite: number;
  appliesDuringWrite: number;
}

export interface SeedResult {
  seed: number;
  scenario: string;
  failures: string[];
  /** sha256 of the trace: the same seed must give the same one. */
  traceHash: string;
  trace: string[];
  stats: SeedStats;
}

export interface RunOptions {
  onTrace?: (line: string) => void;
  /** Plant a bug: disks that lose synced writes in a crash (the checkers' own test). */
  lyingDisks?: boolean;
}

export async function runSeed(seed: number, opts: RunOptions = {}): Promise<SeedResult> {
  const scenario = drawScenario(seed);
  const clock = installVirtualTime();
  const world = new World(scenario, opts.onTrace);
  world.lyingDisks = opts.lyingDisks === true;
  const clients = new Clients(world, world.streams.clients);
  const failures: string[] = [];
  // A listener added per operation and left behind shows here first (issue 34).
  const onWarning = (w: Error): void => { if (w.name === 'MaxListenersExceededWarning') failures.push(`listeners: ${w.message}`); };
  process.on('warning', onWarning);
  let live;
  try {
    await world.start();
    clients.start();
    const nemesis = new Nemesis(world, world.streams.nemesis);
    nemesis.start();
    await clock.tickAsync(scenario.faultsMs);
    clients.stop();
    await settle(clock, nemesis.heal());
    live = checkLiveness(world, clients);
    const result = await settle(clock, live, livenessBoundMs(world) + 1000);
    if (result === undefined) failures.push('liveness: the check itself did not finish');
    else if (!result.ok) failures.push(`liveness: after ${Math.round(result.ms)} ms still waiting for ${result.stuck ?? '?'}`);
  } catch (err) {
    failures.push(`the run threw: ${(err as Error).stack ?? String(err)}`);
  } finally {
    clock.uninstall();
    process.off('warning', onWarning);
  }
  failures.push(...capped(world.safety.violations), ...capped(world.net.refused), ...endState(world, clients), ...listenersLeft(world));
  const lin = checkLinearizable(clients.history, { timeoutMs: 20_000 });
  if (lin.ok === false) failures.push(`linearizability: key ${lin.key}: ${lin.reason} (culprit ${JSON.stringify(lin.culprit)})`);
  if (lin.ok === 'unknown') world.log(`linearizability: unknown for ${lin.key} (${lin.reason})`);
  const snapshots = world.trace.filter((l) => l.includes('restored a snapshot')).length;
  const diskStalls = world.trace.filter((l) => l.includes('has not completed a write')).length;
  return {
    seed, scenario: describeScenario(scenario), failures,
    traceHash: createHash('sha256').update(world.trace.join('\n')).digest('hex'),
    trace: world.trace,
    stats: {
      virtualMs: Math.round(clock.now), writesOk: clients.acks.length, outcomesUnknown: clients.counts.info, refused: clients.counts.fail,
      applies: world.safety.applies, snapshots, crashes: world.crashes, terms: world.safety.terms, delivered: world.net.delivered, lost: world.net.lost,
      diskStalls, sendsBeforeWrite: world.sendsBeforeWrite, appliesDuringWrite: world.appliesDuringWrite,
    },
  };
}

/** Advances virtual time until `p` settles (or `limitMs` passes); its value, or undefined. */
async function settle<T>(clock: ReturnType<typeof installVirtualTime>, p: Promise<T>, limitMs = 60_000): Promise<T | undefined> {
  let done = false;
  let value: T | undefined;
  p.then((v) => { done = true; value = v; }, () => { done = true; });
  const end = clock.now + limitMs;
  while (!done && clock.now < end) await clock.tickAsync(5);
  return value;
}

/** Every live node holds the same state, and every acknowledged write (or a later one) in it. */
function endState(world: World, clients: Clients): string[] {
  const out: string[] = [];
  const lost: string[] = [];
  const up = world.up();
  if (up.length !== world.ids.length) out.push(`end: only ${up.map((m) => m.id).join(',')} up`);
  const first = up[0];
  if (first === undefined) return out;
  const hex = (m: typeof first): string => Buffer.from(m.kv.snapshot()).toString('hex');
  for (const m of up) if (hex(m) !== hex(first)) out.push(`end: state of ${m.id} differs from ${first.id}'s`);
  for (const a of clients.acks) {
    for (const m of up) {
      const rev = m.kv.get(a.key)?.rev ?? 0;
      if (rev < a.index) lost.push(`end: acknowledged write ${a.key}=${a.value} (index ${a.index}, on ${a.node}) missing on ${m.id} (rev ${rev})`);
    }
  }
  return [...out, ...capped(lost)];
}

/**
 * Every live node has only the world's own listeners (world.watch: one each for leaderChange,
 * failed and error): whatever the driver waited for during the run left none behind.
 */
function listenersLeft(world: World): string[] {
  const own: Record<string, number> = { leaderChange: 1, failed: 1, error: 1 };
  const out: string[] = [];
  for (const m of world.up()) {
    for (const e of m.node.eventNames()) {
      const n = m.node.listenerCount(e);
      if (n !== (own[String(e)] ?? 0)) out.push(`listeners: ${m.id} has ${n} ${String(e)} listeners at the end (the world added ${own[String(e)] ?? 0})`);
    }
  }
  return out;
}

/** The first few of a list of findings, and how many more (a broken run finds thousands). */
function capped(findings: string[], shownMax = 6): string[] {
  if (findings.length <= shownMax) return findings;
  return [...findings.slice(0, shownMax), `... and ${findings.length - shownMax} more like these`];
}
