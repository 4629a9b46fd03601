// Checker: the disruption budget. No voluntary action is started while it would take a service's
// unavailable slots above its budget (docs/control-plane.md, "The disruption budget").
//
// Involuntary losses (a node declared down, a container that exits) can push a service past its
// budget by themselves; that is not a violation. What is: a committed entry that stops a task
// serving a wanted slot (desired running → shutdown; a rolling update's stop-first batch, a
// drain's move, a rebalance step), leaving the slot with no task serving, when the slots
// unavailable just before the entry plus the ones it takes down exceed the budget. A service with
// a forced disruption on its record is skipped (the simulator never forces).
//
// Judged on the committed state just before and just after the entry, with the checker's own
// accounting of what serves (a task wanted running, reported running and healthy by its node in
// the task's epoch, on a ready node) and its own reading of the budget; never the code's
// predicates. Replicated services only: the simulator has no global ones.

import { decodeCommand } from '../../../fsm/index.ts';
import type { DocumentStore } from '../../../fsm/index.ts';
import { tasksCollection } from '../../../src/resources/collections.ts';
import type { ServiceRecord, TaskRecord } from '../../../src/resources/records.ts';
import { readCommitted, type CommittedView } from './committed-view.ts';
import { Violation } from './violation.ts';

export interface BudgetCounts {
  /** Slots taken down by voluntary actions (each checked). */
  voluntary: number;
  /** Of those, taken down with the budget used to the last slot. */
  atLimit: number;
}

export class BudgetChecker {
  readonly counts: BudgetCounts = { voluntary: 0, atLimit: 0 };

  /** Before the entry applies: the committed view when it stops a task wanted running, else null. */
  before(store: DocumentStore, data: Uint8Array | null): CommittedView | null {
    if (data === null) return null;
    let cmd;
    try {
      cmd = decodeCommand(data).cmd;
    } catch {
      return null;
    }
    const ops = cmd.op === 'txn' ? cmd.success : cmd.op === 'put' ? [cmd] : [];
    const stops = ops.some((op) => op.op === 'put' && op.collection === tasksCollection && (op.doc as { desired?: unknown }).desired === 'shutdown'
      && (store.get(tasksCollection, op.id)?.doc as { desired?: unknown } | undefined)?.desired === 'running');
    return stops ? readCommitted(store) : null;
  }

  /** After an entry that took effect, given the view `before` returned. */
  after(before: CommittedView, store: DocumentStore, what: string): void {
    const after = readCommitted(store);
    for (const svc of before.services.values()) {
      if (svc.spec.mode !== 'replicated' || (svc.forcedDisruptions ?? []).length > 0) continue;
      this.checkService(svc, before, after, what);
    }
  }

  private checkService(svc: ServiceRecord, before: CommittedView, after: CommittedView, what: string): void {
    const slots = Array.from({ length: svc.spec.replicas ?? 0 }, (_, i) => String(i + 1));
    const servedBefore = servedSlots(before, svc.name);
    const servedAfter = servedSlots(after, svc.name);
    const stoppedTasks = [...after.tasks.values()].filter((t) => t.service === svc.name && t.desired === 'shutdown' && before.tasks.get(t.id)?.desired === 'running');
    const stopped = new Set(stoppedTasks.map((t) => String(t.slot)));
    const takenDown = slots.filter((s) => servedBefore.has(s) && !servedAfter.has(s) && stopped.has(s));
    if (takenDown.length === 0) return;
    const unavailableBefore = slots.filter((s) => !servedBefore.has(s));
    const max = budgetOf(svc, slots.length);
    this.counts.voluntary += takenDown.length;
    if (unavailableBefore.length + takenDown.length === max) this.counts.atLimit++;
    if (unavailableBefore.length + takenDown.length > max) {
      throw new Violation('budget', `${what} took slot(s) ${takenDown.join(', ')} of ${svc.name} down while ${unavailableBefore.length} slot(s) were unavailable `
        + `(${unavailableBefore.join(', ') || 'none'}): ${unavailableBefore.length + takenDown.length} unavailable, beyond its budget of ${max} `
        + `(${JSON.stringify(svc.spec.disruption ?? null)}, parallelism ${svc.spec.update.parallelism}, ${svc.spec.update.order}); stopped: `
        + `${stoppedTasks.filter((t) => takenDown.includes(String(t.slot))).map((t) => `${t.id}@${t.nodeId ?? '-'} "${t.message ?? ''}"`).join(', ')}; the slots' tasks after: `
        + `${[...after.tasks.values()].filter((t) => t.service === svc.name && takenDown.includes(String(t.slot))).map((t) => `${t.id} ${t.desired}/${t.observed}@${t.nodeId ?? '-'}(${after.nodes.get(t.nodeId ?? '')?.state ?? '-'})`).join(', ')}`);
    }
  }
}

/** The budget in slots, read from the spec by the checker itself. */
function budgetOf(svc: ServiceRecord, slots: number): number {
  // The raw record: an unwritten budget is left out of it (record-compat.ts).
  const d = svc.spec.disruption ?? null;
  if (d === null) return svc.spec.update.parallelism;
  if (d.unit === 'slots') return d.maxUnavailable;
  const n = Math.floor((d.maxUnavailable * slots) / 100);
  return d.maxUnavailable > 0 && slots > 0 ? Math.max(1, n) : n;
}

/** The slots of the service with a task serving. */
function servedSlots(view: CommittedView, service: string): Set<string> {
  const out = new Set<string>();
  for (const t of view.tasks.values()) if (t.service === service && serving(view, t)) out.add(String(t.slot));
  return out;
}

/** Wanted running, placed on a ready node in the task's epoch, and known to run (healthy when checked). */
function serving(view: CommittedView, t: TaskRecord): boolean {
  if (t.desired !== 'running' || t.nodeId === null) return false;
  const node = view.nodes.get(t.nodeId);
  if (node === undefined || node.state !== 'ready' || node.epoch !== t.nodeEpoch) return false;
  if (t.observed === 'failed' || t.observed === 'shutdown' || t.observed === 'orphaned') return false;
  const s = view.statuses.get(t.id);
  if (s !== undefined && s.nodeId === t.nodeId && s.nodeEpoch === t.nodeEpoch) return s.state === 'running' && (s.health === null || s.health === 'healthy');
  return t.observed === 'running';
}
