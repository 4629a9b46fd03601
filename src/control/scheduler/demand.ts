// A task's demand on a node, read from its spec. Tasks of one spec share one demand object
// (cached by the spec object, which the store hands out frozen), so 10,000 tasks of a service
// cost one read of its spec.

import { formatCpu, formatMemory } from '../../resources/spec/quantity.ts';
import { isIngressPort, type ServiceSpec } from '../../resources/spec/service-spec.ts';
import type { TaskDemand, VolumeNodes } from './types.ts';
import type { Platform } from '../../resources/records.ts';

const cache = new WeakMap<ServiceSpec, TaskDemand>();
/** Demands that know the image's platforms, by the record's list (as frozen and as shared as the spec). */
const withPlatforms = new WeakMap<readonly Platform[], WeakMap<ServiceSpec, TaskDemand>>();

export function demandOf(spec: ServiceSpec, platforms: readonly Platform[] = []): TaskDemand {
  if (platforms.length > 0) {
    const bySpec = withPlatforms.get(platforms) ?? new WeakMap<ServiceSpec, TaskDemand>();
    withPlatforms.set(platforms, bySpec);
    const known = bySpec.get(spec);
    if (known !== undefined) return known;
    const d = { ...demandOf(spec), platforms };
    bySpec.set(spec, d);
    return d;
  }
  const cached = cache.get(spec);
  if (cached !== undefined) return cached;
  const { cpuMillis, memoryBytes } = spec.resources.reservations;
  // With hostNetwork the container binds these ports on the node itself, so they conflict the same way.
  // Ingress ports bind nothing on the node (the mesh forwards to the task's overlay address), so
  // any number of tasks may share a node (docs/network.md, "Ingress").
  const ports = spec.ports.filter((p) => !isIngressPort(p)).map((p) => `${p.published}/${p.protocol}`);
  const cpu = formatCpu(cpuMillis);
  const memory = `${formatMemory(memoryBytes)} memory`;
  const demand: TaskDemand = {
    service: spec.name,
    cpuMillis,
    memoryBytes,
    ports,
    constraints: spec.constraints,
    maxPerNode: spec.mode === 'global' ? null : spec.maxPerNode,
    strategy: spec.placement.strategy,
    spreadOver: spec.placement.spreadOver,
    platforms: [],
    rejections: {
      constraints: spec.constraints.map((c) => ({ key: `constraint:${c.text}`, phrase: `excluded by constraint ${c.text}` })),
      constraintsUnknown: spec.constraints.map((c) => ({
        key: `constraint-unknown:${c.text}`,
        phrase: `whose ${c.attribute === 'role' ? 'role (voter or learner) is not known here' : 'platform is not known (it runs an older release)'}, so constraint ${c.text} cannot hold`,
      })),
      ports: ports.map((p) => ({ key: `port:${p}`, phrase: `with port ${p} in use` })),
      cpu: { key: 'resources:cpu', phrase: `without ${cpu} free` },
      memory: { key: 'resources:memory', phrase: `without ${memory} free` },
      cpuAndMemory: { key: 'resources:both', phrase: `without ${cpu} and ${memory} free` },
    },
  };
  cache.set(spec, demand);
  return demand;
}

/**
 * The demand of a task with a replicated volume: the spec's, restricted to the volume's holders
 * (issue 41). A fresh object per task (its volume is its own), so the scheduler's memory of a
 * demand that fitted nowhere does not carry over to another volume's task.
 */
export function withVolume(demand: TaskDemand, volume: VolumeNodes): TaskDemand {
  const held = volume.version === null ? 'its live volume (no complete copy yet)' : `its newest complete copy ${volume.version}`;
  const holders = volume.nodes.length === 0 ? 'no node' : volume.nodes.join(', ');
  return {
    ...demand,
    volume: {
      nodes: new Set(volume.nodes),
      rejection: { key: `volume:${volume.name}`, phrase: `without volume ${volume.name}'s data (${held} is on ${holders} only)` },
    },
  };
}
