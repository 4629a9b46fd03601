// One drill against a live cluster (docs/operations.md, "Failover drills"): pick the target from
// GET /v1/cluster, start the probe (drill-probe.ts), ask the target to carry out the fault on
// itself (POST /v1/drill/actions), watch for a new leader and for the services, wait until the
// target has caught up, stop the probe, then check every acknowledged create on every node,
// compare the workloads before and after, and count the peer messages the members refused
// meanwhile. The report is kept in the store (POST /v1/drills).

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { drillReportSchema, reportProblemsMax, type DrillName, type DrillReport } from '../node/drill/drill-report.ts';
import { exitCodes } from './args.ts';
import { CliFailure, request } from './client.ts';
import { getView, label, type MemberInfo, type View } from './cluster-view.ts';
import {
  actionOf, caughtUp, checkDrillBudget, checkTolerance, listTasks, localLeader, nodeState, peerRefusals, pickTarget, probeIds, refusalsBetween, servicesBack, type PeerRefusals,
} from './drill-cluster.ts';
import { DrillProbe, longestGapMs } from './drill-probe.ts';
import { compareWorkloads, type TaskSnapshot } from './drill-workloads.ts';

const pollMs = 100;
/** The probe runs this long before the fault, and this long after recovery. */
const settleMs = 1000;
const probeWorkers = 6;
/** A killed node that still answers this long after the kill was asked for did not go down. */
const downWaitMs = 5000;
/**
 * Services count as back once every one has run its replica count this long without a dip: a
 * restarted node reports its lost containers a moment after it has caught up.
 */
const servicesSteadyMs = 5000;
/** How long the final check waits for each member to catch up before it lists the ack log. */
const checkWaitMs = 30_000;

export interface DrillOptions {
  addr: string;
  drill: DrillName;
  /** How long the fault lasts (isolate, pause, stall, reboot). */
  seconds: number;
  /** Recovery not seen this long after the fault ends: the report says so. */
  recoverTimeoutMs: number;
  /** A node name or id to use instead of the one the drill picks. */
  target?: string;
  allowOutage: boolean;
  /** Go past the services' disruption budgets (recorded on each); else wait up to budgetWaitMs for them. */
  force?: boolean;
  budgetWaitMs?: number;
  onProgress: (line: string) => void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Follows leadership, the services and the target's node record from the fault on, until stopped. */
class Monitor {
  newLeaderMs: number | null = null;
  leaderAfter: string | null = null;
  private leaderAfterTerm = 0;
  /** When (ms after the fault) the target's node record was first seen down or with a raised epoch. */
  targetDownMs: number | null = null;
  /** When the services were last seen short of their replica count (ms after the fault), and first seen back after that. */
  private servicesShortAtMs: number | null = null;
  private servicesBackAtMs: number | null = null;
  /** The last look's answer, and when (ms after the fault) the answer last changed. */
  private lastBack: boolean | undefined;
  private lastFlipAtMs = 0;
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(
    private readonly members: readonly MemberInfo[], private readonly termBefore: number, private readonly t0: number,
    private readonly target: { id: string; epochBefore: number | undefined },
  ) {
    // A loop per member and one for the workloads: a member that does not answer (stopped,
    // isolated: each look waits out its timeout) must not delay the news from the others, and
    // a dip of a few hundred ms (a task replaced) must not fall between looks.
    this.loops = [...members.map((m) => this.followLeader(m)), this.followWorkloads()];
  }

  /** ms from the fault until every service was back; null when it was short at the last look. */
  get servicesBackMs(): number | null {
    if (this.servicesShortAtMs === null) return 0;
    return this.servicesBackAtMs;
  }

  /** Every service has been at its replica count for `ms` (by the looks so far). */
  servicesSteadyFor(ms: number): boolean {
    return this.lastBack === true && performance.now() - this.t0 - this.lastFlipAtMs >= ms;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async followLeader(m: MemberInfo): Promise<void> {
    while (this.running) {
      const v = await localLeader(m);
      if (v !== undefined && v.leader !== null) this.sawLeader(v.leader, v.term);
      await sleep(pollMs);
    }
  }

  /** The latest term's leader any member named is the leader after. */
  private sawLeader(leader: string, term: number): void {
    // A leader of a later term is a new leadership, even when the same node won it back
    // (an isolated leader that steps down may be elected again once the cut heals).
    if (term > this.termBefore && this.newLeaderMs === null) this.newLeaderMs = performance.now() - this.t0;
    if (term >= this.leaderAfterTerm) {
      this.leaderAfter = leader;
      this.leaderAfterTerm = term;
    }
  }

  private async followWorkloads(): Promise<void> {
    while (this.running) {
      for (const m of this.members) {
        const back = await servicesBack(m.apiAddress).catch(() => undefined);
        if (back === undefined) continue;
        this.sawServices(back);
        if (this.targetDownMs === null) await this.lookAtTarget(m);
        break;
      }
      await sleep(pollMs);
    }
  }

  private sawServices(back: boolean): void {
    const at = performance.now() - this.t0;
    if (back !== this.lastBack) {
      this.lastBack = back;
      this.lastFlipAtMs = at;
    }
    if (!back) {
      this.servicesShortAtMs = at;
      this.servicesBackAtMs = null;
    } else if (this.servicesShortAtMs !== null && this.servicesBackAtMs === null) {
      this.servicesBackAtMs = at;
    }
  }

  /** A raised epoch counts too: the node may be ready again (with its new epoch) by the time we look. */
  private async lookAtTarget(m: MemberInfo): Promise<void> {
    const node = await nodeState(m.apiAddress, this.target.id);
    if (node === undefined) return;
    const raised = this.target.epochBefore !== undefined && node.epoch > this.target.epochBefore;
    if (node.state === 'down' || raised) this.targetDownMs = performance.now() - this.t0;
  }
}

/** Waits until `cond` holds or `deadline` (performance.now()) passes; whether it held. */
async function waitFor(cond: () => Promise<boolean>, deadline: number): Promise<boolean> {
  while (performance.now() < deadline) {
    if (await cond()) return true;
    await sleep(pollMs);
  }
  return false;
}

/** Waits for the target to go down (kill, reboot), the fault to end, and the target to catch up; ms after the fault, or null. */
async function waitRecovery(o: DrillOptions, target: MemberInfo, t0: number, problems: string[]): Promise<number | null> {
  const exits = o.drill === 'leader-kill' || o.drill === 'node-reboot';
  if (exits && !(await waitFor(async () => !(await caughtUp(target)), performance.now() + downWaitMs))) {
    problems.push(`${label(target)} still answered ${downWaitMs / 1000} s after it was asked to exit`);
  }
  const faultEnd = t0 + (o.drill === 'leader-kill' ? 0 : o.seconds * 1000);
  await sleep(Math.max(0, faultEnd - performance.now()));
  o.onProgress(`waiting for ${label(target)} to catch up (up to ${o.recoverTimeoutMs / 1000} s)`);
  const up = await waitFor(() => caughtUp(target), faultEnd + o.recoverTimeoutMs);
  if (!up) problems.push(`${label(target)} had not caught up ${o.recoverTimeoutMs / 1000} s after the fault ended: is its service manager restarting it? (shoal install, or shoal dev)`);
  return up ? performance.now() - t0 : null;
}

/** The acknowledged creates missing from any member, after each has caught up. */
async function findLost(members: readonly MemberInfo[], probe: DrillProbe, runId: string, problems: string[]): Promise<number> {
  const lost = new Set<string>();
  for (const m of members) {
    await waitFor(() => caughtUp(m), performance.now() + checkWaitMs);
    const present = await probeIds(m, `${runId}-`).catch((err: unknown) => {
      problems.push(`could not list the probe's writes on ${label(m)}: ${(err as Error).message}`);
      return undefined;
    });
    if (present === undefined) continue;
    const missing = [...probe.acked].filter((id) => !present.has(id));
    for (const id of missing) lost.add(id);
    if (missing.length > 0) problems.push(`${missing.length} acknowledged writes are missing on ${label(m)} (first: ${missing.slice(0, 3).join(', ')})`);
  }
  return lost.size;
}

async function startingView(o: DrillOptions): Promise<{ view: View; target: MemberInfo }> {
  const view = await getView(o.addr);
  if (view.leader === null) throw new CliFailure('the cluster has no leader: a drill needs a healthy cluster to start from', exitCodes.unavailable, 'no_leader');
  checkTolerance(view, o.allowOutage);
  return { view, target: pickTarget(view, o.drill, o.target) };
}

/** Each member's refusals so far, in the members' order (undefined: it did not answer). */
function scrapeRefusals(members: readonly MemberInfo[]): Promise<(PeerRefusals | undefined)[]> {
  return Promise.all(members.map((m) => peerRefusals(m)));
}

/** The refusals counted during the drill, summed over the members; each member that counted any is a problem. */
async function refusalsDuring(members: readonly MemberInfo[], before: readonly (PeerRefusals | undefined)[], problems: string[]): Promise<PeerRefusals> {
  const after = await scrapeRefusals(members);
  const sum: PeerRefusals = { wrongSender: 0, misaddressed: 0 };
  members.forEach((m, i) => {
    const a = after[i];
    if (a === undefined) {
      problems.push(`could not read the metrics of ${label(m)} (GET /metrics): its refused peer messages are not counted`);
      return;
    }
    const d = refusalsBetween(before[i], a);
    sum.wrongSender += d.wrongSender;
    sum.misaddressed += d.misaddressed;
    if (d.wrongSender + d.misaddressed > 0) {
      problems.push(`${label(m)} refused ${d.wrongSender} peer message(s) as wrong_sender and ${d.misaddressed} as misaddressed: no correct node sends those, and each was dropped (its log says 'dropped a ... message from'); a bug worth reporting`);
    }
  });
  return sum;
}

export async function runDrill(o: DrillOptions): Promise<DrillReport> {
  const { view, target } = await startingView(o);
  const forced = await checkDrillBudget(o.addr, target, { force: o.force === true, waitMs: o.budgetWaitMs ?? 0, onProgress: o.onProgress });
  for (const f of forced) o.onProgress(f);
  const problems: string[] = [];
  const tasksBefore: TaskSnapshot[] = await listTasks(o.addr).catch(() => []);
  const epochBefore = (await nodeState(o.addr, target.id))?.epoch;
  const refusalsBefore = await scrapeRefusals(view.members);
  const runId = `drill-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const probe = new DrillProbe(view.members, runId, probeWorkers);
  const probeStart = performance.now();
  probe.start();
  await sleep(settleMs);
  const action = actionOf(o.drill, o.seconds);
  o.onProgress(`${o.drill}: asking ${label(target)} to ${action.action}${'seconds' in action ? ` for ${action.seconds} s` : ''}`);
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  try {
    await request(target.apiAddress, 'POST', '/v1/drill/actions', z.unknown(), { body: action, timeoutMs: 10_000 });
  } catch (err) {
    await probe.stop();
    throw err;
  }
  const monitor = new Monitor(view.members, view.term, t0, { id: target.id, epochBefore });
  const recoveryMs = await waitRecovery(o, target, t0, problems);
  if (recoveryMs !== null) await waitFor(async () => monitor.servicesSteadyFor(servicesSteadyMs), performance.now() + o.recoverTimeoutMs);
  await sleep(settleMs);
  await probe.stop();
  const probeEnd = performance.now();
  await monitor.stop();
  // The creates of the ack log are what can be checked: the register is overwritten.
  o.onProgress(`checking that the ${probe.acked.size} acknowledged creates (of ${probe.writeEnds.length} acknowledged writes) are on every node`);
  const lost = await findLost(view.members, probe, runId, problems);
  const workloads = compareWorkloads(tasksBefore, await listTasks(o.addr).catch(() => []));
  const refused = await refusalsDuring(view.members, refusalsBefore, problems);
  problems.push(...probe.backwardsSeen, ...workloads.notes);
  if (monitor.servicesBackMs === null) problems.push('some service was still short of its replica count at the end');
  const recovered = recoveryMs !== null;
  const report: DrillReport = {
    id: runId, drill: o.drill, startedAt, target: { id: target.id, name: target.name },
    faultSeconds: o.drill === 'leader-kill' ? null : o.seconds,
    leaderBefore: view.leader, leaderAfter: monitor.leaderAfter, newLeaderMs: round(monitor.newLeaderMs),
    longestWriteGapMs: Math.round(longestGapMs(probe.writeEnds, probeStart, probeEnd)),
    writes: { attempted: probe.writesAttempted, acknowledged: probe.writeEnds.length, checked: probe.acked.size, failed: probe.writesFailed, lost },
    reads: { done: probe.reads, failed: probe.readsFailed, backwards: probe.backwards },
    workloads: { runningBefore: workloads.runningBefore, runningAfter: workloads.runningAfter, restarted: workloads.restarted, duplicated: workloads.duplicated },
    servicesBackMs: round(monitor.servicesBackMs), targetDownMs: round(monitor.targetDownMs), recovered, recoveryMs: round(recoveryMs),
    peerMessagesRefused: refused,
    problems: problems.slice(0, reportProblemsMax),
    ok: lost === 0 && probe.backwards === 0 && recovered && workloads.duplicated === 0 && monitor.servicesBackMs !== null
      && refused.wrongSender + refused.misaddressed === 0,
  };
  return drillReportSchema.parse(report);
}

const round = (v: number | null): number | null => (v === null ? null : Math.round(v));

/** Keeps the report in the store through any member that answers; whether it was kept. */
export async function keepReport(members: readonly { apiAddress: string }[], report: DrillReport): Promise<string | undefined> {
  let why = 'no member answered';
  for (const m of members) {
    try {
      await request(m.apiAddress, 'POST', '/v1/drills', z.unknown(), { body: report, headers: { 'idempotency-key': report.id }, retry: 'safe', timeoutMs: 10_000 });
      return undefined;
    } catch (err) {
      why = (err as Error).message;
    }
  }
  return why;
}
