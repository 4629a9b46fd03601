import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cidrContains, cidrOf, cidrsOverlap, parseAddress } from '../../src/resources/address-cidr.ts';
import {
  allocate, gatewayOf, sliceCidr, sliceCount, type AllocationTask, type NetworkAllocation,
} from '../../src/resources/address-allocator.ts';
import { slicePrefixFor } from '../../src/resources/spec/network-reader.ts';
import type { NetworkSpec } from '../../src/resources/spec/network-spec.ts';

const network = (subnet: string): NetworkSpec => ({ name: 'n', subnet, internal: false, slicePrefix: slicePrefixFor(Number(subnet.split('/')[1])) });
const empty: NetworkAllocation = { slices: {}, addresses: {} };

describe('allocate', () => {
  it('gives nodes /24 slices of a /16 in id order, and tasks the lowest free address of their node\'s slice', () => {
    const spec = network('10.20.0.0/16');
    const r = allocate(spec, empty, ['n2', 'n1'], [
      { id: 't3', nodeId: 'n2', live: true }, { id: 't1', nodeId: 'n1', live: true }, { id: 't2', nodeId: 'n1', live: true },
      { id: 't4', nodeId: null, live: true }, { id: 't5', nodeId: 'n1', live: false },
    ]);
    expect(r.allocation).toEqual({
      slices: { n1: 0, n2: 1 },
      addresses: { t1: '10.20.0.2', t2: '10.20.0.3', t3: '10.20.1.2' },
    });
    expect(gatewayOf(spec, 1)).toBe('10.20.1.1');
    expect(r.tasksWithoutAddress).toEqual([]);
  });

  it('keeps what is allocated, and reuses an address only once its task is gone', () => {
    const spec = network('10.20.0.0/16');
    const first = allocate(spec, empty, ['n1'], [{ id: 'a', nodeId: 'n1', live: true }, { id: 'b', nodeId: 'n1', live: true }]).allocation;
    const second = allocate(spec, first, ['n0', 'n1'], [{ id: 'b', nodeId: 'n1', live: true }, { id: 'c', nodeId: 'n1', live: true }, { id: 'd', nodeId: 'n0', live: true }]);
    expect(second.allocation).toEqual({ slices: { n0: 1, n1: 0 }, addresses: { b: '10.20.0.3', c: '10.20.0.2', d: '10.20.1.2' } });
  });

  it('says which node found no slice and which task no address', () => {
    const spec = network('10.30.0.0/24');
    expect(sliceCount(spec)).toBe(16);
    const nodes = Array.from({ length: 17 }, (_, i) => `n${String(i).padStart(2, '0')}`);
    const tasks: AllocationTask[] = Array.from({ length: 14 }, (_, i) => ({ id: `t${String(i).padStart(2, '0')}`, nodeId: 'n00', live: true }));
    const r = allocate(spec, empty, nodes, [...tasks, { id: 'x', nodeId: 'n16', live: true }]);
    expect(r.nodesWithoutSlice).toEqual(['n16']);
    // A /28 slice: 16 addresses, the first unused, the gateway, the last unused: 13 for tasks.
    expect(r.tasksWithoutAddress).toEqual(['t13', 'x']);
  });

  it('keeps the slice of a node that left while a live task still holds an address in it', () => {
    const spec = network('10.20.0.0/16');
    const a = allocate(spec, empty, ['n1', 'n2'], [{ id: 't', nodeId: 'n2', live: true }]).allocation;
    expect(allocate(spec, a, ['n1'], [{ id: 't', nodeId: 'n2', live: true }]).allocation.slices).toEqual({ n1: 0, n2: 1 });
    expect(allocate(spec, a, ['n1'], [{ id: 't', nodeId: 'n2', live: false }]).allocation).toEqual({ slices: { n1: 0 }, addresses: {} });
  });
});

const subnets = fc.constantFrom('10.20.0.0/16', '10.30.0.0/24', '172.16.0.0/20', '192.168.8.0/22');
const nodeIds = fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g'), { minLength: 0, maxLength: 7 });
const letters = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
// A task keeps its node for its whole life (a replacement is a new task): the node follows from the id.
const taskArb = fc.record({ i: fc.nat({ max: 39 }), placed: fc.boolean(), live: fc.boolean() })
  .map((t) => ({ id: `t${t.i}`, node: t.placed ? letters[t.i % letters.length] ?? null : null, live: t.live }));
const rounds = fc.array(fc.record({ nodes: nodeIds, tasks: fc.uniqueArray(taskArb, { selector: (t) => t.id, maxLength: 40 }) }), { minLength: 1, maxLength: 6 });

describe('allocate, properties', () => {
  it('never gives one address twice, keeps every address in its node\'s slice, slices apart, and is stable and deterministic', () => {
    fc.assert(fc.property(subnets, rounds, (subnet, steps) => {
      const spec = network(subnet);
      let current = empty;
      for (const step of steps) {
        const tasks: AllocationTask[] = step.tasks.map((t) => ({ id: t.id, nodeId: t.node === null ? null : `${t.node}`, live: t.live }));
        const r = allocate(spec, current, step.nodes, tasks);
        expect(allocate(spec, current, step.nodes, tasks)).toEqual(r);
        const { slices, addresses } = r.allocation;
        const indexes = Object.values(slices);
        expect(new Set(indexes).size).toBe(indexes.length);
        for (const i of indexes) expect(cidrsOverlap(sliceCidr(spec, i), cidrOf(subnet)) && i < sliceCount(spec)).toBe(true);
        expect(new Set(Object.values(addresses)).size).toBe(Object.values(addresses).length);
        for (const t of tasks) {
          const address = addresses[t.id];
          if (!t.live || t.nodeId === null) {
            expect(address).toBeUndefined();
            continue;
          }
          if (address === undefined) {
            expect(r.tasksWithoutAddress).toContain(t.id);
            continue;
          }
          const n = parseAddress(address) as number;
          const slice = sliceCidr(spec, slices[t.nodeId] as number);
          expect(cidrContains(slice, n)).toBe(true);
          expect(n - slice.base >= 2 && n - slice.base <= 2 ** (32 - slice.prefix) - 2).toBe(true);
          // Stable: a live task that had an address on the same node keeps it.
          const before = current.addresses[t.id];
          if (before !== undefined && current.slices[t.nodeId] === slices[t.nodeId]) expect(address).toBe(before);
        }
        for (const node of step.nodes) if (!r.nodesWithoutSlice.includes(node)) expect(slices[node]).toBeDefined();
        current = r.allocation;
      }
    }), { numRuns: 300 });
  });
});
