// Records for control-plane tests: a ready, active node with an up runtime; a pending task;
// a service spec read through the real parser (so every default is the documented one).

import { parseSpecObjects } from '../../src/resources/spec/index.ts';
import type { NodeRecord, TaskRecord } from '../../src/resources/records.ts';
import type { ServiceSpec } from '../../src/resources/spec/index.ts';
import type { TaskWithSpec } from '../../src/control/scheduler/index.ts';

export const GiB = 1024 ** 3;
export const MiB = 1024 ** 2;

export function node(id: string, overrides: Partial<NodeRecord> = {}): NodeRecord {
  return {
    id,
    name: id,
    addresses: { api: `${id}:7000`, peer: `${id}:7001` },
    capacity: { cpuMillis: 4000, memoryBytes: 8 * GiB },
    labels: {},
    availability: 'active',
    state: 'ready',
    epoch: 0,
    runtime: { status: 'up', error: null },
    softwareVersion: '0.1.0',
    mesh: null,
    ...overrides,
  };
}

/** A normalized spec from authoring fields (name and image default). */
export function spec(fields: Record<string, unknown> = {}): ServiceSpec {
  const [s] = parseSpecObjects([{ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields }]).services;
  if (s === undefined) throw new Error('no spec');
  return s;
}

export function task(id: string, overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id,
    service: 'web',
    slot: 1,
    specVersion: 1,
    nodeId: null,
    desired: 'running',
    observed: 'pending',
    assignedTerm: null,
    nodeEpoch: null,
    containerId: null,
    exitCode: null,
    message: null,
    pendingReason: null,
    attempt: 0,
    createdAt: 1000,
    assignedAt: null,
    startedAt: null,
    finishedAt: null,
    updatedAt: 1000,
    ...overrides,
  };
}

/** `count` pending tasks of a spec, ids `${name}.${slot}`. */
export function pendingOf(s: ServiceSpec, count: number, first = 1): TaskWithSpec[] {
  return Array.from({ length: count }, (_, i) => ({ task: task(`${s.name}.${String(first + i).padStart(5, '0')}`, { service: s.name, slot: first + i }), spec: s }));
}

/** A task of `s` already placed on `nodeId`, desired running. */
export function placed(s: ServiceSpec, id: string, nodeId: string, overrides: Partial<TaskRecord> = {}): TaskWithSpec {
  return { task: task(id, { service: s.name, nodeId, observed: 'running', assignedTerm: 1, nodeEpoch: 0, ...overrides }), spec: s };
}
