// Checker 1: no task is placed on a node that the world knows was down when the placement was
// decided, or that the operator had drained or paused, or that lacked the capacity for it; and
// a placement takes effect only while the node is, in the committed state, what the decision
// relied on: ready, active, and in the epoch the task records.
//
// "Down" is the world's own knowledge: the deciding leader had not heard from the node (it was
// crashed, off, or cut off) for downAfterMs plus a slack, from the world's contact table at the
// moment of the decision, while the leader's own loops had run that long too (a new leader
// cannot know how long a node was silent before it started, and gives every node that grace).
// The slack covers the latency of the health loop's write reaching the log and the leader's
// applied state. Availability is the operator's own record of the drains, pauses and
// activations that took effect before the placement's entry. Capacity is what the world gave
// the node, against the reservations of every task that holds a place on it once the
// placement's entry is applied.

import type { Availability, NodeState } from '../../../src/resources/records.ts';
import { holdsPlace, specOfTask, type CommittedView } from './committed-view.ts';
import { Violation } from './violation.ts';

export interface Amounts {
  cpuMillis: number;
  memoryBytes: number;
}

export interface PlacementFact {
  index: number;
  taskId: string;
  nodeId: string;
  /** The decision: when, by which node, how long its loops had run, and its silence per node (null: never heard). */
  decision: { node: string; term: number; decidedAtMs: number; loopsRunningMs: number; silenceMs: Record<string, number | null> } | null;
  /** The operator's last availability for the node that took effect before this entry. */
  availability: Availability;
  /** The task's epoch, and the node's record in the committed state once the entry applied (null: none). */
  taskEpoch: number | null;
  committed: { state: NodeState; availability: Availability; epoch: number } | null;
  capacity: Amounts;
  /** Reservations held on the node in the committed state after the entry. */
  held: Amounts;
}

export interface PlacementLimits {
  downAfterMs: number;
  slackMs: number;
}

export class PlacementChecker {
  constructor(private readonly limits: PlacementLimits) {}

  observe(p: PlacementFact): void {
    const what = `task ${p.taskId} placed on ${p.nodeId} (entry ${p.index}${p.decision === null ? '' : `, decided by ${p.decision.node} in term ${p.decision.term} at ${p.decision.decidedAtMs} ms`})`;
    if (p.availability !== 'active') throw new Violation('placement', `${what}: the operator had set the node to ${p.availability}`);
    const n = p.committed;
    if (n === null || n.state !== 'ready' || n.availability !== 'active' || n.epoch !== p.taskEpoch) {
      const is = n === null ? 'has no record' : `is ${n.state}, ${n.availability}, in epoch ${n.epoch}`;
      throw new Violation('placement', `${what} in epoch ${String(p.taskEpoch)}: the node ${is} in the committed state`);
    }
    const d = p.decision;
    if (d !== null) {
      const bound = this.limits.downAfterMs + this.limits.slackMs;
      const silence = d.silenceMs[p.nodeId] ?? null;
      if ((silence === null || silence >= bound) && d.loopsRunningMs >= bound) {
        throw new Violation('placement', `${what}: the deciding leader had not heard from the node for ${silence === null ? 'ever' : `${silence} ms`} (loops running ${d.loopsRunningMs} ms; down after ${this.limits.downAfterMs} ms + ${this.limits.slackMs} ms slack)`);
      }
    }
    if (p.held.cpuMillis > p.capacity.cpuMillis || p.held.memoryBytes > p.capacity.memoryBytes) {
      throw new Violation('placement', `${what}: the node now holds ${p.held.cpuMillis}m cpu and ${p.held.memoryBytes} bytes of memory, beyond its capacity of ${p.capacity.cpuMillis}m and ${p.capacity.memoryBytes} bytes`);
    }
  }
}

/** Reservations of the tasks that hold a place on `nodeId` in the committed state. */
export function heldOn(view: CommittedView, nodeId: string): Amounts {
  const held: Amounts = { cpuMillis: 0, memoryBytes: 0 };
  for (const t of view.tasks.values()) {
    if (t.nodeId !== nodeId || !holdsPlace(view, t)) continue;
    const svc = view.services.get(t.service);
    if (svc === undefined) continue;
    const r = specOfTask(svc, t).resources.reservations;
    held.cpuMillis += r.cpuMillis;
    held.memoryBytes += r.memoryBytes;
  }
  return held;
}
