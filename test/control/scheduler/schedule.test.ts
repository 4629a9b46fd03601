import { describe, expect, it } from 'vitest';
import { eligibleNodes, schedule, type ScheduleResult, type TaskWithSpec } from '../../../src/control/scheduler/index.ts';
import type { NodeRecord } from '../../../src/resources/records.ts';
import { GiB, node, pendingOf, placed, spec, task } from '../fixtures.ts';

/** Node id per task id, and reasons, for compact expectations. */
function where(r: ScheduleResult): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of r.placements) out[p.taskId] = p.nodeId;
  for (const u of r.unplaced) out[u.taskId] = `unplaced: ${u.reason}`;
  return out;
}

function countOn(r: ScheduleResult): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of r.placements) out[p.nodeId] = (out[p.nodeId] ?? 0) + 1;
  return out;
}

const three = [node('n1'), node('n2'), node('n3')];

describe('spread', () => {
  it('puts one replica on each node', () => {
    const r = schedule({ nodes: three, tasks: [], pending: pendingOf(spec({ replicas: 3 }), 3) });
    expect(countOn(r)).toEqual({ n1: 1, n2: 1, n3: 1 });
    expect(r.unplaced).toEqual([]);
  });

  it('fills the nodes with the fewest tasks of the service first', () => {
    const s = spec();
    const tasks = [placed(s, 'old1', 'n1'), placed(s, 'old2', 'n1'), placed(s, 'old3', 'n2')];
    const r = schedule({ nodes: three, tasks, pending: pendingOf(s, 3) });
    expect(countOn(r)).toEqual({ n2: 1, n3: 2 });
  });

  it('breaks ties by node id', () => {
    const r = schedule({ nodes: [node('b'), node('c'), node('a')], tasks: [], pending: pendingOf(spec(), 1) });
    expect(r.placements).toEqual([{ taskId: 'web.00001', nodeId: 'a' }]);
  });

  it('sends one-replica services to different nodes (the load and task count break the tie)', () => {
    const services = ['a', 'b', 'c'].map((name) => spec({ name }));
    const r = schedule({ nodes: three, tasks: [], pending: services.flatMap((s) => pendingOf(s, 1)) });
    expect(countOn(r)).toEqual({ n1: 1, n2: 1, n3: 1 });
  });

  it('spreads over a label first, then over the nodes of each value', () => {
    const nodes = [node('n1', { labels: { rack: 'a' } }), node('n2', { labels: { rack: 'a' } }), node('n3', { labels: { rack: 'b' } })];
    const s = spec({ placement: { spreadOver: 'rack' } });
    expect(countOn(schedule({ nodes, tasks: [], pending: pendingOf(s, 2) }))).toEqual({ n1: 1, n3: 1 });
    expect(countOn(schedule({ nodes, tasks: [], pending: pendingOf(s, 4) }))).toEqual({ n1: 1, n2: 1, n3: 2 });
  });

  it('counts nodes without the label as one more group', () => {
    const nodes = [node('n1', { labels: { rack: 'a' } }), node('n2'), node('n3')];
    const r = schedule({ nodes, tasks: [], pending: pendingOf(spec({ placement: { spreadOver: 'rack' } }), 4) });
    expect(countOn(r)).toEqual({ n1: 2, n2: 1, n3: 1 });
  });
});

describe('binpack', () => {
  it('fills the fullest node first, and the next when it is full', () => {
    const s = spec({ placement: { strategy: 'binpack' }, resources: { reservations: { memory: '3Gi' } } });
    const r = schedule({ nodes: three, tasks: [], pending: pendingOf(s, 5) });
    expect(countOn(r)).toEqual({ n1: 2, n2: 2, n3: 1 });
  });

  it('goes where other services already reserve the most', () => {
    const other = spec({ name: 'other', resources: { reservations: { memory: '4Gi' } } });
    const s = spec({ placement: { strategy: 'binpack' }, resources: { reservations: { memory: '1Gi' } } });
    const r = schedule({ nodes: three, tasks: [placed(other, 'o1', 'n2')], pending: pendingOf(s, 4) });
    expect(countOn(r)).toEqual({ n2: 4 });
  });
});

describe('filters in a whole call', () => {
  it('counts placements made earlier in the same call against capacity', () => {
    const nodes = [node('n1', { capacity: { cpuMillis: 4000, memoryBytes: 5 * GiB } })];
    const r = schedule({ nodes, tasks: [], pending: pendingOf(spec({ resources: { reservations: { memory: '2Gi' } } }), 3) });
    expect(where(r)).toEqual({
      'web.00001': 'n1', 'web.00002': 'n1',
      'web.00003': 'unplaced: 1 node without 2 GiB memory free (n1)',
    });
  });

  it('explains a task that fits nowhere, counting every reason', () => {
    const nodes = [
      node('n1', { labels: { role: 'db' }, capacity: { cpuMillis: 4000, memoryBytes: GiB } }),
      node('n2', { labels: { role: 'db' }, capacity: { cpuMillis: 4000, memoryBytes: GiB } }),
      node('n3', { labels: { role: 'web' } }),
      node('n4'),
      node('n5', { labels: { role: 'db' }, state: 'down' }),
      node('n6', { labels: { role: 'db' }, availability: 'drain' }),
    ];
    const s = spec({ constraints: ['node.labels.role == db'], resources: { reservations: { memory: '2Gi' } } });
    const r = schedule({ nodes, tasks: [], pending: pendingOf(s, 1) });
    expect(r.unplaced).toEqual([{
      taskId: 'web.00001',
      reason: '2 nodes without 2 GiB memory free (n1, n2); 2 nodes excluded by constraint node.labels.role == db (n3, n4); 1 node draining (n6); 1 node down (n5)',
    }]);
  });

  it.each([
    [{ state: 'suspect' }, '1 node suspect (not heard from lately) (n1)'],
    [{ availability: 'pause' }, '1 node paused (n1)'],
    [{ runtime: { status: 'unavailable', error: 'docker.sock: ENOENT' } }, '1 node with its container runtime unavailable (n1)'],
  ] as [Partial<NodeRecord>, string][])('keeps tasks off a node %j', (overrides, reason) => {
    const r = schedule({ nodes: [node('n1', overrides)], tasks: [], pending: pendingOf(spec(), 1) });
    expect(r.unplaced).toEqual([{ taskId: 'web.00001', reason }]);
  });

  it('keeps host ports apart, across services and within one', () => {
    const a = spec({ name: 'a', ports: [{ published: 80, target: 8080, mode: 'host' }] });
    const b = spec({ name: 'b', hostNetwork: true, ports: [{ published: 80, target: 80 }] });
    const r = schedule({ nodes: [node('n1'), node('n2')], tasks: [placed(b, 'b1', 'n1')], pending: pendingOf(a, 2) });
    expect(where(r)).toEqual({ 'a.00001': 'n2', 'a.00002': 'unplaced: 2 nodes with port 80/tcp in use (n1, n2)' });
  });

  it('keeps at most maxPerNode of a service on a node', () => {
    const r = schedule({ nodes: [node('n1'), node('n2')], tasks: [], pending: pendingOf(spec({ maxPerNode: 2, replicas: 5 }), 5) });
    expect(countOn(r)).toEqual({ n1: 2, n2: 2 });
    expect(r.unplaced).toEqual([{ taskId: 'web.00005', reason: '2 nodes already running 2 tasks of web (maxPerNode 2) (n1, n2)' }]);
  });

  it('counts only tasks desired running, on nodes it knows, and not the pending ones', () => {
    const s = spec({ resources: { reservations: { memory: '6Gi' } } });
    const n1 = [node('n1')];
    const stopping = placed(s, 'old', 'n1', { desired: 'shutdown' });
    const elsewhere = placed(s, 'gone', 'n9');
    const [p] = pendingOf(s, 1);
    if (p === undefined) throw new Error('no task');
    const alsoListed: TaskWithSpec = { ...p, task: { ...p.task, nodeId: 'n1' } };
    const r = schedule({ nodes: n1, tasks: [stopping, elsewhere, alsoListed], pending: [p] });
    expect(r.placements).toEqual([{ taskId: 'web.00001', nodeId: 'n1' }]);
  });

  it('gives every task of a demand that fits nowhere the same reason', () => {
    const r = schedule({ nodes: three, tasks: [], pending: pendingOf(spec({ maxPerNode: 1 }), 6) });
    expect(countOn(r)).toEqual({ n1: 1, n2: 1, n3: 1 });
    expect(r.unplaced.map((u) => u.reason)).toEqual(new Array(3).fill('3 nodes already running 1 task of web (maxPerNode 1) (n1, n2, n3)'));
  });

  it('places the largest reservations first', () => {
    const small = spec({ name: 'small', resources: { reservations: { memory: '1Gi' } } });
    const big = spec({ name: 'big', resources: { reservations: { memory: '4Gi' } } });
    const nodes = [node('n1', { capacity: { cpuMillis: 1000, memoryBytes: 4 * GiB } }), node('n2', { capacity: { cpuMillis: 1000, memoryBytes: 2 * GiB } })];
    // Smallest first would put small on n1 (least loaded after) and leave big nowhere.
    const r = schedule({ nodes, tasks: [], pending: [...pendingOf(small, 1), ...pendingOf(big, 1)] });
    expect(where(r)).toEqual({ 'big.00001': 'n1', 'small.00001': 'n2' });
  });

  it('says when the cluster has no nodes', () => {
    expect(schedule({ nodes: [], tasks: [], pending: pendingOf(spec(), 1) }).unplaced).toEqual([{ taskId: 'web.00001', reason: 'no nodes in the cluster' }]);
  });

  it('refuses input that lists a node or a task twice (a caller bug)', () => {
    expect(() => schedule({ nodes: [node('n1'), node('n1')], tasks: [], pending: [] })).toThrow(/node n1 is listed twice/);
    const p = pendingOf(spec(), 1);
    expect(() => schedule({ nodes: three, tasks: [], pending: [...p, ...p] })).toThrow(/listed twice/);
  });
});

describe('global services', () => {
  const g = spec({ name: 'agent', mode: 'global', resources: { reservations: { memory: '1Gi' } } });
  const slotTask = (nodeId: string): TaskWithSpec => ({ task: task(`agent.${nodeId}`, { service: 'agent', slot: nodeId }), spec: g });

  it('places each task on the node of its slot, and only there', () => {
    const r = schedule({ nodes: three, tasks: [], pending: three.map((n) => slotTask(n.id)) });
    expect(where(r)).toEqual({ 'agent.n1': 'n1', 'agent.n2': 'n2', 'agent.n3': 'n3' });
  });

  it('leaves a task pending when its own node cannot take it', () => {
    const nodes = [node('n1', { capacity: { cpuMillis: 1000, memoryBytes: GiB / 2 } }), node('n2', { availability: 'pause' }), node('n3')];
    const r = schedule({ nodes, tasks: [], pending: [slotTask('n1'), slotTask('n2'), slotTask('n4')] });
    expect(where(r)).toEqual({
      'agent.n1': 'unplaced: 1 node without 1 GiB memory free (n1)',
      'agent.n2': 'unplaced: 1 node paused (n2)',
      'agent.n4': 'unplaced: node n4 of this global task\'s slot is not in the cluster',
    });
  });
});

describe('eligibleNodes', () => {
  it('lists the nodes a global service has a slot on, by id', () => {
    const nodes = [
      node('n4', { labels: { role: 'edge' } }),
      node('n1', { labels: { role: 'edge' }, availability: 'pause' }),
      node('n2', { labels: { role: 'edge' }, availability: 'drain' }),
      node('n3', { labels: { role: 'edge' }, state: 'down' }),
      node('n5', { labels: { role: 'edge' }, state: 'suspect', runtime: { status: 'unavailable', error: 'x' } }),
      node('n6', { labels: { role: 'core' } }),
    ];
    const s = spec({ mode: 'global', constraints: ['node.labels.role == edge'] });
    expect(eligibleNodes(s, nodes).map((n) => n.id)).toEqual(['n1', 'n4', 'n5']);
  });
});
