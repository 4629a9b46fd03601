// Checker 5: exclusive services (docs/control-plane.md). By the ground truth of the runtimes, at
// every instant anything changes, no slot of an exclusive service has two running containers on
// any machines. A suspended machine's containers do not run (they are frozen with it); a
// machine whose shoal is frozen (SIGSTOP) still runs them.
//
// Beside it, the model of the fence that lives in each exclusive container (src/executor/lease-file.ts):
// it needs nothing from shoal, and kills its container once the node's lease file of the
// container's epoch has run out on the machine's boot clock, by its poll. The simulator runs it
// at every instant anything changes, fences first; on a machine waking from suspend that is at
// the resume itself (see docs/control-plane.md for the real fence's lag after a resume).

import { isExclusiveContainer, labelKeys } from '../../../src/executor/labels.ts';
import type { ContainerInfo } from '../../../src/executor/runtime.ts';
import type { SimNode } from '../sim-node.ts';
import { Violation } from './violation.ts';

/** The real fence polls every 200 ms; the simulator's every 100 ms of boot clock. */
export const simFencePollMs = 100;

export interface ExclusiveFact {
  nodeId: string;
  suspended: boolean;
  containers: readonly ContainerInfo[];
}

export class ExclusiveChecker {
  check(facts: readonly ExclusiveFact[], nowMs: number): void {
    const bySlot = new Map<string, string>();
    for (const f of facts) {
      if (f.suspended) continue;
      for (const c of f.containers) {
        if (c.state !== 'running' || !isExclusiveContainer(c.labels)) continue;
        const slot = `${c.labels[labelKeys.service] ?? '?'}.${c.labels[labelKeys.slot] ?? '?'}`;
        const here = `${c.name} on ${f.nodeId}`;
        const other = bySlot.get(slot);
        if (other !== undefined) throw new Violation('exclusive', `slot ${slot} of an exclusive service runs twice at ${nowMs} ms: ${other} and ${here}`);
        bySlot.set(slot, here);
      }
    }
  }
}

export class SimFence {
  /** Running exclusive containers of machines awake whose lease file has run out (by the poll). */
  expired(facts: readonly { node: SimNode; containers: readonly ContainerInfo[] }[]): { node: SimNode; containerId: string; name: string }[] {
    const out: { node: SimNode; containerId: string; name: string }[] = [];
    for (const { node, containers } of facts) {
      if (node.clock.suspended) continue;
      for (const c of containers) {
        if (c.state !== 'running' || !isExclusiveContainer(c.labels)) continue;
        const until = node.leases.read(Number(c.labels[labelKeys.nodeEpoch]));
        if (until === null || node.clock.bootNow() >= until + simFencePollMs) out.push({ node, containerId: c.id, name: c.name });
      }
    }
    return out;
  }
}
