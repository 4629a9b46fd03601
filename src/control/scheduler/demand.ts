// A task's demand on a node, read from its spec. Tasks of one spec share one demand object
// (cached by the spec object), so 10,000 tasks of a service cost one read of its spec.

import type { ServiceSpec } from '../spec/service-spec.ts';
import type { TaskDemand } from './types.ts';

const cache = new WeakMap<ServiceSpec, TaskDemand>();

export function demandOf(spec: ServiceSpec): TaskDemand {
  const cached = cache.get(spec);
  if (cached !== undefined) return cached;
  const demand: TaskDemand = {
    service: spec.name,
    cpuMillis: spec.resources.reservations.cpuMillis,
    memoryBytes: spec.resources.reservations.memoryBytes,
    // With hostNetwork the container binds these ports on the node itself, so they conflict the same way.
    ports: spec.ports.map((p) => `${p.published}/${p.protocol}`),
    constraints: spec.constraints,
    maxPerNode: spec.mode === 'global' ? null : spec.maxPerNode,
    strategy: spec.placement.strategy,
    spreadOver: spec.placement.spreadOver,
  };
  cache.set(spec, demand);
  return demand;
}
