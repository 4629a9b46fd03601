// Builds control states by hand for the tests of the leader's pure loops, and applies a plan to
// one as the store would (checking every expected revision), so a test can run several passes.

import type { Change, Plan } from '../../src/resources/changes.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import type { NodeRecord, ServiceRecord, TaskRecord, TaskStatus } from '../../src/resources/records.ts';
import { newService } from '../../src/control/apply.ts';
import { parseSpecs } from '../../src/resources/spec/index.ts';
import type { ServiceSpec } from '../../src/resources/spec/service-spec.ts';
import { volumesCollection, type VolumeRecord } from '../../src/resources/volumes.ts';
import type { ControlState, Versioned } from '../../src/resources/state.ts';

export class StateBuilder {
  rev = 1;
  readonly nodes = new Map<string, Versioned<NodeRecord>>();
  readonly services = new Map<string, Versioned<ServiceRecord>>();
  readonly tasks = new Map<string, Versioned<TaskRecord>>();
  readonly statuses = new Map<string, Versioned<TaskStatus>>();
  /** Replicated volumes (issue 41). */
  readonly volumes = new Map<string, Versioned<VolumeRecord>>();

  node(id: string, over: Partial<NodeRecord> = {}): this {
    this.nodes.set(id, this.v({
      id, name: id.replace('node', 'n'), addresses: { api: `${id}:1`, peer: `${id}:2` }, capacity: { cpuMillis: 4000, memoryBytes: 8 * 2 ** 30 },
      labels: {}, availability: 'active', state: 'ready', epoch: 0, runtime: { status: 'up', error: null }, softwareVersion: 't', mesh: null, ...over,
    }));
    return this;
  }

  service(yaml: string, over: Partial<ServiceRecord> = {}): this {
    const spec = specOf(yaml);
    this.services.set(spec.name, this.v({ ...newService(spec, 0), ...over }));
    return this;
  }

  task(t: Partial<TaskRecord> & { id: string; service: string; slot: number | string }): this {
    this.tasks.set(t.id, this.v({
      specVersion: 1, nodeId: null, desired: 'running', observed: 'pending', assignedTerm: null, nodeEpoch: null, containerId: null,
      exitCode: null, message: null, pendingReason: null, attempt: 0, createdAt: 0, assignedAt: null, startedAt: null, finishedAt: null, updatedAt: 0, ...t,
    }));
    return this;
  }

  /** A task placed on `node` and reported in `state` by its agent. */
  placed(id: string, service: string, slot: number | string, node: string, state: TaskStatus['state'], over: Partial<TaskRecord> = {}, status: Partial<TaskStatus> = {}): this {
    const epoch = this.nodes.get(node)?.value.epoch ?? 0;
    this.task({ id, service, slot, nodeId: node, nodeEpoch: epoch, assignedTerm: 1, observed: 'assigned', assignedAt: 0, ...over });
    this.statuses.set(id, this.v({ taskId: id, nodeId: node, nodeEpoch: epoch, state, containerId: `c-${id}`, exitCode: state === 'failed' ? 1 : null, health: null, message: null, startedAt: 1, finishedAt: null, ...status }));
    return this;
  }

  /** A replicated volume's record (issue 41). */
  volume(rec: VolumeRecord): this {
    this.volumes.set(rec.name, this.v(rec));
    return this;
  }

  build(): ControlState {
    return {
      revision: this.rev, nodes: new Map(this.nodes), services: new Map(this.services), tasks: new Map(this.tasks), statuses: new Map(this.statuses),
      ...(this.volumes.size > 0 ? { volumes: new Map(this.volumes) } : {}),
    };
  }

  /** Applies a plan as the store would; throws if an expected revision does not hold. */
  apply(plan: Plan): this {
    for (const c of plan.changes) this.applyChange(c);
    return this;
  }

  private applyChange(c: Change): void {
    const map = this.mapOf(c.collection);
    const cur = map.get(c.id);
    if ('rev' in c.expect && cur?.rev !== c.expect.rev) throw new Error(`${c.collection}/${c.id}: expected rev ${c.expect.rev}, is ${cur?.rev ?? 'absent'}`);
    if ('absent' in c.expect && cur !== undefined) throw new Error(`${c.collection}/${c.id} exists`);
    if (c.kind === 'delete') map.delete(c.id);
    else map.set(c.id, this.v(structuredClone(c.doc) as never));
  }

  private mapOf(collection: string): Map<string, Versioned<unknown>> {
    switch (collection) {
      case nodesCollection: return this.nodes as Map<string, Versioned<unknown>>;
      case servicesCollection: return this.services as Map<string, Versioned<unknown>>;
      case tasksCollection: return this.tasks as Map<string, Versioned<unknown>>;
      case taskStatusCollection: return this.statuses as Map<string, Versioned<unknown>>;
      case volumesCollection: return this.volumes as Map<string, Versioned<unknown>>;
      default: throw new Error(`unknown collection ${collection}`);
    }
  }

  private v<T>(value: T): Versioned<T> {
    return { value, rev: ++this.rev };
  }
}

export function specOf(yaml: string): ServiceSpec {
  const parsed = parseSpecs(yaml);
  const spec = parsed.services[0];
  if (spec === undefined) throw new Error('no service in the yaml');
  return spec;
}

export const serviceYaml = (name: string, extra = ''): string => `apiVersion: shoal/v1
kind: Service
name: ${name}
image: busybox:local
command: ["sleep", "3600"]
replicas: 3
${extra}`;

/** A deterministic id source for tests. */
export function ids(prefix = 't'): () => string {
  let n = 0;
  return () => `${prefix}${++n}`;
}
