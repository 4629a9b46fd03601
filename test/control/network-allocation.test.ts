// The leader's allocator pass (src/control/network-allocation.ts) with fixed addresses: a task of
// a service whose spec fixes its address on the network gets exactly it, the other services'
// tasks never get a fixed address (reserved even while its service has no task), and a fixed task
// that finds its address held says so in the pass's problems.

import { describe, expect, it } from 'vitest';
import { decideNetworkAllocation, reservedAddresses } from '../../src/control/network-allocation.ts';
import type { NetworkRecord } from '../../src/resources/network-resources.ts';
import type { ServiceRecord, TaskRecord } from '../../src/resources/records.ts';
import type { ControlState } from '../../src/resources/state.ts';
import { node, spec, task } from './fixtures.ts';

const record = (name: string, fields: Record<string, unknown>): ServiceRecord => ({
  name, spec: spec({ name, networks: ['back'], ...fields }), specVersion: 1, previousSpec: null, previousSpecVersion: null,
  updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: null, createdAt: 1, updatedAt: 1,
} as ServiceRecord);

function state(services: ServiceRecord[], tasks: TaskRecord[]): ControlState {
  return {
    revision: 1,
    nodes: new Map(['n1', 'n2'].map((id) => [id, { value: node(id), rev: 1 }])),
    services: new Map(services.map((s) => [s.name, { value: s, rev: 1 }])),
    tasks: new Map(tasks.map((t) => [t.id, { value: t, rev: 1 }])),
    statuses: new Map(),
  };
}

const back: NetworkRecord = { name: 'back', spec: { name: 'back', subnet: '10.20.0.0/16', internal: false, slicePrefix: 24 }, slices: {}, addresses: {}, createdAt: 0, updatedAt: 0 };
const written = (d: ReturnType<typeof decideNetworkAllocation>): NetworkRecord | undefined => {
  const c = d.plan.changes[0];
  return c?.kind === 'put' ? (c.doc as unknown as NetworkRecord) : undefined;
};

describe('the allocator pass with fixed addresses', () => {
  it('gives the fixed task its address on n2 (from n1\'s slice), and the others addresses around it', () => {
    const s = state([record('db', { networkAddresses: { back: '10.20.0.2' } }), record('web', { replicas: 2 })], [
      task('d1', { service: 'db', nodeId: 'n2', observed: 'running' }), task('w1', { service: 'web', nodeId: 'n1', observed: 'running' }), task('w2', { service: 'web', slot: 2, nodeId: 'n1', observed: 'running' }),
    ]);
    expect(reservedAddresses(s, 'back')).toEqual(['10.20.0.2']);
    const d = decideNetworkAllocation(s, { value: back, rev: 3 }, 10);
    expect(d.problems).toEqual([]);
    expect(written(d)?.addresses).toEqual({ d1: '10.20.0.2', w1: '10.20.0.3', w2: '10.20.0.4' });
  });

  it('keeps the address reserved while the fixed service has no task, and names a fixed task that waits for it', () => {
    const idle = state([record('db', { networkAddresses: { back: '10.20.0.2' } }), record('web', {})], [task('w1', { service: 'web', nodeId: 'n1', observed: 'running' })]);
    expect(written(decideNetworkAllocation(idle, { value: back, rev: 3 }, 10))?.addresses).toEqual({ w1: '10.20.0.3' });
    // w1 held .2 before db fixed it: it keeps it, and db's task waits.
    const held = { ...back, slices: { n1: 0, n2: 1 }, addresses: { w1: '10.20.0.2' } };
    const s = state([record('db', { networkAddresses: { back: '10.20.0.2' } }), record('web', {})], [
      task('w1', { service: 'web', nodeId: 'n1', observed: 'running' }), task('d1', { service: 'db', nodeId: 'n2', observed: 'pending' }),
    ]);
    const d = decideNetworkAllocation(s, { value: held, rev: 3 }, 10);
    expect(d.problems).toEqual(['network back: task d1 waits for its fixed address 10.20.0.2: another task holds it still, or its node has no slice']);
    expect(d.plan.changes).toEqual([]);
  });
});
