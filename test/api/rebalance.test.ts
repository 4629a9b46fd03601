// One rebalance step as a pure function of the control state (src/api/rebalance.ts): which task
// moves and toward where, when nothing moves (balanced, binpack, global, the scheduler's filters),
// and that a settling service is left alone.

import { describe, expect, it } from 'vitest';
import { newService } from '../../src/control/apply.ts';
import type { NodeRecord, ServiceRecord, TaskRecord } from '../../src/resources/records.ts';
import type { ControlState, Versioned } from '../../src/resources/state.ts';
import { planRebalance, rebalancePlan } from '../../src/api/rebalance.ts';
import { node, spec, task } from '../control/fixtures.ts';

const v = <T>(value: T, rev = 1): Versioned<T> => ({ value, rev });

function stateOf(nodes: NodeRecord[], svc: ServiceRecord, tasks: TaskRecord[]): ControlState {
  return {
    revision: 100,
    nodes: new Map(nodes.map((n) => [n.id, v(n)])),
    services: new Map([[svc.name, v(svc)]]),
    tasks: new Map(tasks.map((t, i) => [t.id, v(t, 10 + i)])),
    statuses: new Map(),
  };
}

/** Running tasks of `web`, `counts[i]` of them on node n{i+1}, slots numbered in order. */
function running(counts: number[], overrides: Partial<TaskRecord> = {}): TaskRecord[] {
  const out: TaskRecord[] = [];
  counts.forEach((n, i) => {
    for (let k = 0; k < n; k++) {
      const slot = out.length + 1;
      out.push(task(`t${slot}`, { slot, nodeId: `n${i + 1}`, observed: 'running', assignedTerm: 1, nodeEpoch: 0, startedAt: 1000, ...overrides }));
    }
  });
  return out;
}

const three = [node('n1'), node('n2'), node('n3')];
const web = (fields: Record<string, unknown> = {}): ServiceRecord => newService(spec({ replicas: 3, ...fields }), 1000);

describe('a rebalance step', () => {
  it('moves a task off the fullest node toward the emptiest', () => {
    const step = planRebalance(stateOf(three, web(), running([3, 0, 0])), web());
    expect(step.state).toBe('moved');
    expect(step.move?.from.id).toBe('n1');
    expect(step.move?.to.id).toBe('n2');
    expect(step.move?.task.value.id).toBe('t1');
    expect(step.counts.map((c) => [c.nodeName, c.tasks])).toEqual([['n1', 3], ['n2', 0], ['n3', 0]]);
  });

  it('moves only when the target carries fewer than the source would after the move', () => {
    expect(planRebalance(stateOf(three, web(), running([2, 1, 0])), web()).move?.to.id).toBe('n3');
    expect(planRebalance(stateOf(three, web(), running([1, 1, 1])), web()).state).toBe('balanced');
    expect(planRebalance(stateOf(three, web({ replicas: 5 }), running([2, 2, 1])), web({ replicas: 5 })).state).toBe('balanced');
  });

  it('leaves a binpack service and a global service as they are', () => {
    const packed = web({ placement: { strategy: 'binpack' } });
    expect(planRebalance(stateOf(three, packed, running([3, 0, 0])), packed).state).toBe('balanced');
    const global = newService(spec({ mode: 'global' }), 1000);
    expect(planRebalance(stateOf(three, global, running([1, 1, 1])), global)).toMatchObject({ state: 'balanced', reason: expect.stringContaining('global') });
  });

  it('never moves toward a node the scheduler would refuse (paused, draining, down, constrained)', () => {
    const nodes = [node('n1'), node('n2', { availability: 'pause' }), node('n3', { state: 'down' })];
    expect(planRebalance(stateOf(nodes, web(), running([3, 0, 0])), web()).state).toBe('balanced');
    const constrained = web({ constraints: ['node.name != n2'] });
    expect(planRebalance(stateOf(three, constrained, running([3, 0, 0])), constrained).move?.to.id).toBe('n3');
  });

  it('does nothing while the service settles: an update, a task starting or stopping, one being placed', () => {
    const updating = { ...web(), updateStatus: { state: 'updating' as const, startedAt: 1, completedAt: null, message: null } };
    expect(planRebalance(stateOf(three, updating, running([3, 0, 0])), updating)).toMatchObject({ state: 'settling', move: null });
    const starting = [...running([2, 0, 0]), task('t9', { slot: 3, nodeId: 'n1', observed: 'starting', assignedTerm: 1, nodeEpoch: 0 })];
    expect(planRebalance(stateOf(three, web(), starting), web())).toMatchObject({ state: 'settling', reason: expect.stringContaining('starting') });
    const stopping = [...running([2, 0, 0]), task('t9', { slot: 3, nodeId: 'n1', desired: 'shutdown', observed: 'running', assignedTerm: 1, nodeEpoch: 0 })];
    expect(planRebalance(stateOf(three, web(), stopping), web()).state).toBe('settling');
    const placing = [...running([2, 0, 0]), task('t9', { slot: 3 })];
    expect(planRebalance(stateOf(three, web(), placing), web()).state).toBe('settling');
    // A task that waits for a node with the scheduler's reason does not hold the others back (a
    // budget of 2 leaves room for a move beside the slot it leaves unavailable).
    const waiting = [...running([3, 0, 0]), task('t9', { slot: 4, pendingReason: '3 nodes without 2 GiB memory free' })];
    const roomy = web({ replicas: 4, disruption: { maxUnavailable: 2 } });
    expect(planRebalance(stateOf(three, roomy, waiting), roomy).state).toBe('moved');
  });

  it('waits while the disruption budget allows no slot down, naming it; moves past it when forced, recording it', () => {
    const waiting = [...running([3, 0, 0]), task('t9', { slot: 4, pendingReason: '3 nodes without 2 GiB memory free' })];
    const four = web({ replicas: 4 });
    const state = stateOf(three, four, waiting);
    expect(planRebalance(state, four)).toMatchObject({
      state: 'waiting', move: null,
      reason: 'waiting for the disruption budget of web (maxUnavailable 1): 1 slot unavailable (slot 4: pending: no node fits); waiting: a rebalance off n1 (1 task)',
    });
    const forced = planRebalance(state, four, { force: true });
    expect(forced).toMatchObject({ state: 'moved', forced: true });
    const plan = rebalancePlan(state, v(four), forced, 2000, 'alice');
    const svc = plan?.changes.find((c) => c.collection === 'shoal.services');
    expect(svc?.kind === 'put' && svc.doc).toMatchObject({
      forcedDisruptions: [{ cause: 'rebalance', nodeId: 'n1', specVersion: null, at: 2000, by: 'alice', message: 'forced past the disruption budget (maxUnavailable 1) by alice: 1 slot unavailable (slot 4: pending: no node fits)' }],
    });
    // Within the budget a move records nothing, and compares what the budget was counted on.
    const step = planRebalance(stateOf(three, web(), running([3, 0, 0])), web());
    const within = rebalancePlan(stateOf(three, web(), running([3, 0, 0])), v(web()), step, 2000, 'alice');
    expect(within?.changes.map((c) => c.collection)).toEqual(['shoal.tasks']);
    expect(within?.compares.some((c) => c.collection === 'shoal.services' && c.target === 'rev')).toBe(true);
  });
});
