// The liveness phase. Every fault is healed (network whole, every machine and runtime back, no
// stalls), the operator activates every node and puts every service back on a spec that can
// converge, and then, within a bound of simulated time, every service must run its spec: its
// replicas, one task per slot at the current spec version, each with a running container on its
// node (a ready node, in the task's epoch), no other container of it anywhere, and no update
// left open. Judged from the committed state and the runtimes, never from the loops' predicates.

import { labelKeys } from '../../src/executor/labels.ts';
import { holdsPlace, readCommitted } from './checkers/committed-view.ts';
import { heldOn } from './checkers/placement.ts';
import { Violation } from './checkers/violation.ts';
import type { Nemesis } from './nemesis.ts';
import type { Operator } from './operator.ts';
import type { World } from './world.ts';

/** Updates and rollbacks that may still be open when the phase starts, per task replaced. */
const perBatchMs = 2_500;

export async function runLiveness(world: World, nemesis: Nemesis, operator: Operator): Promise<number> {
  nemesis.healAll();
  const start = world.now();
  const bound = livenessBoundMs(world);
  let operatorDone = false;
  while (world.now() - start <= bound) {
    // Every step: an update that fails after the healing (a container exit during a rollback)
    // pauses, and the operator puts the service right again.
    operatorDone = operator.heal();
    await world.runStep(false);
    if (operatorDone && unconverged(world) === null) {
      const ms = world.now() - start;
      world.log(`liveness: converged after ${ms} ms`);
      return ms;
    }
  }
  const why = unconverged(world) ?? (operatorDone ? '?' : 'the operator could not write');
  const svc = /^service (\S+):/.exec(why)?.[1];
  throw new Violation('liveness', `not converged within ${bound} ms of healing: ${why}${svc === undefined ? '' : `; ${describeService(world, svc)}`}`);
}

/** The committed record and tasks of one service, for a liveness failure. */
function describeService(world: World, name: string): string {
  const view = readCommitted(world.reference.store);
  const svc = view.services.get(name);
  if (svc === undefined) return 'no record';
  const tasks = [...view.tasks.values()].filter((t) => t.service === name).map((t) => {
    const s = view.statuses.get(t.id);
    return `${t.id} slot ${String(t.slot)} v${t.specVersion} ${t.desired}/${t.observed}${s === undefined ? '' : `(report ${s.state} e${s.nodeEpoch})`} on ${t.nodeId ?? '-'} e${String(t.nodeEpoch)} attempt ${t.attempt}${t.message === null ? "" : ` "${t.message}"`}${t.pendingReason === null ? "" : ` (pending: ${t.pendingReason})`}`;
  });
  const held = world.nodes.map((n) => {
    const h = heldOn(view, n.id);
    const on = [...view.tasks.values()].filter((t) => t.nodeId === n.id && holdsPlace(view, t)).map((t) => `${t.service}.${String(t.slot)}`);
    return `${n.id} ${h.cpuMillis}m [${on.join(' ')}]`;
  });
  return `held: ${held.join('; ')}; record: version ${svc.specVersion} (previous ${String(svc.previousSpecVersion)}) image ${svc.spec.image} replicas ${String(svc.spec.replicas)} update ${JSON.stringify(svc.updateStatus)}; tasks: ${tasks.join('; ')}`;
}

/**
 * Elections and node health settle in seconds; a rolling update takes a batch per parallelism
 * tasks, each a monitor period plus the delay and the time to start; restart backoffs cap at
 * the services' maxDelay (2 s).
 */
export function livenessBoundMs(world: World): number {
  let ms = 30_000 + world.scenario.health.downAfterMs;
  for (const s of world.scenario.services) {
    const u = s.fields.update as { parallelism: number; delay: string; monitor: string };
    const batches = Math.ceil((s.replicas + 2) / u.parallelism);
    ms += batches * (parseMs(u.monitor) + parseMs(u.delay) + perBatchMs);
  }
  return ms;
}

function parseMs(d: string): number {
  const m = /^(\d+)(ms|s)$/.exec(d);
  if (m === null) throw new Error(`the simulator's duration ${d} is not n ms or n s`);
  return Number(m[1]) * (m[2] === 's' ? 1000 : 1);
}

/** Why the cluster has not converged yet, or null when it has. */
export function unconverged(world: World): string | null {
  if (!world.consensus.leaderValid()) return 'no leader';
  const view = readCommitted(world.reference.store);
  for (const n of world.nodes) {
    const rec = view.nodes.get(n.id);
    if (rec === undefined || rec.state !== 'ready' || rec.runtime.status !== 'up') return `node ${n.id} is ${rec === undefined ? 'not registered' : `${rec.state}, runtime ${rec.runtime.status}`}`;
  }
  const running = new Map<string, string>();
  for (const n of world.nodes) {
    for (const c of n.runtime.all()) if (c.state === 'running') running.set(c.labels[labelKeys.task] ?? '', n.id);
  }
  const good = new Set<string>();
  for (const svc of view.services.values()) {
    const st = svc.updateStatus.state;
    if (st !== 'none' && st !== 'completed' && st !== 'rolled-back') return `service ${svc.name}: update ${st}`;
    const tasks = [...view.tasks.values()].filter((t) => t.service === svc.name && t.desired === 'running');
    const r = svc.spec.replicas ?? 0;
    if (tasks.length !== r) return `service ${svc.name}: ${tasks.length} tasks desired running, spec says ${r}`;
    for (const t of tasks) {
      const node = t.nodeId === null ? undefined : view.nodes.get(t.nodeId);
      if (typeof t.slot !== 'number' || t.slot < 1 || t.slot > r) return `service ${svc.name}: task ${t.id} in slot ${String(t.slot)}`;
      if (t.specVersion !== svc.specVersion) return `service ${svc.name}: task ${t.id} runs version ${t.specVersion}, not ${svc.specVersion}`;
      if (node === undefined || node.epoch !== t.nodeEpoch) return `service ${svc.name}: task ${t.id} is ${t.nodeId === null ? 'pending' : `on ${t.nodeId} in an old epoch`}`;
      if (running.get(t.id) !== t.nodeId) return `service ${svc.name}: task ${t.id} has no running container on ${t.nodeId}`;
      good.add(t.id);
    }
    if (new Set(tasks.map((t) => t.slot)).size !== r) return `service ${svc.name}: two tasks share a slot`;
  }
  for (const [task, node] of running) if (!good.has(task)) return `a container of task ${task} still runs on ${node}`;
  return null;
}
