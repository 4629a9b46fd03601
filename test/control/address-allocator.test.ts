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

describe('allocate: fixed addresses (issue 39, compose ipv4_address)', () => {
  const spec = network('10.20.0.0/16');

  it('gives a fixed task exactly its address on any node, and never hands a reserved address to another task', () => {
    // 10.20.0.2 is n1's lowest free; reserved, so n1's other tasks start at .3.
    const r = allocate(spec, empty, ['n1', 'n2'], [
      { id: 'db', nodeId: 'n2', live: true, fixed: '10.20.0.2' }, { id: 'a', nodeId: 'n1', live: true }, { id: 'b', nodeId: 'n1', live: true },
    ], ['10.20.0.2', '10.20.0.4']);
    expect(r.allocation.addresses).toEqual({ db: '10.20.0.2', a: '10.20.0.3', b: '10.20.0.5' });
    expect(r.tasksWithoutAddress).toEqual([]);
    // Reserved while its service has no live task (between two tasks of it): still not handed out.
    const idle = allocate(spec, empty, ['n1'], [{ id: 'a', nodeId: 'n1', live: true }], ['10.20.0.2']);
    expect(idle.allocation.addresses).toEqual({ a: '10.20.0.3' });
  });

  it('keeps a task that held the address before it was fixed (its container runs), and the fixed task waits until it is gone', () => {
    const held = allocate(spec, empty, ['n1'], [{ id: 'old', nodeId: 'n1', live: true }]).allocation;
    expect(held.addresses).toEqual({ old: '10.20.0.2' });
    const r = allocate(spec, held, ['n1'], [{ id: 'old', nodeId: 'n1', live: true }, { id: 'db', nodeId: 'n1', live: true, fixed: '10.20.0.2' }], ['10.20.0.2']);
    expect(r.allocation.addresses).toEqual({ old: '10.20.0.2' });
    expect(r.tasksWithoutAddress).toEqual(['db']);
    const after = allocate(spec, r.allocation, ['n1'], [{ id: 'old', nodeId: 'n1', live: false }, { id: 'db', nodeId: 'n1', live: true, fixed: '10.20.0.2' }], ['10.20.0.2']);
    expect(after.allocation.addresses).toEqual({ db: '10.20.0.2' });
  });

  it('hands the address from the old task of a slot to the new one only once the old is finished (stop-first)', () => {
    const first = allocate(spec, empty, ['n1', 'n2'], [{ id: 't1', nodeId: 'n1', live: true, fixed: '10.20.9.9' }], ['10.20.9.9']).allocation;
    expect(first.addresses).toEqual({ t1: '10.20.9.9' });
    const both = allocate(spec, first, ['n1', 'n2'], [{ id: 't1', nodeId: 'n1', live: true, fixed: '10.20.9.9' }, { id: 't0', nodeId: 'n2', live: true, fixed: '10.20.9.9' }], ['10.20.9.9']);
    // t0 sorts first, but t1 holds it: it keeps it.
    expect(both.allocation.addresses).toEqual({ t1: '10.20.9.9' });
    expect(both.tasksWithoutAddress).toEqual(['t0']);
    const swapped = allocate(spec, both.allocation, ['n1', 'n2'], [{ id: 't1', nodeId: 'n1', live: false, fixed: '10.20.9.9' }, { id: 't0', nodeId: 'n2', live: true, fixed: '10.20.9.9' }], ['10.20.9.9']);
    expect(swapped.allocation.addresses).toEqual({ t0: '10.20.9.9' });
  });

  it('gives a task whose fixed address changed the new one, and none that no task may hold (a gateway, outside the subnet)', () => {
    const first = allocate(spec, empty, ['n1'], [{ id: 't', nodeId: 'n1', live: true, fixed: '10.20.0.50' }]).allocation;
    const moved = allocate(spec, first, ['n1'], [{ id: 't', nodeId: 'n1', live: true, fixed: '10.20.0.60' }]);
    expect(moved.allocation.addresses).toEqual({ t: '10.20.0.60' });
    for (const bad of ['10.20.0.1', '10.20.5.1', '10.20.0.0', '10.20.3.255', '10.21.0.5']) {
      const r = allocate(spec, empty, ['n1'], [{ id: 't', nodeId: 'n1', live: true, fixed: bad }]);
      expect(r.tasksWithoutAddress, bad).toEqual(['t']);
      expect(r.allocation.addresses, bad).toEqual({});
    }
  });

  it('never gives one address twice, with fixed and reserved addresses among the tasks (property)', () => {
    fc.assert(fc.property(
      fc.array(fc.record({ node: fc.constantFrom('n1', 'n2', 'n3', null), live: fc.boolean(), fixed: fc.option(fc.constantFrom('10.20.0.2', '10.20.0.3', '10.20.1.2', '10.20.7.7'), { nil: undefined }) }), { maxLength: 20 }),
      fc.array(fc.constantFrom('10.20.0.2', '10.20.0.4', '10.20.1.3'), { maxLength: 3 }),
      (picks, reserved) => {
        const tasks: AllocationTask[] = picks.map((p, i) => ({ id: `t${String(i).padStart(2, '0')}`, nodeId: p.node, live: p.live, ...(p.fixed === undefined ? {} : { fixed: p.fixed }) }));
        const first = allocate(spec, empty, ['n1', 'n2', 'n3'], tasks, reserved).allocation;
        const again = allocate(spec, first, ['n1', 'n2', 'n3'], tasks, reserved).allocation;
        for (const a of [first, again]) {
          const given = Object.values(a.addresses);
          expect(new Set(given).size).toBe(given.length);
          for (const t of tasks) {
            const got = a.addresses[t.id];
            if (got === undefined) continue;
            if (t.fixed !== undefined) expect(got).toBe(t.fixed);
            else expect([...reserved, ...tasks.flatMap((x) => (x.fixed === undefined ? [] : [x.fixed]))]).not.toContain(got);
          }
        }
        expect(again).toEqual(first);
      },
    ));
  });
});
