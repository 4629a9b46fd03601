// What a drill asks of the cluster (drill-run.ts): the target, the fault, the tasks and services,
// each member's own view of the leader, whether it has caught up, and the probe's ack log on it.

import { z } from 'zod';
import type { DrillAction } from '../node/drill/drill-actions.ts';
import type { DrillName } from '../node/drill/drill-report.ts';
import { exitCodes } from './args.ts';
import { ApiError, CliFailure, request, send } from './client.ts';
import { label, type MemberInfo, type View } from './cluster-view.ts';
import { nodeDetailSchema, serviceListSchema, taskPageSchema } from './control-api.ts';
import { metricValue } from './doctor.ts';
import { probeCollection } from './drill-probe.ts';
import type { TaskSnapshot } from './drill-workloads.ts';

export function actionOf(drill: DrillName, seconds: number): DrillAction {
  switch (drill) {
    case 'leader-kill': return { action: 'kill' };
    case 'leader-isolate': return { action: 'isolate', seconds };
    case 'leader-pause': return { action: 'pause', seconds };
    case 'follower-pause': return { action: 'pause', seconds };
    case 'node-reboot': return { action: 'reboot', seconds };
    case 'disk-stall': return { action: 'disk-stall', seconds };
  }
}

/** leader-* and disk-stall act on the leader (a stalled leader must be replaced); the others on a follower. */
export function actsOnLeader(drill: DrillName): boolean {
  return drill.startsWith('leader-') || drill === 'disk-stall';
}

export function pickTarget(view: View, drill: DrillName, ref: string | undefined): MemberInfo {
  const voters = view.members.filter((m) => m.role === 'voter');
  if (ref !== undefined) {
    const m = view.members.find((x) => x.id === ref || x.name === ref);
    if (m === undefined) throw new CliFailure(`no member '${ref}'; the members are ${view.members.map(label).join(', ')}`, exitCodes.failed, 'not_found');
    return m;
  }
  const onLeader = actsOnLeader(drill);
  const m = onLeader ? voters.find((x) => x.id === view.leader) : voters.find((x) => x.id !== view.leader);
  if (m === undefined) throw new CliFailure(`the cluster has no ${onLeader ? 'leader' : 'follower voter'} to run ${drill} on`, exitCodes.unavailable, 'no_target');
  return m;
}

/** Refuses a fault that leaves fewer than a quorum of voters, unless asked. */
export function checkTolerance(view: View, allowOutage: boolean): void {
  const voters = view.members.filter((m) => m.role === 'voter');
  const healthy = voters.filter((m) => m.health === 'healthy').length;
  const quorum = Math.floor(voters.length / 2) + 1;
  if (healthy - 1 >= quorum || allowOutage) return;
  throw new CliFailure(`${healthy} of ${voters.length} voters are healthy and a quorum is ${quorum}: taking one away would stop the cluster. Heal the others first, or pass --allow-outage to run the drill anyway`, exitCodes.failed, 'below_quorum');
}

export async function listTasks(addr: string): Promise<TaskSnapshot[]> {
  const out: TaskSnapshot[] = [];
  let after: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const res = await request(addr, 'GET', '/v1/tasks', taskPageSchema, { query: { limit: 1000, after }, retry: 'safe', timeoutMs: 10_000 });
    for (const t of res.body.items) out.push({ id: t.id, service: t.service, slot: String(t.slot), observed: t.observed });
    if (res.body.next === null) return out;
    after = res.body.next;
  }
  return out;
}

/** Whether every service runs its replica count (a global one: as many as it wants). */
export async function servicesBack(addr: string): Promise<boolean> {
  const res = await request(addr, 'GET', '/v1/services', serviceListSchema, { timeoutMs: 3000 });
  return res.body.items.every((s) => s.status.running >= s.status.desired && !s.status.updating);
}

/** A member's own view of the leader and the term: undefined while it does not answer. */
export async function localLeader(m: MemberInfo): Promise<{ leader: string | null; term: number } | undefined> {
  try {
    const res = await send(m.apiAddress, '/v1/cluster?local', { signal: AbortSignal.timeout(1000) });
    if (!res.ok) return undefined;
    return z.object({ leader: z.string().nullable(), term: z.number() }).loose().parse(await res.json());
  } catch {
    return undefined;
  }
}

export async function caughtUp(m: MemberInfo): Promise<boolean> {
  try {
    return (await send(m.apiAddress, '/readyz?sync', { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

/** Every id of the probe's ack log on `m`, read from its own store. */
export async function probeIds(m: MemberInfo, prefix: string): Promise<Set<string>> {
  const ids = new Set<string>();
  const page = z.object({ items: z.array(z.object({ id: z.string() }).loose()), next: z.string().nullable() }).loose();
  let after: string | undefined;
  for (let i = 0; i < 100_000; i++) {
    const res = await request(m.apiAddress, 'GET', `/v1/docs/${probeCollection}`, page, { query: { consistency: 'stale', prefix, limit: 1000, after }, timeoutMs: 10_000 });
    for (const d of res.body.items) ids.add(d.id);
    if (res.body.next === null) break;
    after = res.body.next;
  }
  return ids;
}


/** The target's node record: its state and epoch (raised when the leader declares it down); undefined while no answer. */
export async function nodeState(addr: string, id: string): Promise<{ state: string; epoch: number } | undefined> {
  try {
    const res = await request(addr, 'GET', `/v1/nodes/${encodeURIComponent(id)}`, nodeDetailSchema, { query: { consistency: 'stale' }, timeoutMs: 3000 });
    return { state: res.body.node.record.state, epoch: res.body.node.record.epoch };
  } catch {
    return undefined;
  }
}

export interface PeerRefusals {
  wrongSender: number;
  misaddressed: number;
}

const droppedMetric = 'shoal_peer_messages_dropped_total';

/** What `m` counted so far of the peer messages no correct node sends (its /metrics); undefined while it does not answer. */
export async function peerRefusals(m: MemberInfo): Promise<PeerRefusals | undefined> {
  try {
    const res = await send(m.apiAddress, '/metrics', { signal: AbortSignal.timeout(3000) });
    if (!res.ok) return undefined;
    const text = await res.text();
    const wrongSender = metricValue(text, droppedMetric, { reason: 'wrong_sender' });
    const misaddressed = metricValue(text, droppedMetric, { reason: 'misaddressed' });
    if (wrongSender === undefined || misaddressed === undefined) return undefined;
    return { wrongSender, misaddressed };
  } catch {
    return undefined;
  }
}

/**
 * The refusals counted between two scrapes of one member. A counter that went down belongs to
 * a process started since (a kill, a reboot): all it counted is new, and what the one before
 * counted after the first scrape is lost with it.
 */
export function refusalsBetween(before: PeerRefusals | undefined, after: PeerRefusals): PeerRefusals {
  const delta = (a: number, b: number | undefined): number => (b === undefined || a < b ? a : a - b);
  return { wrongSender: delta(after.wrongSender, before?.wrongSender), misaddressed: delta(after.misaddressed, before?.misaddressed) };
}

const budgetAnswerSchema = z.object({ allowed: z.boolean(), forced: z.boolean(), budgets: z.array(z.object({ service: z.string(), waiting: z.string().nullable(), forced: z.boolean() }).loose()) }).loose();
const budgetPollMs = 1000;

const refusedServicesSchema = z.object({ services: z.array(z.object({ service: z.string(), maxUnavailable: z.number(), moves: z.number() }).loose()) }).loose();

/** The services the target serves more slots of than their whole budget: no wait lets the drill through. */
function neverFits(details: unknown): string[] {
  const d = refusedServicesSchema.safeParse(details);
  if (!d.success) return [];
  return d.data.services.filter((x) => x.moves > x.maxUnavailable).map((x) => `the node serves ${x.moves} slots of ${x.service}, more than its whole budget (${x.maxUnavailable})`);
}

/**
 * Asks the services' disruption budgets whether the target may be taken away now (POST
 * /v1/nodes/ID/disruption): a drill takes every task on it away for a while. Waits while a budget
 * says no, up to `waitMs`, then fails with disruption_budget_exceeded (nothing was done). With
 * `force` it goes ahead, and each service it exceeds records it. A node without a node record (no
 * control plane) has nothing to check. Returns what was forced, in words.
 */
export async function checkDrillBudget(addr: string, target: { id: string; name: string }, o: { force: boolean; waitMs: number; onProgress: (line: string) => void }): Promise<string[]> {
  const deadline = Date.now() + o.waitMs;
  let said = '';
  for (;;) {
    try {
      const { body } = await request(addr, 'POST', `/v1/nodes/${encodeURIComponent(target.id)}/disruption`, budgetAnswerSchema, { body: { cause: 'drill', ...(o.force ? { force: true } : {}) }, retry: 'safe', timeoutMs: 10_000 });
      return body.budgets.filter((b) => b.forced).map((b) => `${b.service}: past its disruption budget (--force)`);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'not_found') return [];
      if (!(err instanceof ApiError && err.code === 'disruption_budget_exceeded')) throw err;
      const never = neverFits(err.body.details);
      if (never.length > 0) {
        throw new CliFailure(`${err.message}\n  nothing was done: the drill did not start. Waiting will not help: ${never.join('; ')}. Drill another node, move tasks off it (shoal node drain), raise disruption.maxUnavailable, or pass --force`, exitCodes.failed, 'disruption_budget_exceeded');
      }
      if (Date.now() >= deadline) {
        throw new CliFailure(`${err.message}\n  nothing was done: the drill did not start${o.waitMs > 0 ? ` (waited ${Math.round(o.waitMs / 1000)} s)` : ''}. Wait until those slots serve again (shoal service ps), or pass --force`, exitCodes.failed, 'disruption_budget_exceeded');
      }
      if (err.message !== said) o.onProgress(`waiting for the disruption budget before the fault on ${target.name}: ${err.message}`);
      said = err.message;
    }
    await new Promise((r) => setTimeout(r, budgetPollMs));
  }
}
