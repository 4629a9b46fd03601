// What a drill asks of the cluster (drill-run.ts): the target, the fault, the tasks and services,
// each member's own view of the leader, whether it has caught up, and the probe's ack log on it.

import { z } from 'zod';
import type { DrillAction } from '../node/drill/drill-actions.ts';
import type { DrillName } from '../node/drill/drill-report.ts';
import { exitCodes } from './args.ts';
import { CliFailure, request, send } from './client.ts';
import { label, type MemberInfo, type View } from './cluster-view.ts';
import { serviceListSchema, taskPageSchema } from './control-api.ts';
import { probeCollection } from './drill-probe.ts';
import type { TaskSnapshot } from './drill-workloads.ts';

export function actionOf(drill: DrillName, seconds: number): DrillAction {
  switch (drill) {
    case 'leader-kill': return { action: 'kill' };
    case 'leader-isolate': return { action: 'isolate', seconds };
    case 'follower-pause': return { action: 'pause', seconds };
    case 'node-reboot': return { action: 'reboot', seconds };
    case 'disk-stall': return { action: 'disk-stall', seconds };
  }
}

/** leader-* and disk-stall act on the leader (a stalled leader must be replaced); the others on a follower. */
export function pickTarget(view: View, drill: DrillName, ref: string | undefined): MemberInfo {
  const voters = view.members.filter((m) => m.role === 'voter');
  if (ref !== undefined) {
    const m = view.members.find((x) => x.id === ref || x.name === ref);
    if (m === undefined) throw new CliFailure(`no member '${ref}'; the members are ${view.members.map(label).join(', ')}`, exitCodes.failed, 'not_found');
    return m;
  }
  const onLeader = drill === 'leader-kill' || drill === 'leader-isolate' || drill === 'disk-stall';
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

