// Properties of schedule() over generated clusters, checked from the records themselves (not
// through the scheduler's own filter functions): no placement breaks a filter, capacity is
// never oversubscribed, the result does not depend on input order, and spread keeps per-node
// counts within one when nothing else constrains.

import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { schedule, type ScheduleInput, type TaskWithSpec } from '../../../src/control/scheduler/index.ts';
import type { NodeRecord } from '../../../src/resources/records.ts';
import type { ServiceSpec } from '../../../src/resources/spec/index.ts';
import { GiB, node, spec, task } from '../fixtures.ts';

const base = spec();
const constraintTexts = ['node.labels.role == db', 'node.labels.role != db', 'node.labels.zone in (a, b)', 'node.name != n2'];
const constraintSpecs = constraintTexts.map((t) => spec({ constraints: [t] }).constraints[0]);

const nodeArb = (id: string): fc.Arbitrary<NodeRecord> => fc.record({
  state: fc.constantFrom('ready', 'ready', 'ready', 'suspect', 'down'),
  availability: fc.constantFrom('active', 'active', 'active', 'pause', 'drain'),
  runtime: fc.constantFrom('up', 'up', 'up', 'unavailable', 'unknown'),
  role: fc.option(fc.constantFrom('db', 'web')),
  zone: fc.option(fc.constantFrom('a', 'b', 'c')),
  cpu: fc.integer({ min: 0, max: 8000 }),
  memGiB: fc.integer({ min: 0, max: 16 }),
}).map((r) => node(id, {
  state: r.state, availability: r.availability, runtime: { status: r.runtime, error: null },
  labels: { ...(r.role === null ? {} : { role: r.role }), ...(r.zone === null ? {} : { zone: r.zone }) },
  capacity: { cpuMillis: r.cpu, memoryBytes: r.memGiB * GiB },
}));

const serviceArb = (name: string): fc.Arbitrary<ServiceSpec> => fc.record({
  global: fc.boolean(),
  cpu: fc.constantFrom(0, 250, 1000, 3000),
  memGiB: fc.constantFrom(0, 1, 2, 5),
  port: fc.option(fc.constantFrom(80, 443)),
  constraints: fc.subarray(constraintSpecs, { maxLength: 2 }),
  binpack: fc.boolean(),
  spreadOver: fc.option(fc.constantFrom('zone', 'role')),
  maxPerNode: fc.option(fc.integer({ min: 1, max: 3 })),
}).map((r): ServiceSpec => ({
  ...base,
  name,
  mode: r.global ? 'global' : 'replicated',
  replicas: r.global ? null : 1,
  resources: { reservations: { cpuMillis: r.cpu, memoryBytes: r.memGiB * GiB }, limits: base.resources.limits },
  ports: r.port === null ? [] : [{ published: r.port, target: r.port, protocol: 'tcp' }],
  constraints: r.constraints.filter((c) => c !== undefined),
  placement: { strategy: r.binpack ? 'binpack' : 'spread', spreadOver: r.binpack ? null : r.spreadOver },
  maxPerNode: r.global ? null : r.maxPerNode,
}));

/** A cluster: nodes, services, tasks already placed (some shut down), and pending tasks. */
const inputArb: fc.Arbitrary<ScheduleInput> = fc.integer({ min: 0, max: 7 }).chain((nodeCount) => {
  const ids = Array.from({ length: nodeCount }, (_, i) => `n${i + 1}`);
  return fc.record({
    nodes: fc.tuple(...ids.map(nodeArb)),
    services: fc.tuple(...['s1', 's2', 's3'].map(serviceArb)),
    placedPicks: fc.array(fc.record({ service: fc.nat({ max: 2 }), node: fc.nat({ max: 9 }), running: fc.boolean() }), { maxLength: 12 }),
    pendingCounts: fc.tuple(fc.nat({ max: 12 }), fc.nat({ max: 12 }), fc.nat({ max: 12 })),
  }).map(({ nodes, services, placedPicks, pendingCounts }) => {
    const tasks: TaskWithSpec[] = placedPicks.map((p, i) => {
      const s = services[p.service] as ServiceSpec;
      const nodeId = ids.length === 0 ? 'nowhere' : (ids[p.node % ids.length] as string);
      return { task: task(`placed-${i}`, { service: s.name, slot: s.mode === 'global' ? nodeId : i + 1, nodeId, desired: p.running ? 'running' : 'shutdown' }), spec: s };
    });
    const pending: TaskWithSpec[] = services.flatMap((s, si) => {
      const count = pendingCounts[si] ?? 0;
      return Array.from({ length: count }, (_, i) => {
        const slot = s.mode === 'global' ? `n${(i % 9) + 1}` : i + 1;
        return { task: task(`${s.name}-p${i}`, { service: s.name, slot }), spec: s };
      });
    });
    return { nodes, tasks, pending };
  });
});

/** An independent reading of a constraint, from its structured form. */
function holds(c: ServiceSpec['constraints'][number], n: NodeRecord): boolean {
  const actual = c.attribute === 'label' ? n.labels[c.label ?? ''] : c.attribute === 'name' ? n.name : n.id;
  if (c.operator === '==') return actual === c.values[0];
  if (c.operator === '!=') return actual !== c.values[0];
  return actual !== undefined && c.values.includes(actual);
}

interface Load { cpu: number; mem: number; ports: string[]; perService: Map<string, number> }

function loadOf(input: ScheduleInput, extra: readonly TaskWithSpec[]): Map<string, Load> {
  const pendingIds = new Set(input.pending.map((p) => p.task.id));
  const out = new Map<string, Load>(input.nodes.map((n) => [n.id, { cpu: 0, mem: 0, ports: [], perService: new Map() }]));
  for (const t of [...input.tasks.filter((x) => !pendingIds.has(x.task.id)), ...extra]) {
    const l = out.get(t.task.nodeId ?? '');
    if (l === undefined || t.task.desired !== 'running') continue;
    l.cpu += t.spec.resources.reservations.cpuMillis;
    l.mem += t.spec.resources.reservations.memoryBytes;
    for (const p of t.spec.ports) l.ports.push(`${p.published}/${p.protocol}`);
    l.perService.set(t.spec.name, (l.perService.get(t.spec.name) ?? 0) + 1);
  }
  return out;
}

function shuffled<T>(list: readonly T[], seed: number): T[] {
  const out = [...list];
  let s = seed >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('schedule, properties', () => {
  it('accounts for every pending task exactly once', () => {
    fc.assert(fc.property(inputArb, (input) => {
      const r = schedule(input);
      const ids = [...r.placements.map((p) => p.taskId), ...r.unplaced.map((u) => u.taskId)].sort();
      expect(ids).toEqual(input.pending.map((p) => p.task.id).sort());
      for (const u of r.unplaced) expect(u.reason).not.toBe('');
    }), { numRuns: 300 });
  });

  it('never places a task where a filter forbids it', () => {
    fc.assert(fc.property(inputArb, (input) => {
      const r = schedule(input);
      const byId = new Map(input.pending.map((p) => [p.task.id, p]));
      const nodes = new Map(input.nodes.map((n) => [n.id, n]));
      for (const p of r.placements) {
        const t = byId.get(p.taskId) as TaskWithSpec;
        const n = nodes.get(p.nodeId) as NodeRecord;
        expect(n.state).toBe('ready');
        expect(n.availability).toBe('active');
        expect(n.runtime.status).toBe('up');
        for (const c of t.spec.constraints) expect(holds(c, n)).toBe(true);
        if (t.spec.mode === 'global') expect(p.nodeId).toBe(t.task.slot);
      }
    }), { numRuns: 300 });
  });

  it('never oversubscribes capacity, binds a port twice, or exceeds maxPerNode with its own placements', () => {
    fc.assert(fc.property(inputArb, (input) => {
      const r = schedule(input);
      const byId = new Map(input.pending.map((p) => [p.task.id, p]));
      const placedTasks = r.placements.map((p) => {
        const t = byId.get(p.taskId) as TaskWithSpec;
        return { ...t, task: { ...t.task, nodeId: p.nodeId } };
      });
      const before = loadOf(input, []);
      const after = loadOf(input, placedTasks);
      for (const n of input.nodes) {
        const mine = placedTasks.filter((t) => t.task.nodeId === n.id);
        const a = after.get(n.id) as Load;
        const b = before.get(n.id) as Load;
        if (mine.some((t) => t.spec.resources.reservations.cpuMillis > 0)) expect(a.cpu).toBeLessThanOrEqual(n.capacity.cpuMillis);
        if (mine.some((t) => t.spec.resources.reservations.memoryBytes > 0)) expect(a.mem).toBeLessThanOrEqual(n.capacity.memoryBytes);
        // Ports of the new placements are distinct, and distinct from what the node already bound.
        const newPorts = mine.flatMap((t) => t.spec.ports.map((p) => `${p.published}/${p.protocol}`));
        expect(new Set(newPorts).size).toBe(newPorts.length);
        for (const p of newPorts) expect(b.ports).not.toContain(p);
        for (const t of mine) {
          if (t.spec.maxPerNode !== null) expect(a.perService.get(t.spec.name) ?? 0).toBeLessThanOrEqual(Math.max(t.spec.maxPerNode, b.perService.get(t.spec.name) ?? 0));
        }
      }
    }), { numRuns: 300 });
  });

  it('gives the same result whatever the order of nodes, tasks and pending tasks', () => {
    fc.assert(fc.property(inputArb, fc.integer(), (input, seed) => {
      const again = schedule({ nodes: shuffled(input.nodes, seed), tasks: shuffled(input.tasks, seed + 1), pending: shuffled(input.pending, seed + 2) });
      expect(again).toEqual(schedule(input));
    }), { numRuns: 300 });
  });

  it('keeps per-node counts of each service within one under spread when nothing else constrains', () => {
    const arb = fc.record({
      nodeCount: fc.integer({ min: 1, max: 7 }),
      counts: fc.array(fc.nat({ max: 40 }), { minLength: 1, maxLength: 4 }),
      cpu: fc.constantFrom(0, 100),
    });
    fc.assert(fc.property(arb, ({ nodeCount, counts, cpu }) => {
      const nodes = Array.from({ length: nodeCount }, (_, i) => node(`n${i + 1}`, { capacity: { cpuMillis: 1_000_000, memoryBytes: 64 * GiB } }));
      const pending = counts.flatMap((count, si) => {
        const s: ServiceSpec = { ...base, name: `s${si}`, resources: { ...base.resources, reservations: { cpuMillis: cpu * (si + 1), memoryBytes: 0 } } };
        return Array.from({ length: count }, (_, i) => ({ task: task(`s${si}-${i}`, { service: s.name, slot: i + 1 }), spec: s }));
      });
      const r = schedule({ nodes, tasks: [], pending });
      expect(r.unplaced).toEqual([]);
      const byService = new Map<string, number[]>();
      for (const p of r.placements) {
        const service = p.taskId.split('-')[0] as string;
        const row = byService.get(service) ?? new Array<number>(nodeCount).fill(0);
        row[Number(p.nodeId.slice(1)) - 1] = (row[Number(p.nodeId.slice(1)) - 1] ?? 0) + 1;
        byService.set(service, row);
      }
      for (const row of byService.values()) expect(Math.max(...row) - Math.min(...row)).toBeLessThanOrEqual(1);
    }), { numRuns: 300 });
  });
});
