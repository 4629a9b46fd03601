// Everything a seed decides up front: the cluster, how the modelled consensus behaves (apply lag,
// proposal delays, how a deposed leader learns of it), how often each fault and operator action
// happens, and the services. Drawn from its own PRNG stream, so the rest of a run can change
// without reshuffling every scenario.

import type { SeededPrng } from '../../src/raft/prng.ts';
import type { NodeHealthConfig } from '../../src/control/node-health.ts';
import type { LeaseConfig } from '../../src/resources/lease.ts';

export interface ConsensusKnobs {
  /** Entries a node applies per step at most (it lags the log by what it has not applied). */
  applyBatchMax: number;
  /** Per node per step: stop applying for a while (a slow disk, a long GC pause). */
  applyStall: number;
  applyStallStepsMax: number;
  /** Steps a proposal waits before it is stepped into the log (the driver's queue, the forward to the leader). */
  proposeDelayStepsMax: number;
  /** A deposed leader's queued proposal, stepped once it knows it is a follower: forwarded to the new leader (else dropped). */
  forward: number;
  /** At an election: a proposal the old leader had appended reaches the new leader's log and commits in the old term. */
  survive: number;
  /** Steps a node connected to a new leader takes to hear of its term. */
  learnDelayStepsMax: number;
  /** Steps without a leader before one is elected (election timeouts). */
  electionDelayStepsMax: number;
  /** CheckQuorum: steps after which a leader cut off from a majority steps down; null = never (it keeps believing). */
  checkQuorumSteps: number | null;
  /** A proposal not applied on its proposer by then rejects with `timeout` (its entry may still land later). */
  proposalTimeoutMs: number;
  /** Steps an undeliverable proposal is held (in a deposed leader's own log, or waiting for a leader) before it is lost. */
  holdStepsMax: number;
}

/** Probabilities per step (per node per step where it says so). */
export interface FaultRates {
  partition: number;
  partitionStepsMax: number;
  /** kill -9 of shoal: its containers keep running, and the restarted agent adopts them. */
  crash: number;
  /** The whole machine dies: its containers die too. */
  machineDeath: number;
  downStepsMax: number;
  /** At most this many nodes down at once. */
  downMax: number;
  /** A leadership change with the leader alive (a transfer, an election timeout). */
  transfer: number;
  /** Per node per step: its container runtime stops answering for a while. */
  runtimeOutage: number;
  /** Per step: a running container exits by itself. */
  containerExit: number;
  /** Per step: one link is cut (from the leader, mostly), for up to linkCutStepsMax steps; from the nemesis's node-health stream. */
  linkCut: number;
  linkCutStepsMax: number;
  /** Per step: shoal on a node stops gracefully (a goodbye) and starts again later; from the same stream. */
  gracefulStop: number;
}

export interface OperatorRates {
  /** A rolling update (a new image, good or bad). */
  update: number;
  /** Share of updates to an image that fails at once. */
  badImage: number;
  scale: number;
  /** Drain, pause or activate a node. */
  availability: number;
  /** Per step: a rebalance step of a service (a task moved off the fullest node, as the budget allows). */
  rebalance: number;
  /** Per step: drain an active node, and activate it again some steps later (drains beside updates and rebalances). */
  drain: number;
  /**
   * Per step, when a leader loop's or an agent's write is on its way to the log: the operator
   * writes, first, a document that write read (pauses a node it relies on, updates or scales a
   * service it writes), so it reaches the log between the decision's read and its write.
   */
  race: number;
}

export interface ServicePlan {
  name: string;
  replicas: number;
  /** Authoring fields beside name, image, replicas and env (resources, policies, constraints). */
  fields: Record<string, unknown>;
}

/**
 * Exclusive services (docs/control-plane.md): the lease, scaled to the simulation's seconds; each
 * machine's clock rate (within ρ of real time); and the faults that matter to a lease: shoal
 * frozen (SIGSTOP) and whole machines suspended, per step. Drawn from their own stream, after
 * everything else, so the rest of a seed's scenario is what it was before exclusive services.
 */
export interface ExclusiveKnobs {
  lease: LeaseConfig;
  /** Per node: how fast its clocks run against real time. */
  rates: number[];
  freeze: number;
  suspend: number;
  frozenStepsMax: number;
}

// 3 s at least: every node with exclusive work writes a renewal every third of the lease, and a
// node applying one entry per step (applyBatchMax 1) must still catch up with that traffic, or
// no renewal of its ever answers within the lease (seeds 1550 and 1752 with a 1.5 s lease).
export const simLease: LeaseConfig = { leaseMs: 3_000, driftRho: 0.02, killMs: 300, stopReportMs: 200 };

export interface ControlScenario {
  seed: number;
  nodes: number;
  /** Each node's capacity (the world's ground truth for the capacity checker). */
  capacity: { cpuMillis: number; memoryBytes: number };
  stepMs: number;
  safetySteps: number;
  health: NodeHealthConfig;
  consensus: ConsensusKnobs;
  faults: FaultRates;
  operator: OperatorRates;
  services: ServicePlan[];
  exclusive: ExclusiveKnobs;
  /** A scheduled job (issue 42), or none: its runs' containers exit 0 after runMs, some longer than the interval. */
  job: JobPlan | null;
  /** A replicated volume (issue 41) of the exclusive service, or none: the service then runs one task, scaled to 0 or 1 only. */
  volume: VolumePlan | null;
}

/** The exclusive service's replicated volume: its name, copies besides the live one, and interval. */
export interface VolumePlan {
  name: string;
  service: string;
  copies: number;
  everyMs: number;
}

export interface JobPlan {
  name: string;
  everyMs: number;
  runMs: number;
  concurrency: 'forbid' | 'replace';
}

const GiB = 1024 ** 3;
export const zones = ['z0', 'z1', 'z2'];

const pick = <T>(prng: SeededPrng, items: readonly T[]): T => items[prng.nextInt(items.length)] as T;

export function drawScenario(seed: number, prng: SeededPrng, safetySteps: number): ControlScenario {
  const nodes = pick(prng, [3, 3, 3, 4, 5]);
  const tight = prng.chance(0.3);
  // Tight: room for three tasks per node, and the services ask for fewer than two per node.
  // Roomy: one node holds every task of every service with a surge, since tasks are not moved
  // back to a node that returns (or is activated again), and a service constrained to some
  // nodes must still find room on them once healed.
  const capacity = tight ? { cpuMillis: 1000, memoryBytes: 1 * GiB } : { cpuMillis: 16_000, memoryBytes: 32 * GiB };
  const calm = prng.chance(0.1);
  const consensus: ConsensusKnobs = {
    applyBatchMax: pick(prng, [1, 2, 4, 8, 50]),
    applyStall: pick(prng, [0, 0.002, 0.01]),
    applyStallStepsMax: pick(prng, [3, 10, 30]),
    proposeDelayStepsMax: pick(prng, [0, 1, 2, 4]),
    forward: pick(prng, [0.3, 0.7, 1]),
    survive: pick(prng, [0, 0.3, 0.7]),
    learnDelayStepsMax: pick(prng, [0, 1, 3, 6]),
    electionDelayStepsMax: pick(prng, [1, 3, 8]),
    checkQuorumSteps: prng.chance(0.7) ? pick(prng, [3, 6, 10]) : null,
    proposalTimeoutMs: 2_000,
    holdStepsMax: pick(prng, [5, 20, 60]),
  };
  const faults: FaultRates = {
    partition: calm ? 0 : pick(prng, [0.005, 0.01, 0.03]),
    partitionStepsMax: pick(prng, [10, 30, 80]),
    crash: calm ? 0 : pick(prng, [0.003, 0.01, 0.02]),
    machineDeath: calm ? 0 : pick(prng, [0, 0.003, 0.01]),
    downStepsMax: pick(prng, [10, 40, 100]),
    downMax: Math.max(1, prng.chance(0.2) ? nodes - 1 : Math.floor((nodes - 1) / 2)),
    transfer: calm ? 0 : pick(prng, [0, 0.005, 0.02]),
    runtimeOutage: calm ? 0 : pick(prng, [0, 0.001, 0.004]),
    containerExit: calm ? 0 : pick(prng, [0, 0.01, 0.03]),
    linkCut: 0, linkCutStepsMax: 0, gracefulStop: 0,
  };
  const operator: OperatorRates = {
    update: pick(prng, [0.005, 0.01, 0.02]),
    badImage: pick(prng, [0, 0.3, 0.5]),
    scale: pick(prng, [0, 0.005, 0.01]),
    availability: pick(prng, [0, 0.005, 0.01]),
    race: 0,
    rebalance: 0,
    drain: 0,
  };
  const health: NodeHealthConfig = { suspectAfterMs: pick(prng, [1_000, 1_500]), downAfterMs: pick(prng, [3_000, 4_000]), restartGraceMs: 0 };
  const services = drawServices(prng, nodes, tight);
  const exclusive = drawExclusive(prng.fork(), nodes, services, calm);
  // From its own stream, after everything else, so the rest of a seed's scenario is as before.
  operator.race = pick(prng.fork(), [0, 0.2, 0.5, 1]);
  // Node health's evidence (issue 36), from a stream of its own for the same reason.
  const h = prng.fork();
  health.restartGraceMs = pick(h, [6_000, 10_000]);
  faults.linkCut = calm ? 0 : pick(h, [0, 0.005, 0.02]);
  faults.linkCutStepsMax = pick(h, [20, 60, 120]);
  faults.gracefulStop = calm ? 0 : pick(h, [0, 0.002, 0.005]);
  drawBudgets(prng.fork(), operator, services);
  // Jobs (issue 42), from a stream of their own: one seed in three has one.
  const j = prng.fork();
  const job: JobPlan | null = j.nextInt(3) !== 0 ? null : {
    name: 'chore', everyMs: pick(j, [2_000, 3_000]), runMs: pick(j, [300, 1_500, 4_000]), concurrency: pick(j, ['forbid', 'forbid', 'replace'] as const),
  };
  // Replicated volumes (issue 41), from a stream of their own: two exclusive seeds in three have one.
  const v = prng.fork();
  const first = services[0];
  let volume: VolumePlan | null = null;
  if (first !== undefined && first.fields.exclusive === true && v.nextInt(3) !== 0) {
    volume = { name: 'data', service: first.name, copies: pick(v, [1, 2]), everyMs: pick(v, [1_000, 2_000]) };
    first.replicas = 1;
    first.fields.mounts = [{ type: 'volume', source: volume.name, target: '/data', replicate: { copies: volume.copies, every: `${volume.everyMs / 1000}s` } }];
  }
  return { seed, nodes, capacity, stepMs: 100, safetySteps, health, consensus, faults, operator, services, exclusive, job, volume };
}

/**
 * Disruption budgets (docs/control-plane.md): each service's (unwritten: its parallelism; a number;
 * a percentage), and how often the operator rebalances and drains beside its updates. From their
 * own stream, after everything else.
 */
function drawBudgets(prng: SeededPrng, operator: OperatorRates, services: ServicePlan[]): void {
  for (const s of services) {
    const d = pick(prng, [null, null, 1, 2, '50%', '34%', '100%']);
    if (d !== null) s.fields.disruption = { maxUnavailable: d };
  }
  operator.rebalance = pick(prng, [0, 0.005, 0.01, 0.03]);
  operator.drain = pick(prng, [0, 0.003, 0.01]);
}

function drawExclusive(prng: SeededPrng, nodes: number, services: ServicePlan[], calm: boolean): ExclusiveKnobs {
  // Half the seeds make their first service exclusive (always stop-first).
  const first = services[0];
  if (first !== undefined && prng.chance(0.5)) {
    first.fields.exclusive = true;
    first.fields.update = { ...(first.fields.update as Record<string, unknown>), order: 'stop-first' };
  }
  const rho = simLease.driftRho;
  const rates = Array.from({ length: nodes }, () => 1 + (prng.nextFloat() * 2 - 1) * rho * 0.9);
  // A lease longer than the down timeout makes the leader's wait, not the node's silence, what holds the replacement back.
  const lease = { ...simLease, leaseMs: pick(prng, [simLease.leaseMs, 6_000]) };
  return {
    lease, rates,
    freeze: calm ? 0 : pick(prng, [0, 0.003, 0.01]),
    suspend: calm ? 0 : pick(prng, [0, 0.003, 0.01]),
    frozenStepsMax: pick(prng, [10, 40, 100]),
  };
}

function drawServices(prng: SeededPrng, nodes: number, tight: boolean): ServicePlan[] {
  const count = 1 + prng.nextInt(tight ? 2 : 4);
  const out: ServicePlan[] = [];
  // Tight: every service reserves 300m of the 1000m a node has (three tasks fit), and together
  // they ask for fewer than two tasks per node with a surge of one each, so the cluster can
  // always hold them once healed.
  let budget = tight ? nodes * 2 - 1 : Number.POSITIVE_INFINITY;
  for (let i = 0; i < count && budget > 0; i++) {
    const replicas = Math.min(budget, 1 + prng.nextInt(tight ? 3 : 5));
    budget -= replicas;
    const startFirst = prng.chance(0.4);
    const fields: Record<string, unknown> = {
      command: ['serve'],
      resources: { reservations: tight ? { cpu: '300m', memory: `${200}Mi` } : { cpu: `${pick(prng, [100, 250, 500])}m`, memory: `${pick(prng, [64, 256, 512])}Mi` } },
      restart: { condition: pick(prng, ['always', 'on-failure']), delay: pick(prng, ['100ms', '300ms']), maxDelay: pick(prng, ['1s', '2s']) },
      update: {
        parallelism: tight ? 1 : 1 + prng.nextInt(2),
        delay: pick(prng, ['0s', '200ms', '500ms']),
        monitor: pick(prng, ['500ms', '1s', '2s']),
        failureAction: pick(prng, ['pause', 'rollback']),
        order: startFirst ? 'start-first' : 'stop-first',
      },
      stopGracePeriod: pick(prng, ['200ms', '1s']),
    };
    if (prng.chance(0.3)) fields.healthCheck = { command: ['check'], interval: pick(prng, ['100ms', '300ms']), timeout: '100ms', retries: 1 };
    if (!tight && prng.chance(0.3)) fields.placement = { strategy: 'binpack' };
    else if (prng.chance(0.3)) fields.placement = { strategy: 'spread', spreadOver: 'zone' };
    if (!tight && prng.chance(0.25)) fields.constraints = [`node.labels.zone != ${pick(prng, zones)}`];
    if (!tight && prng.chance(0.25)) fields.maxPerNode = Math.max(2, Math.ceil(replicas / Math.max(1, nodes - 2)) + 1);
    out.push({ name: `svc${String.fromCharCode(97 + i)}`, replicas, fields });
  }
  return out;
}
