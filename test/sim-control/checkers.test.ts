// The control-plane simulator's checkers, fed hand-made histories that break each property (and
// the near misses that must pass), so a checker that stopped checking fails here.

import { describe, expect, it } from 'vitest';
import type { ContainerInfo } from '../../src/executor/runtime.ts';
import { containerLabels } from '../../src/executor/labels.ts';
import { serviceYaml, StateBuilder } from '../control/state-builder.ts';
import type { CommittedView } from './checkers/committed-view.ts';
import { ContainersChecker, type PlacedRecord } from './checkers/containers.ts';
import { CasChecker, type DecisionFact, type WrittenDoc } from './checkers/cas.ts';
import { FencingChecker } from './checkers/fencing.ts';
import { heldOn, PlacementChecker, type PlacementFact } from './checkers/placement.ts';
import { ReplicasChecker, type ReplicaFacts } from './checkers/replicas.ts';
import { ExclusiveChecker, SimFence, simFencePollMs } from './checkers/exclusive.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryLeaseStore } from '../../src/executor/lease-keeper.ts';
import { NodeClock } from './node-clock.ts';
import type { SimNode } from './sim-node.ts';
import { VolumesChecker } from './checkers/volumes.ts';
import type { VolumeRecord, VolumeVersion } from '../../src/resources/volumes.ts';

function view(b: StateBuilder): CommittedView {
  const strip = <T>(m: Map<string, { value: T }>): Map<string, T> => new Map([...m].map(([k, v]) => [k, v.value]));
  return { nodes: strip(b.nodes), services: strip(b.services), tasks: strip(b.tasks), statuses: strip(b.statuses) };
}

describe('the fencing checker', () => {
  it('accepts decisions in their own term, in term order, and ignores what did not take effect', () => {
    const c = new FencingChecker();
    c.observe({ index: 1, term: 1, decider: { node: 'n1', term: 1, key: 'place' }, tookEffect: true });
    c.observe({ index: 2, term: 2, decider: { node: 'n1', term: 1, key: 'place' }, tookEffect: false });
    c.observe({ index: 3, term: 2, decider: { node: 'n2', term: 2, key: 'place' }, tookEffect: true });
    c.observe({ index: 4, term: 2, decider: null, tookEffect: true });
  });

  it('refuses a decision that took effect in an entry of another term', () => {
    const c = new FencingChecker();
    expect(() => c.observe({ index: 5, term: 3, decider: { node: 'n1', term: 2, key: 'svc:web' }, tookEffect: true })).toThrow(/decided by n1's loops of term 2/);
  });

  it('refuses a deposed leader\'s decision after the new leader has decided', () => {
    const c = new FencingChecker();
    c.observe({ index: 1, term: 3, decider: { node: 'n2', term: 3, key: 'place' }, tookEffect: true });
    expect(() => c.observe({ index: 2, term: 2, decider: { node: 'n1', term: 2, key: 'place' }, tookEffect: true })).toThrow(/after the leader of term 3/);
  });
});

describe('the compare-and-set checker', () => {
  const decision = (writes: WrittenDoc[]): DecisionFact => ({ index: 20, decider: 'loop n1/t2 nodes', readRevision: 15, writes });

  it('accepts a decision that writes documents as they were at the revision it read, or absent', () => {
    const c = new CasChecker();
    c.observeDecision(decision([{ collection: 'shoal.nodes', id: 'n2', prevRev: 15 }, { collection: 'shoal.tasks', id: 't1', prevRev: 3 }, { collection: 'shoal.tasks', id: 't2', prevRev: null }]));
  });

  it('refuses a decision that overwrote a change made after the revision it read', () => {
    const c = new CasChecker();
    expect(() => c.observeDecision(decision([{ collection: 'shoal.nodes', id: 'n2', prevRev: 16 }]))).toThrow(/wrote shoal.nodes\/n2, which was changed at revision 16, after the revision 15/);
  });

  it('accepts a report of the node\'s committed epoch on a task that exists, and refuses any other', () => {
    const c = new CasChecker();
    const report = { index: 30, node: 'n2', what: 'report on task t1', epoch: 2, committedEpoch: 2, task: { id: 't1', exists: true } };
    c.observeReport(report);
    c.observeReport({ index: 31, node: 'n2', what: 'lease renewal', epoch: 2, committedEpoch: 2 });
    expect(() => c.observeReport({ ...report, committedEpoch: 3 })).toThrow(/of epoch 2 took effect, but the node's epoch was 3/);
    expect(() => c.observeReport({ ...report, committedEpoch: null })).toThrow(/the node's epoch was null/);
    expect(() => c.observeReport({ ...report, task: { id: 't1', exists: false } })).toThrow(/its task t1 no longer existed/);
  });

  it('refuses a node record whose epoch goes down', () => {
    const c = new CasChecker();
    c.observeNode(1, 'n2', 0);
    c.observeNode(5, 'n2', 1);
    c.observeNode(6, 'n2', 1);
    c.observeNode(7, 'n3', 0);
    expect(() => c.observeNode(9, 'n2', 0)).toThrow(/entry 9 put node n2 back to epoch 0; it was raised to 1 at entry 5/);
  });
});

describe('the placement checker', () => {
  const fact = (over: Partial<PlacementFact> = {}): PlacementFact => ({
    index: 9, taskId: 't1', nodeId: 'n2', availability: 'active', taskEpoch: 1, committed: { state: 'ready', availability: 'active', epoch: 1 },
    decision: { node: 'n1', term: 1, decidedAtMs: 10_000, loopsRunningMs: 10_000, silenceMs: { n1: 0, n2: 100 } },
    capacity: { cpuMillis: 1000, memoryBytes: 100 }, held: { cpuMillis: 1000, memoryBytes: 100 }, ...over,
  });
  const c = new PlacementChecker({ downAfterMs: 3000, slackMs: 2000 });

  it('accepts a placement on an active node heard from lately, filled to its capacity', () => {
    c.observe(fact());
  });

  it('refuses a placement on a node the operator drained or paused', () => {
    expect(() => c.observe(fact({ availability: 'drain' }))).toThrow(/set the node to drain/);
    expect(() => c.observe(fact({ availability: 'pause' }))).toThrow(/set the node to pause/);
  });

  it('refuses a placement on a node silent beyond the down timeout, unless the leader has not watched that long', () => {
    const silent = { node: 'n1', term: 1, decidedAtMs: 10_000, loopsRunningMs: 10_000, silenceMs: { n2: 5_000 } };
    expect(() => c.observe(fact({ decision: silent }))).toThrow(/had not heard from the node for 5000 ms/);
    expect(() => c.observe(fact({ decision: { ...silent, silenceMs: {} } }))).toThrow(/for ever/);
    c.observe(fact({ decision: { ...silent, loopsRunningMs: 4_999 } }));
    c.observe(fact({ decision: { ...silent, silenceMs: { n2: 4_999 } } }));
  });

  it('refuses a placement that took effect while the node was, in the committed state, not what the decision relied on', () => {
    const ready = { state: 'ready', availability: 'active', epoch: 1 } as const;
    expect(() => c.observe(fact({ committed: { ...ready, state: 'suspect' } }))).toThrow(/the node is suspect, active, in epoch 1 in the committed state/);
    expect(() => c.observe(fact({ committed: { ...ready, availability: 'pause' } }))).toThrow(/is ready, pause, in epoch 1/);
    expect(() => c.observe(fact({ committed: { ...ready, epoch: 2 } }))).toThrow(/in epoch 1: the node is ready, active, in epoch 2/);
    expect(() => c.observe(fact({ committed: null }))).toThrow(/the node has no record/);
  });

  it('refuses a placement that takes a node beyond its capacity', () => {
    expect(() => c.observe(fact({ held: { cpuMillis: 1001, memoryBytes: 1 } }))).toThrow(/beyond its capacity/);
    expect(() => c.observe(fact({ held: { cpuMillis: 1, memoryBytes: 101 } }))).toThrow(/beyond its capacity/);
  });

  it('counts what a node holds: tasks wanted running in its epoch that have not ended', () => {
    const b = new StateBuilder().node('n1', { epoch: 1 }).service(serviceYaml('web', 'resources:\n  reservations: {cpu: 100m, memory: 1Ki}'));
    b.placed('a', 'web', 1, 'n1', 'running');
    b.placed('b', 'web', 2, 'n1', 'failed');
    b.placed('c', 'web', 3, 'n1', 'running', { desired: 'shutdown' });
    b.placed('d', 'web', 4, 'n1', 'running', { nodeEpoch: 0 });
    b.task({ id: 'e', service: 'web', slot: 5, nodeId: 'n1', nodeEpoch: 1, observed: 'assigned' });
    expect(heldOn(view(b), 'n1')).toEqual({ cpuMillis: 200, memoryBytes: 2048 });
  });
});

describe('the replicas checker', () => {
  const none: ReplicaFacts = { everDrained: new Set(), pendingReplicas: () => 0 };
  const check = (b: StateBuilder, facts = none): void => new ReplicasChecker().check(view(b), facts);
  const web = (extra = ''): StateBuilder => new StateBuilder().node('n1').node('n2').service(serviceYaml('web', extra));

  it('accepts the spec\'s replicas, and ignores tasks on a node declared down and tasks not placed', () => {
    const b = web().node('n3', { state: 'down', epoch: 1 });
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, 'n1', 'running');
    b.placed('lost', 'web', 1, 'n2', 'running', { nodeEpoch: 0 });
    b.node('n2', { epoch: 1 });
    b.task({ id: 'pending', service: 'web', slot: 2 });
    check(b);
  });

  it('refuses more tasks than replicas, and two tasks in a slot of a stop-first service', () => {
    const b = web();
    for (const s of [1, 2, 3, 4]) b.placed(`t${s}`, 'web', s, 'n1', 'running');
    expect(() => check(b)).toThrow(/4 assigned tasks, beyond 3 replicas \+ 0 surge/);
    const pair = web().placed('a', 'web', 1, 'n1', 'running').placed('b', 'web', 1, 'n2', 'running');
    expect(() => check(pair)).toThrow(/slot 1 has 2 assigned tasks/);
  });

  it('allows a start-first surge of parallelism while an update is open, and not beyond', () => {
    const open = { updateStatus: { state: 'updating' as const, startedAt: 1, completedAt: null, message: null } };
    const b = new StateBuilder().node('n1').service(serviceYaml('web', 'update: {order: start-first}'), open);
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, 'n1', 'running');
    b.placed('new1', 'web', 1, 'n1', 'running', { specVersion: 2 });
    check(b);
    b.placed('new2', 'web', 2, 'n1', 'running', { specVersion: 2 });
    expect(() => check(b)).toThrow(/5 assigned tasks, beyond 3 replicas \+ 1 surge/);
  });

  it('allows a start-first pair per task of a drained node, and the old replicas until the orchestrator acted', () => {
    const b = new StateBuilder().node('n1').node('n2').service(serviceYaml('web', 'update: {order: start-first}'));
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, 'n1', 'running', { createdAt: 1 });
    b.placed('m1', 'web', 1, 'n2', 'running', { createdAt: 2 }).placed('m2', 'web', 2, 'n2', 'running', { createdAt: 2 });
    expect(() => check(b)).toThrow(/beyond 3 replicas \+ 0 surge/);
    check(b, { everDrained: new Set(['n1']), pendingReplicas: () => 0 });
    check(b, { everDrained: new Set(), pendingReplicas: () => 5 });
  });
});

describe('the containers checker', () => {
  const placed = new Map<string, PlacedRecord>([['t1', { nodeId: 'n1', epoch: 2, term: 3 }], ['t2', { nodeId: 'n1', epoch: 1, term: 3 }]]);
  const container = (id: string, task: string, over: { node?: string; epoch?: number; term?: number; state?: ContainerInfo['state'] } = {}): ContainerInfo => ({
    id, name: `shoal-web.1.${task}`, image: 'app:v1', state: over.state ?? 'running', exitCode: null, startedAt: 1, finishedAt: null, health: null, error: null,
    labels: containerLabels({ clusterId: 'sim', nodeId: over.node ?? 'n1', service: 'web', slot: 1, taskId: task, specVersion: 1, term: over.term ?? 3, nodeEpoch: over.epoch ?? 2 }),
  });
  const check = (...rts: { nodeId: string; containers: ContainerInfo[] }[]): void => new ContainersChecker().check(rts, placed);

  it('accepts one running container per task, labelled as placed; exited ones do not count', () => {
    check({ nodeId: 'n1', containers: [container('c1', 't1'), container('c2', 't1', { state: 'exited' })] });
  });

  it('refuses a task running twice, on one node or two', () => {
    expect(() => check({ nodeId: 'n1', containers: [container('c1', 't1'), container('c2', 't1')] })).toThrow(/task t1 runs twice/);
    expect(() => check({ nodeId: 'n1', containers: [container('c1', 't1')] }, { nodeId: 'n2', containers: [container('c2', 't1', { node: 'n2' })] })).toThrow(/runs twice/);
  });

  it('refuses a container of a task never placed, on another node than its own, or with another epoch or term', () => {
    expect(() => check({ nodeId: 'n1', containers: [container('c1', 'tx')] })).toThrow(/never placed/);
    expect(() => check({ nodeId: 'n2', containers: [container('c1', 't1', { node: 'n2' })] })).toThrow(/placed on n1/);
    expect(() => check({ nodeId: 'n1', containers: [container('c1', 't1', { epoch: 1 })] })).toThrow(/labelled epoch 1 term 3/);
    expect(() => check({ nodeId: 'n1', containers: [container('c1', 't1', { term: 2 })] })).toThrow(/labelled epoch 2 term 2/);
  });

  it('refuses containers of two epochs running at once on a node', () => {
    expect(() => check({ nodeId: 'n1', containers: [container('c1', 't1'), container('c2', 't2', { epoch: 1 })] })).toThrow(/epochs 2 and 1 at once/);
  });
});

describe('the exclusive checker and the fence model', () => {
  const running = (id: string, slot: number, exclusive: boolean): ContainerInfo => ({
    id, name: `shoal-db.${slot}.${id}`, image: 'app', state: 'running', exitCode: null, startedAt: 1, finishedAt: null, health: null, error: null,
    labels: containerLabels({ clusterId: 'sim', nodeId: 'n1', service: 'db', slot, taskId: id, specVersion: 1, term: 1, nodeEpoch: 0 }, exclusive),
  });

  it('refuses two running containers of one exclusive slot on any two machines awake', () => {
    const c = new ExclusiveChecker();
    expect(() => c.check([{ nodeId: 'n1', suspended: false, containers: [running('a', 1, true)] }, { nodeId: 'n2', suspended: false, containers: [running('b', 1, true)] }], 5))
      .toThrow(/slot db.1 of an exclusive service runs twice at 5 ms/);
  });

  it('accepts other slots, plain services, and a suspended machine\'s frozen containers', () => {
    const c = new ExclusiveChecker();
    c.check([{ nodeId: 'n1', suspended: false, containers: [running('a', 1, true), running('b', 2, true), running('c', 1, false)] }, { nodeId: 'n2', suspended: false, containers: [running('d', 1, false)] }], 5);
    c.check([{ nodeId: 'n1', suspended: true, containers: [running('a', 1, true)] }, { nodeId: 'n2', suspended: false, containers: [running('b', 1, true)] }], 5);
  });

  it('the fence kills a container whose lease file ran out (or has none), by the poll, and never on a suspended machine', () => {
    const base = new ManualClock(10_000);
    const clock = new NodeClock(base, 1);
    const node = { id: 'n1', clock, leases: new MemoryLeaseStore() } as unknown as SimNode;
    const fence = new SimFence();
    const facts = [{ node, containers: [running('a', 1, true), running('b', 2, false)] }];
    expect(fence.expired(facts).map((k) => k.containerId)).toEqual(['a']);
    node.leases.write(0, 10_500);
    expect(fence.expired(facts)).toEqual([]);
    base.advance(500 + simFencePollMs);
    expect(fence.expired(facts).map((k) => k.containerId)).toEqual(['a']);
    clock.suspend();
    expect(fence.expired(facts)).toEqual([]);
  });
});

describe('the volumes checker', () => {
  const v = (seq: number, node: string, epoch = 0): VolumeVersion => ({ seq, node, epoch });
  const rec = (eras: VolumeRecord['eras'], held: [string, VolumeVersion][]): VolumeRecord => ({
    name: 'data', service: 'svca', copies: 2, everyMs: 1000, sizeBytes: 1 << 30, eras, held: held.map(([node, version]) => ({ node, version, atMs: 0 })), lastError: null,
  });
  const eraN1 = { node: 'n1', epoch: 0, fromSeq: 1, base: null };
  const before = rec([eraN1], [['n2', v(3, 'n1')], ['n3', v(2, 'n1')]]);

  it('accepts a failover to a holder of the newest complete copy, from it', () => {
    const c = new VolumesChecker();
    c.onCommitted(undefined, rec([eraN1], []), 1);
    c.onCommitted(before, rec([eraN1, { node: 'n2', epoch: 0, fromSeq: 4, base: v(3, 'n1') }], before.held.map((h) => [h.node, h.version])), 2);
    expect(c.failovers).toBe(1);
    c.onTaskStart(rec([eraN1, { node: 'n2', epoch: 0, fromSeq: 4, base: v(3, 'n1') }], []), 'n2', 0, () => true, 0);
  });

  it('refuses a failover to an older copy, one from another base, losing the last complete copy, a start without the base, a stale sender', () => {
    const c = new VolumesChecker();
    const held = before.held.map((h): [string, VolumeVersion] => [h.node, h.version]);
    expect(() => c.onCommitted(before, rec([eraN1, { node: 'n3', epoch: 0, fromSeq: 4, base: v(2, 'n1') }], held), 2)).toThrow(/placed on n3/);
    expect(() => c.onCommitted(before, rec([eraN1, { node: 'n2', epoch: 0, fromSeq: 4, base: v(2, 'n1') }], held), 2)).toThrow(/not the newest complete copy/);
    expect(() => c.onCommitted(before, rec([eraN1], [['n3', v(2, 'n1')]]), 2)).toThrow(/newest complete copy went from s3-e0-n1/);
    expect(() => c.onCommitted(before, undefined, 2)).toThrow(/deleted/);
    expect(() => c.onTaskStart(rec([eraN1, { node: 'n2', epoch: 0, fromSeq: 4, base: v(3, 'n1') }], []), 'n2', 0, () => false, 0)).toThrow(/without the version/);
    expect(() => c.onAccept(rec([eraN1, { node: 'n2', epoch: 0, fromSeq: 4, base: v(3, 'n1') }], []), 'n3', { node: 'n1', epoch: 0 }, v(4, 'n1'), 0)).toThrow(/accepted s4-e0-n1 from n1/);
    c.onAccept(before, 'n3', { node: 'n1', epoch: 0 }, v(4, 'n1'), 0);
  });
});
