// What a seed decides for a driver simulation: cluster size, the driver's snapshot and timing
// knobs, how the nemesis and the clients behave. Drawn from the seed's first PRNG stream only,
// so the rest of the run (network, disks, nodes, nemesis, clients) has streams of its own.

import { SeededPrng } from '../../src/raft/prng.ts';

export interface Scenario {
  seed: number;
  size: 3 | 5;
  /** Virtual ms of the phase with faults and clients. */
  faultsMs: number;
  tickMs: number;
  electionTimeoutTicks: number;
  /** Small, so background snapshots and compactions happen many times a run. */
  snapshotEntries: number;
  snapshotIntervalMs: number;
  logKeepEntries: number;
  proposalTimeoutMs: number;
  /** 0: no stall detection. Otherwise below the stall delay the nemesis can give a disk. */
  diskStallMs: number;
  /** Mean virtual ms between two nemesis actions. */
  nemesisEveryMs: number;
  /** Relative weights of the nemesis actions (nemesis.ts). */
  weights: Record<NemesisAction, number>;
  clients: number;
  keys: number;
  /** Upper bound of a client's pause between two operations, virtual ms. */
  thinkMs: number;
  readRate: number;
}

export type NemesisAction = 'partition' | 'isolate' | 'crash' | 'stop' | 'reset' | 'slowDisk' | 'stallDisk' | 'slowNet' | 'transfer';

const actions: NemesisAction[] = ['partition', 'isolate', 'crash', 'stop', 'reset', 'slowDisk', 'stallDisk', 'slowNet', 'transfer'];

export function drawScenario(seed: number): Scenario {
  const p = new SeededPrng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[p.nextInt(xs.length)] as T;
  const weights = Object.fromEntries(actions.map((a) => [a, p.chance(0.8) ? 1 + p.nextInt(4) : 0])) as Record<NemesisAction, number>;
  const stalls = p.chance(0.5);
  if (!stalls) weights.stallDisk = 0;
  // A quarter of the seeds are storms: a fault every few tens of ms, crashes among the likeliest.
  const storm = p.chance(0.25);
  if (storm) weights.crash += 4;
  return {
    seed,
    size: p.chance(0.6) ? 3 : 5,
    faultsMs: 1500 + p.nextInt(2500),
    tickMs: 10,
    electionTimeoutTicks: pick([5, 10, 10, 20]),
    snapshotEntries: 2 + p.nextInt(25),
    snapshotIntervalMs: pick([0, 0, 0, 50, 300]),
    logKeepEntries: p.nextInt(12),
    proposalTimeoutMs: pick([300, 1000, 2000]),
    diskStallMs: stalls ? 200 + p.nextInt(200) : 0,
    nemesisEveryMs: storm ? 15 + p.nextInt(50) : 50 + p.nextInt(300),
    weights,
    clients: 2 + p.nextInt(4),
    keys: 1 + p.nextInt(4),
    thinkMs: 1 + p.nextInt(40),
    readRate: p.nextFloat() * 0.6,
  };
}

export function describeScenario(s: Scenario): string {
  const w = Object.entries(s.weights).filter(([, v]) => v > 0).map(([k, v]) => `${k}:${v}`).join(' ');
  return `seed ${s.seed}: ${s.size} nodes, ${s.faultsMs} ms of faults, election ${s.electionTimeoutTicks}x${s.tickMs} ms, `
    + `snapshot every ${s.snapshotEntries} entries (interval ${s.snapshotIntervalMs} ms, keep ${s.logKeepEntries}), `
    + `proposal timeout ${s.proposalTimeoutMs} ms, disk stall ${s.diskStallMs || 'off'} ms, nemesis every ~${s.nemesisEveryMs} ms [${w}], `
    + `${s.clients} clients on ${s.keys} keys (think <${s.thinkMs} ms, ${Math.round(s.readRate * 100)} % reads)`;
}
