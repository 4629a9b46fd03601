import { describe, expect, it } from 'vitest';
import { binpackRank, compareRanks, demandOf, emptyUsage, loadAfter, spreadGroups, spreadRank, type NodeUsage } from '../../../src/control/scheduler/index.ts';
import { GiB, node, spec } from '../fixtures.ts';

const usage = (overrides: Partial<NodeUsage> = {}): NodeUsage => ({ ...emptyUsage(), ...overrides });

describe('loadAfter', () => {
  const d = demandOf(spec({ resources: { reservations: { cpu: 1, memory: '1Gi' } } }));
  it('adds the shares of CPU and memory once the task is placed', () => {
    const n = node('n1', { capacity: { cpuMillis: 4000, memoryBytes: 4 * GiB } });
    expect(loadAfter(n, usage({ cpuMillis: 1000, memoryBytes: GiB }), d)).toBe(0.5 + 0.5);
  });
  it('treats a zero capacity as full once anything is reserved on it', () => {
    const n = node('n1', { capacity: { cpuMillis: 0, memoryBytes: 0 } });
    expect(loadAfter(n, usage(), d)).toBe(2);
    expect(loadAfter(n, usage(), demandOf(spec()))).toBe(0);
  });
});

describe('spreadRank', () => {
  const d = demandOf(spec());
  it('puts fewest of the service first, then the least loaded, then the fewest tasks', () => {
    const a = spreadRank(node('a'), usage({ perService: new Map([['web', 1]]), tasks: 1 }), d, new Map());
    const b = spreadRank(node('b'), usage({ perService: new Map([['other', 5]]), tasks: 5 }), d, new Map());
    const c = spreadRank(node('c'), usage({ perService: new Map([['other', 2]]), tasks: 2 }), d, new Map());
    expect(compareRanks(b, a)).toBeLessThan(0);
    expect(compareRanks(c, b)).toBeLessThan(0);
    expect(compareRanks(c, c)).toBe(0);
  });

  it('with spreadOver, puts the emptiest label group first', () => {
    const ds = demandOf(spec({ placement: { spreadOver: 'rack' } }));
    const nodes = [node('a', { labels: { rack: 'r1' } }), node('b', { labels: { rack: 'r1' } }), node('c', { labels: { rack: 'r2' } }), node('d')];
    const u = new Map([['a', usage({ perService: new Map([['web', 1]]) })], ['b', usage()], ['c', usage({ perService: new Map([['web', 1]]) })], ['d', usage({ perService: new Map([['web', 2]]) })]]);
    const groups = spreadGroups(nodes.map((n) => ({ node: n, usage: u.get(n.id) ?? usage() })), ds);
    expect(groups).toEqual(new Map([['=r1', 1], ['=r2', 1], ['', 2]]));
    const rank = (id: string): readonly number[] => spreadRank(nodes.find((n) => n.id === id) ?? node(id), u.get(id) ?? usage(), ds, groups);
    expect(compareRanks(rank('b'), rank('c'))).toBeLessThan(0); // same group count; b has none of the service
    expect(compareRanks(rank('c'), rank('d'))).toBeLessThan(0); // group of 1 before the unlabelled group of 2
  });
});

describe('binpackRank', () => {
  it('puts the fullest node first, then the one with most tasks', () => {
    const d = demandOf(spec({ resources: { reservations: { memory: '1Gi' } }, placement: { strategy: 'binpack' } }));
    const full = binpackRank(node('a'), usage({ memoryBytes: 6 * GiB, tasks: 1 }), d);
    const empty = binpackRank(node('b'), usage(), d);
    expect(compareRanks(full, empty)).toBeLessThan(0);
    const crowded = binpackRank(node('c'), usage({ tasks: 9 }), demandOf(spec({ placement: { strategy: 'binpack' } })));
    const quiet = binpackRank(node('d'), usage({ tasks: 1 }), demandOf(spec({ placement: { strategy: 'binpack' } })));
    expect(compareRanks(crowded, quiet)).toBeLessThan(0);
  });
});
