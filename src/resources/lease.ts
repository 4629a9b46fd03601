// The lease an exclusive service's tasks run under (docs/control-plane.md, "Exclusive services").
//
// One lease per node, covering the node's exclusive tasks of one epoch. Only the node's agent
// renews it, and only by its own committed write (a `shoal.leases/<node id>` document put in a
// transaction that compares the node's epoch): the agent notes its send time s on its boot clock
// before proposing, and once the write has committed it holds the lease until s + leaseMs. At
// expiry without a renewal it SIGKILLs its exclusive containers, and the fence inside each
// container kills it too when the agent cannot (frozen, killed).
//
// The leader replaces an exclusive task whose fate it does not know (its node was declared
// down or left) only once leaseMs + margin has passed, on its own monotonic clock, since the
// later of (a) its store applying the last renewal of that node and epoch (as leader or before,
// as a follower: src/control/renewal-log.ts) and (b) the moment it began watching renewals (its
// control plane's start, or the last snapshot it restored): every renewal was sent before any
// node applied it, so the agent's expiry comes first in real time whatever the two clocks'
// rates, within the margin:
//
//   margin = 2ρ·lease + kill time + stop-report allowance
//
// ρ bounds how far either clock's rate strays from real time (crystal drift, NTP slewing, both
// at most 500 ppm; 1 % is generous); the kill time covers the agent's SIGKILL (and the fence's
// poll when the agent is frozen); the stop-report allowance covers a stop in flight whose report
// is not yet applied. Pure: no clock, no I/O.
//
// The four constants are node config keys (`exclusive.*`, src/server/config.ts), checked there by
// leaseConfigProblem and the bounds below, so a setting cannot break the argument.

import { z } from 'zod';

export interface LeaseConfig {
  /** How long one renewal holds, from the agent's send time (default 8 s). */
  leaseMs: number;
  /** Bound on any clock's rate error, as a fraction (default 0.01: 1 %). */
  driftRho: number;
  /** From expiry until the task's processes are dead: the agent's SIGKILL, or the fence's poll plus its kill (default 2 s). */
  killMs: number;
  /** Allowance for a stop under way whose report has not been applied (default 1 s). */
  stopReportMs: number;
}

/**
 * The defaults (docs/control-plane.md, "Node health" and "Exclusive services", has the
 * measurements): a lease of 8 s outlasts a graceful restart of shoal (4-5 s from its last renewal,
 * which a graceful stop sends as it stops, to the new process's first; an upgrade's step takes
 * 6-7 s) and keeps a lost node's exclusive task away at most lease + margin = 11.2 s after its
 * last renewal, within issue 36's 12 s.
 */
export const leaseDefaults: LeaseConfig = { leaseMs: 8_000, driftRho: 0.01, killMs: 2_000, stopReportMs: 1_000 };

/**
 * Bounds of the settings. A lease under 3 s renews more than once a second through the log; over
 * 10 minutes an exclusive service waits that long to come back. ρ below 500 ppm is less than NTP
 * may slew a clock; above 10 % the clock is broken, not drifting. The kill time covers the
 * agent's expiry check (200 ms), Docker's kill or, after 1 s, the kill by pid (agent.ts); and the
 * fence's poll (200 ms, lease-file.ts): 1.5 s leaves room over the slower of the two.
 */
export const leaseMsMin = 3_000;
export const leaseMsMax = 600_000;
export const driftRhoMin = 0.0005;
export const driftRhoMax = 0.1;
export const killMsMin = 1_500;
export const killMsMax = 60_000;
export const stopReportMsMax = 60_000;

/**
 * Why `c` breaks the safety argument, or undefined when it holds. In real time the agent has
 * killed by lease·(1+ρ) + kill after its send time, and the leader waits at least
 * (lease + margin)·(1−ρ) after it; the first must come before the second. With margin =
 * 2ρ·lease + kill + stop-report that reduces to stop-report·(1−ρ) ≥ ρ·(2ρ·lease + kill): the
 * stop-report allowance also absorbs the second-order term, so it may not be (near) zero.
 */
export function leaseConfigProblem(c: LeaseConfig): string | undefined {
  const agentDoneMs = c.leaseMs * (1 + c.driftRho) + c.killMs;
  const leaderWaitsMs = replaceAfterMs(c) * (1 - c.driftRho);
  if (leaderWaitsMs >= agentDoneMs) return undefined;
  const stopReportMin = Math.ceil((c.driftRho * (2 * c.driftRho * c.leaseMs + c.killMs)) / (1 - c.driftRho));
  const pct = Number((c.driftRho * 100).toFixed(3));
  return `stopReportMs must be at least ${stopReportMin} with leaseMs ${c.leaseMs}, driftRho ${c.driftRho} and killMs ${c.killMs}: the leader's wait on a clock ${pct} % slow (${Math.floor(leaderWaitsMs)} ms) must outlast the agent's lease on a clock ${pct} % fast plus the kill (${Math.ceil(agentDoneMs)} ms)`;
}

/** The agent renews this often: a third of the lease, so two renewals can fail before it runs out. */
export function renewIntervalMs(c: LeaseConfig): number {
  return Math.max(1, Math.floor(c.leaseMs / 3));
}

/** margin = 2ρ·lease + kill time + stop-report allowance, in whole milliseconds (rounded up). */
export function leaseMarginMs(c: LeaseConfig): number {
  return Math.ceil(2 * c.driftRho * c.leaseMs) + c.killMs + c.stopReportMs;
}

/** How long the leader waits, from the later of the last renewal it applied and its loops' start, before it replaces an exclusive task. */
export function replaceAfterMs(c: LeaseConfig): number {
  return c.leaseMs + leaseMarginMs(c);
}

/**
 * Ms until an exclusive task of a lost node is surely dead (0 once passed): lease + margin after
 * the later of the last renewal this node's store applied and when it began watching. The lease is the
 * longest of this leader's setting and what the node's agent claimed (`agentLeaseMs`, from its
 * renewals and its record in the store: an agent may be configured with a longer lease).
 */
export function exclusiveClearInMs(c: LeaseConfig, o: { nowMs: number; watchingSinceMs: number; renewedAtMs?: number; agentLeaseMs: number }): number {
  const leaseMs = Math.max(c.leaseMs, o.agentLeaseMs);
  const from = Math.max(o.watchingSinceMs, o.renewedAtMs ?? o.watchingSinceMs);
  return Math.max(0, from + replaceAfterMs({ ...c, leaseMs }) - o.nowMs);
}

/** A node's lease document (`shoal.leases/<node id>`), written only by that node's agent. */
export interface LeaseRecord {
  nodeId: string;
  /** The node's epoch the renewal was made in (the write compares it). */
  epoch: number;
  /** One more at each renewal, so each renewal is a change the leader sees. */
  seq: number;
  /** The lease the agent holds from this renewal; the leader waits at least this. */
  leaseMs: number;
}

export const leaseRecordSchema = z.object({
  nodeId: z.string().min(1),
  epoch: z.number().int().min(0),
  seq: z.number().int().min(0),
  leaseMs: z.number().int().min(1),
}).strict();
