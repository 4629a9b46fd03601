// Checker 3: per service, at most the spec's replicas are assigned (desired running, placed, on
// a node not declared down in the task's epoch), beyond an allowed surge. A start-first service
// may run a slot's new task beside its old one: `parallelism` slots at a time while an update
// (or rollback) is unsettled, and one per slot whose old task sits on a node the operator has
// drained (a drain moves every such task at once). Besides, a slot never holds more than one
// assigned task (two for start-first).
//
// The allowance covers what the orchestrator has not acted on yet: while an update is unsettled
// both specs' replicas count, and after the operator lowers replicas the old number counts until
// an orchestrator decision made on a state that includes the change takes effect.

import type { ServiceRecord, TaskRecord } from '../../../src/resources/records.ts';
import type { CommittedView } from './committed-view.ts';
import { Violation } from './violation.ts';

export interface ReplicaFacts {
  /** Nodes the operator has drained at some time in the run. */
  everDrained: ReadonlySet<string>;
  /** Replicas the service had before an operator change the orchestrator has not acted on (0: none). */
  pendingReplicas(service: string): number;
}

const unsettled = new Set(['updating', 'rolling-back', 'paused', 'rollback-paused']);

export class ReplicasChecker {
  check(view: CommittedView, facts: ReplicaFacts): void {
    const bySvc = new Map<string, TaskRecord[]>();
    for (const t of view.tasks.values()) {
      if (!isAssigned(view, t)) continue;
      bySvc.set(t.service, [...(bySvc.get(t.service) ?? []), t]);
    }
    for (const [name, tasks] of bySvc) {
      const svc = view.services.get(name);
      if (svc === undefined || svc.spec.mode !== 'replicated') continue;
      this.checkService(svc, tasks, facts);
    }
  }

  private checkService(svc: ServiceRecord, tasks: TaskRecord[], facts: ReplicaFacts): void {
    const open = unsettled.has(svc.updateStatus.state);
    const startFirst = svc.spec.update.order === 'start-first' || (open && svc.previousSpec?.update.order === 'start-first');
    const base = Math.max(svc.spec.replicas ?? 0, open ? (svc.previousSpec?.replicas ?? 0) : 0, facts.pendingReplicas(svc.name));
    const bySlot = new Map<string, TaskRecord[]>();
    for (const t of tasks) bySlot.set(String(t.slot), [...(bySlot.get(String(t.slot)) ?? []), t]);
    let drainedPairs = 0;
    for (const [slot, ts] of bySlot) {
      if (ts.length > (startFirst ? 2 : 1)) {
        throw new Violation('replicas', `service ${svc.name} slot ${slot} has ${ts.length} assigned tasks (${ts.map(describe).join(', ')}); at most ${startFirst ? 2 : 1}`);
      }
      const older = [...ts].sort((a, b) => a.createdAt - b.createdAt)[0];
      if (ts.length === 2 && older?.nodeId != null && facts.everDrained.has(older.nodeId)) drainedPairs++;
    }
    const surge = startFirst ? (open ? svc.spec.update.parallelism : 0) + drainedPairs : 0;
    if (tasks.length > base + surge) {
      throw new Violation('replicas', `service ${svc.name} has ${tasks.length} assigned tasks, beyond ${base} replicas + ${surge} surge (update ${svc.updateStatus.state}, ${svc.spec.update.order}): ${tasks.map(describe).join(', ')}`);
    }
  }
}

/** Desired running, placed, and its node not declared down since (same epoch, not down). */
function isAssigned(view: CommittedView, t: TaskRecord): boolean {
  if (t.desired !== 'running' || t.nodeId === null) return false;
  const node = view.nodes.get(t.nodeId);
  return node !== undefined && node.state !== 'down' && node.epoch === t.nodeEpoch;
}

function describe(t: TaskRecord): string {
  return `${t.id}@${t.nodeId ?? '-'}/v${t.specVersion}/${t.observed}`;
}
