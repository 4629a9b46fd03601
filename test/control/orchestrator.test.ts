// The orchestrator, the rolling update and placement as pure functions over hand-built states
// (node health: node-health.test.ts).

import { describe, expect, it } from 'vitest';
import { reconcileService, taskHistoryPerSlot } from '../../src/control/orchestrator.ts';
import { placePending } from '../../src/control/placement.ts';
import { backoffMs, restartVerdict } from '../../src/control/restart-policy.ts';
import { rollback, withNewSpec } from '../../src/control/rolling-update.ts';
import type { NodeRecord, TaskRecord } from '../../src/resources/records.ts';
import { ids, serviceYaml, specOf, StateBuilder } from './state-builder.ts';

const three = (extra = ''): StateBuilder => new StateBuilder().node('node1').node('node2').node('node3').service(serviceYaml('web', extra));
const put = (d: ReturnType<typeof reconcileService>) => d.plan.changes.filter((c) => c.kind === 'put').map((c) => c.doc as unknown as TaskRecord);

describe('the orchestrator', () => {
  it('creates the missing slots as pending tasks, and nothing else', () => {
    const d = reconcileService(three().build(), 'web', { now: 100, newTaskId: ids() });
    const created = put(d);
    expect(created.map((t) => [t.slot, t.observed, t.desired, t.specVersion, t.nodeId])).toEqual([
      [1, 'pending', 'running', 1, null], [2, 'pending', 'running', 1, null], [3, 'pending', 'running', 1, null]]);
    expect(d.plan.changes.every((c) => 'absent' in c.expect)).toBe(true);
  });

  it('is idempotent: a converged service yields an empty plan', () => {
    const b = three().placed('a', 'web', 1, 'node1', 'running', { startedAt: 5, observed: 'running' }).placed('b', 'web', 2, 'node2', 'running', { startedAt: 5, observed: 'running' })
      .placed('c', 'web', 3, 'node3', 'running', { startedAt: 5, observed: 'running' });
    for (const t of ['a', 'b', 'c']) {
      const v = b.tasks.get(t);
      if (v) v.value = { ...v.value, containerId: `c-${t}` };
    }
    expect(reconcileService(b.build(), 'web', { now: 100, newTaskId: ids() }).plan.changes).toEqual([]);
  });

  it('clears what a task was said to wait for once it runs as wanted, and keeps the reason of one being stopped', () => {
    const b = three().placed('a', 'web', 1, 'node1', 'running', { startedAt: 5, observed: 'starting', message: 'waiting for network back: the leader has not given this task an address yet' })
      .placed('b', 'web', 2, 'node2', 'running', { startedAt: 5, observed: 'running', desired: 'shutdown', message: 'scaled down' })
      .placed('c', 'web', 3, 'node3', 'starting', { observed: 'assigned' }, { message: 'waiting for network back: this node\'s overlay for it is not in place yet' });
    const tasks = put(reconcileService(b.build(), 'web', { now: 100, newTaskId: ids() }));
    expect(tasks.find((t) => t.id === 'a')).toMatchObject({ observed: 'running', message: null });
    expect(tasks.find((t) => t.id === 'b')?.message ?? b.tasks.get('b')?.value.message).toBe('scaled down');
    expect(tasks.find((t) => t.id === 'c')).toMatchObject({ observed: 'starting', message: 'waiting for network back: this node\'s overlay for it is not in place yet' });
  });

  it('scales down from the highest slots, and never below', () => {
    const b = new StateBuilder().node('node1').service(serviceYaml('web').replace('replicas: 3', 'replicas: 1'));
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, 'node1', 'running', { observed: 'running', startedAt: 1, containerId: `c-t${s}` });
    const shut = put(reconcileService(b.build(), 'web', { now: 10, newTaskId: ids() })).filter((t) => t.desired === 'shutdown');
    expect(shut.map((t) => t.slot).sort()).toEqual([2, 3]);
  });

  it('retires a failed task and, after the restart delay, puts a new attempt in its slot', () => {
    const b = three('restart: {delay: 2s}').placed('a', 'web', 1, 'node1', 'failed', { observed: 'running', startedAt: 0 });
    let d = reconcileService(b.build(), 'web', { now: 1_000, newTaskId: ids('n') });
    const failed = put(d).find((t) => t.id === 'a');
    expect(failed).toMatchObject({ desired: 'shutdown', observed: 'failed', exitCode: 1, finishedAt: 1_000 });
    b.apply(d.plan);
    d = reconcileService(b.build(), 'web', { now: 1_500, newTaskId: ids('n') });
    expect(put(d).filter((t) => t.slot === 1 && t.id !== 'a')).toEqual([]);
    expect(d.wakeInMs).toBe(1_500);
    d = reconcileService(b.build(), 'web', { now: 3_000, newTaskId: ids('m') });
    expect(put(d).find((t) => t.slot === 1 && t.observed === 'pending')).toMatchObject({ attempt: 1 });
  });

  it('leaves the slot failed once the attempts run out, and says why', () => {
    const b = three('restart: {maxAttempts: 1}').task({ id: 'a', service: 'web', slot: 1, nodeId: 'node1', nodeEpoch: 0, observed: 'failed', desired: 'shutdown', attempt: 1, startedAt: 0, finishedAt: 10, exitCode: 2 });
    const d = reconcileService(b.build(), 'web', { now: 100_000, newTaskId: ids() });
    expect(put(d).filter((t) => t.slot === 1 && t.id !== 'a')).toEqual([]);
    expect(put(d).find((t) => t.id === 'a')?.message).toMatch(/not restarted: gave up after 1 restart attempt/);
  });

  it('replaces the task of a node whose epoch was raised (declared down) at once, as orphaned', () => {
    const b = three().placed('a', 'web', 1, 'node1', 'running', { observed: 'running', startedAt: 0 });
    const n1 = b.nodes.get('node1');
    if (n1) n1.value = { ...n1.value, state: 'down', epoch: 1 };
    const d = reconcileService(b.build(), 'web', { now: 50, newTaskId: ids('n') });
    expect(put(d).find((t) => t.id === 'a')).toMatchObject({ observed: 'orphaned', desired: 'shutdown' });
    expect(put(d).find((t) => t.slot === 1 && t.id !== 'a')).toMatchObject({ observed: 'pending', attempt: 0 });
  });

  it('moves a task off a draining node: start-first runs the new one before the old stops', () => {
    const b = three('update: {order: start-first}').placed('a', 'web', 1, 'node1', 'running', { observed: 'running', startedAt: 0, containerId: 'c-a' });
    const n1 = b.nodes.get('node1');
    if (n1) n1.value = { ...n1.value, availability: 'drain' };
    let d = reconcileService(b.build(), 'web', { now: 50, newTaskId: ids('n') });
    const fresh = put(d).find((t) => t.slot === 1 && t.id !== 'a');
    expect(fresh).toBeDefined();
    expect(put(d).find((t) => t.id === 'a')).toBeUndefined();
    b.apply(d.plan);
    // The new task runs (placed on node2): only then does the old one stop.
    const v = b.tasks.get(fresh?.id ?? '');
    if (v) v.value = { ...v.value, nodeId: 'node2', nodeEpoch: 0, observed: 'running', startedAt: 60 };
    d = reconcileService(b.build(), 'web', { now: 70, newTaskId: ids('m') });
    expect(put(d).find((t) => t.id === 'a')).toMatchObject({ desired: 'shutdown' });
  });

  it('stop-first (the default): the old task stops first, and the new one waits until it has', () => {
    const b = three().placed('a', 'web', 1, 'node1', 'running', { observed: 'running', startedAt: 0, containerId: 'c-a' })
      .placed('b', 'web', 2, 'node2', 'running', { observed: 'running', startedAt: 0, containerId: 'c-b' })
      .placed('c', 'web', 3, 'node3', 'running', { observed: 'running', startedAt: 0, containerId: 'c-c' });
    const n1 = b.nodes.get('node1');
    if (n1) n1.value = { ...n1.value, availability: 'drain' };
    let d = reconcileService(b.build(), 'web', { now: 50, newTaskId: ids('n') });
    expect(put(d).find((t) => t.id === 'a')).toMatchObject({ desired: 'shutdown' });
    expect(put(d).filter((t) => t.slot === 1 && t.id !== 'a')).toEqual([]);
    b.apply(d.plan);
    d = reconcileService(b.build(), 'web', { now: 60, newTaskId: ids('m') });
    expect(put(d).filter((t) => t.slot === 1 && t.id !== 'a')).toEqual([]);
    const st = b.statuses.get('a');
    if (st) st.value = { ...st.value, state: 'shutdown' };
    d = reconcileService(b.build(), 'web', { now: 70, newTaskId: ids('m') });
    expect(put(d).find((t) => t.slot === 1 && t.id !== 'a')).toMatchObject({ observed: 'pending' });
  });

  it('keeps a short history per slot and deletes older finished tasks with their reports', () => {
    const b = three();
    for (let i = 0; i < taskHistoryPerSlot + 2; i++) b.placed(`old${i}`, 'web', 1, 'node1', 'shutdown', { desired: 'shutdown', observed: 'shutdown', createdAt: i, finishedAt: i });
    const d = reconcileService(b.build(), 'web', { now: 100, newTaskId: ids() });
    const deleted = d.plan.changes.filter((c) => c.kind === 'delete').map((c) => `${c.collection}/${c.id}`).sort();
    expect(deleted).toEqual(['shoal.task-status/old0', 'shoal.task-status/old1', 'shoal.tasks/old0', 'shoal.tasks/old1']);
  });

  it('shuts everything down and reaps it all when the service is removed', () => {
    const b = three().placed('a', 'web', 1, 'node1', 'running', { observed: 'running' });
    b.services.delete('web');
    const d = reconcileService(b.build(), 'web', { now: 5, newTaskId: ids() });
    expect(put(d).find((t) => t.id === 'a')).toMatchObject({ desired: 'shutdown' });
  });

  it('a global service: one task per eligible node, and none on a node that no longer qualifies', () => {
    const b = new StateBuilder().node('node1', { labels: { disk: 'ssd' } }).node('node2').node('node3', { labels: { disk: 'ssd' } })
      .service(serviceYaml('agent').replace('replicas: 3', 'mode: global\nconstraints: ["node.labels.disk == ssd"]'));
    const d = reconcileService(b.build(), 'agent', { now: 1, newTaskId: ids() });
    expect(put(d).map((t) => t.slot).sort()).toEqual(['node1', 'node3']);
  });
});

describe('the rolling update', () => {
  const updated = (b: StateBuilder, extra: string, now: number): void => {
    const svc = b.services.get('web');
    if (!svc) throw new Error('no web');
    svc.value = withNewSpec(svc.value, specOf(serviceYaml('web', extra).replace('busybox:local', 'busybox:new')), true, now);
  };

  it('replaces parallelism tasks at a time, the next only once a new one has run for the monitor period', () => {
    const b = three('update: {parallelism: 1, monitor: 10s}');
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
    updated(b, 'update: {parallelism: 1, monitor: 10s}', 100);
    const d = reconcileService(b.build(), 'web', { now: 100, newTaskId: ids('n') });
    expect(put(d).filter((t) => t.desired === 'shutdown').map((t) => t.id)).toEqual(['t1']);
    b.apply(d.plan);
    expect(reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') }).plan.changes.filter((c) => c.kind === 'put' && (c.doc as { desired?: string }).desired === 'shutdown' && c.id !== 't1')).toEqual([]);
  });

  it('stop-first: the next batch waits while a slot\'s new task is still to be created (its old one has stopped)', () => {
    const b = three('update: {parallelism: 1, monitor: 10s}');
    b.placed('t1', 'web', 1, 'node1', 'shutdown', { desired: 'shutdown', observed: 'shutdown', startedAt: 0, finishedAt: 150, containerId: 'c-t1' });
    for (const s of [2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
    updated(b, 'update: {parallelism: 1, monitor: 10s}', 100);
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(put(d).filter((t) => t.id !== 't1').map((t) => [t.id, t.slot, t.specVersion, t.desired])).toEqual([['n1', 1, 2, 'running']]);
  });

  it('rolls back by itself when a new task\'s health check fails within the monitor', () => {
    const hc = 'healthCheck: {command: ["false"], interval: 1s}\nupdate: {monitor: 10s, failureAction: rollback}';
    const b = three(hc);
    for (const s of [2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
    updated(b, hc, 100);
    b.placed('new1', 'web', 1, 'node1', 'starting', { specVersion: 2, createdAt: 150 }, { health: 'unhealthy', message: 'health check failing' });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    const svc = d.plan.changes.find((c) => c.collection === 'shoal.services');
    expect(svc?.kind === 'put' && svc.doc).toMatchObject({ specVersion: 1, updateStatus: { state: 'rolling-back', message: expect.stringMatching(/new1 \(slot 1\) failed within the update's monitor: health check failing/) } });
    // Still starting, its check not yet decided: the update waits.
    const waiting = three(hc);
    updated(waiting, hc, 100);
    waiting.placed('new1', 'web', 1, 'node1', 'starting', { specVersion: 2, createdAt: 150 }, { health: 'starting' });
    expect(reconcileService(waiting.build(), 'web', { now: 200, newTaskId: ids('n') }).plan.changes.find((c) => c.collection === 'shoal.services')).toBeUndefined();
  });

  it('rolls back by itself when a new task fails within the monitor (failureAction rollback)', () => {
    const b = three('update: {monitor: 10s, failureAction: rollback}');
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
    updated(b, 'update: {monitor: 10s, failureAction: rollback}', 100);
    b.placed('new1', 'web', 1, 'node1', 'failed', { specVersion: 2, createdAt: 150, observed: 'running', startedAt: 160 });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    const svc = d.plan.changes.find((c) => c.collection === 'shoal.services');
    expect(svc?.kind === 'put' && svc.doc).toMatchObject({ specVersion: 1, previousSpecVersion: 2, updateStatus: { state: 'rolling-back' } });
  });

  it('pauses instead of rolling back onto an ingress port another service took since, and claims the ports it brings back otherwise', () => {
    const policy = 'update: {monitor: 10s, failureAction: rollback}';
    const failing = (other: boolean): StateBuilder => {
      const b = three(`${policy}\nports: [{published: 8080, target: 80}]`);
      for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
      const svc = b.services.get('web');
      if (!svc) throw new Error('no web');
      // The update moves web to 9090; meanwhile (or not) api takes 8080.
      svc.value = withNewSpec(svc.value, specOf(serviceYaml('web', `${policy}\nports: [{published: 9090, target: 80}]`).replace('busybox:local', 'busybox:new')), true, 100);
      if (other) b.service(serviceYaml('api', 'ports: [{published: 8080, target: 8080}]'));
      b.placed('new1', 'web', 1, 'node1', 'failed', { specVersion: 2, createdAt: 150, observed: 'running', startedAt: 160 });
      return b;
    };
    const read = (id: string): { rev: number } | undefined => (id === 'tcp-8080' ? { rev: 7 } : undefined);

    const clash = reconcileService(failing(true).build(), 'web', { now: 200, newTaskId: ids('n'), readPortRecord: read });
    const paused = clash.plan.changes.find((c) => c.collection === 'shoal.services');
    expect(paused?.kind === 'put' && paused.doc).toMatchObject({ specVersion: 2, updateStatus: { state: 'paused' } });
    const message = paused?.kind === 'put' ? String((paused.doc as { updateStatus: { message: string } }).updateStatus.message) : '';
    expect(message).toMatch(/; not rolled back: service web publishes 8080\/tcp \(ingress\), and service api publishes it/);
    expect(clash.plan.changes.filter((c) => c.collection === 'shoal.ingress-ports')).toEqual([]);

    const free = reconcileService(failing(false).build(), 'web', { now: 200, newTaskId: ids('n'), readPortRecord: read });
    const back = free.plan.changes.find((c) => c.collection === 'shoal.services');
    expect(back?.kind === 'put' && back.doc).toMatchObject({ specVersion: 1, updateStatus: { state: 'rolling-back' } });
    const claims = free.plan.changes.filter((c) => c.collection === 'shoal.ingress-ports');
    expect(claims.map((c) => [c.id, c.expect])).toEqual([['tcp-8080', { rev: 7 }]]);
    expect(free.plan.compares).toContainEqual(expect.objectContaining({ collection: 'shoal.ingress-ports', id: 'tcp-8080', cmp: '<=' }));
  });

  it('pauses instead when the policy says pause, and completes when every task is good', () => {
    const b = three('update: {monitor: 10s}');
    updated(b, 'update: {monitor: 10s}', 100);
    b.placed('new1', 'web', 1, 'node1', 'failed', { specVersion: 2, createdAt: 150, observed: 'running', startedAt: 160 });
    const paused = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') }).plan.changes.find((c) => c.collection === 'shoal.services');
    expect(paused?.kind === 'put' && paused.doc).toMatchObject({ updateStatus: { state: 'paused' } });

    const ok = three('update: {monitor: 10s}');
    updated(ok, 'update: {monitor: 10s}', 100);
    for (const s of [1, 2, 3]) ok.placed(`n${s}`, 'web', s, `node${s}`, 'running', { specVersion: 2, observed: 'running', createdAt: 110, startedAt: 120, containerId: `c-n${s}` });
    const done = reconcileService(ok.build(), 'web', { now: 20_000, newTaskId: ids('n') }).plan.changes.find((c) => c.collection === 'shoal.services');
    expect(done?.kind === 'put' && done.doc).toMatchObject({ updateStatus: { state: 'completed', completedAt: 20_000 } });
  });

  it('stop-first: is not completed while a slot waits for its new task (its old one just stopped)', () => {
    const b = new StateBuilder().node('node1').service(serviceYaml('web').replace('replicas: 3', 'replicas: 1'));
    updated(b, '', 100);
    const svc = b.services.get('web');
    if (svc) svc.value = { ...svc.value, spec: { ...svc.value.spec, replicas: 1 } };
    b.placed('old', 'web', 1, 'node1', 'shutdown', { desired: 'shutdown', observed: 'running', startedAt: 0, createdAt: 0, containerId: 'c-old' });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(d.plan.changes.find((c) => c.collection === 'shoal.services')).toBeUndefined();
    expect(put(d).find((t) => t.id !== 'old')).toMatchObject({ slot: 1, specVersion: 2, observed: 'pending' });
  });

  it('a rollback swaps the specs and versions, so the tasks of the old version are current again; a later update takes a fresh version', () => {
    const b = three();
    const svc = b.services.get('web');
    if (!svc) throw new Error('no web');
    const v2 = withNewSpec(svc.value, specOf(serviceYaml('web').replace('busybox:local', 'busybox:new')), true, 5);
    const back = rollback(v2, 9, 'by hand');
    expect([back.specVersion, back.previousSpecVersion, back.spec.image]).toEqual([1, 2, 'busybox:local']);
    expect(withNewSpec(back, specOf(serviceYaml('web').replace('busybox:local', 'busybox:third')), true, 20).specVersion).toBe(3);
  });
});

describe('the disruption budget in the orchestrator', () => {
  const stopped = (d: ReturnType<typeof reconcileService>): string[] => put(d).filter((t) => t.desired === 'shutdown').map((t) => t.id).sort();
  /** Three running tasks t1..t3, one per node, of `web` with `extra`. */
  const running = (extra: string): StateBuilder => {
    const b = three(extra);
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
    return b;
  };
  const update = (b: StateBuilder, extra: string): void => {
    const svc = b.services.get('web');
    if (!svc) throw new Error('no web');
    svc.value = withNewSpec(svc.value, specOf(serviceYaml('web', extra).replace('busybox:local', 'busybox:new')), true, 100);
  };
  const setNode = (b: StateBuilder, id: string, over: Partial<NodeRecord>): void => {
    const n = b.nodes.get(id);
    if (n) n.value = { ...n.value, ...over };
  };

  it('a rolling update waits while a node is down, saying why (replacing only the slot already lost), and goes on once it serves again', () => {
    const b = running('update: {monitor: 10s}');
    update(b, 'update: {monitor: 10s}');
    setNode(b, 'node3', { state: 'suspect' });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    // Slot 3 serves nothing already: replacing its task costs nothing; slots 1 and 2 wait.
    expect(stopped(d)).toEqual(['t3']);
    expect(d.budgetWait).toBe('waiting for the disruption budget of web (maxUnavailable 1): 1 slot unavailable (slot 3: node n3 suspect); waiting: the rolling update (2 tasks)');
    setNode(b, 'node3', { state: 'ready' });
    const again = reconcileService(b.build(), 'web', { now: 300, newTaskId: ids('n') });
    expect(stopped(again)).toEqual(['t1']);
    expect(again.budgetWait).toBeNull();
  });

  it('a rollback asks the budget as an update does: the slot already lost goes, the others wait, named', () => {
    const extra = 'update: {parallelism: 3, monitor: 10s}\ndisruption: {maxUnavailable: 1}';
    const b = three(extra);
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, `node${s}`, 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}`, specVersion: 2 });
    const svc = b.services.get('web');
    if (!svc) throw new Error('no web');
    svc.value = rollback(withNewSpec(svc.value, specOf(serviceYaml('web', extra).replace('busybox:local', 'busybox:new')), true, 100), 150, 'by hand');
    setNode(b, 'node3', { state: 'suspect' });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['t3']);
    expect(d.budgetWait).toBe('waiting for the disruption budget of web (maxUnavailable 1): 1 slot unavailable (slot 3: node n3 suspect); waiting: the rollback (2 tasks)');
  });

  it('an update and a drain together take no more than the budget: the update first, the drain waits', () => {
    const extra = 'update: {parallelism: 2, monitor: 10s}\ndisruption: {maxUnavailable: 1}';
    const b = running(extra);
    update(b, extra);
    setNode(b, 'node2', { availability: 'drain' });
    let d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['t1']);
    expect(d.budgetWait).toBe('waiting for the disruption budget of web (maxUnavailable 1): 0 slots unavailable; waiting: the rolling update (2 tasks), the drain of n2 (1 task)');
    b.apply(d.plan);
    // The slot in progress holds the budget until its new task serves.
    d = reconcileService(b.build(), 'web', { now: 300, newTaskId: ids('m') });
    expect(stopped(d)).toEqual([]);
    expect(d.budgetWait).toMatch(/^waiting for the disruption budget of web \(maxUnavailable 1\): 1 slot unavailable \(slot 1: stopping on n1\)/);
  });

  it('a plan that spends the budget compares what it was counted on: the serving tasks, their reports, their nodes, the service', () => {
    const b = running('');
    setNode(b, 'node1', { availability: 'drain' });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['t1']);
    const compared = d.plan.compares.map((c) => `${c.collection}/${c.id}${c.path === undefined ? '' : `.${c.path}`}`).sort();
    expect(compared).toEqual([
      'shoal.nodes/node1.epoch', 'shoal.nodes/node1.state', 'shoal.nodes/node2.epoch', 'shoal.nodes/node2.state', 'shoal.nodes/node3.epoch', 'shoal.nodes/node3.state',
      'shoal.services/web', 'shoal.task-status/t1', 'shoal.task-status/t2', 'shoal.task-status/t3', 'shoal.tasks/t2', 'shoal.tasks/t3',
    ]);
  });

  it('a global service\'s task on a drained node stops without asking the budget (the node leaves its slots), even at maxUnavailable 0', () => {
    const b = new StateBuilder().node('node1').node('node2').service(serviceYaml('agent', 'disruption: {maxUnavailable: 0}').replace('replicas: 3\n', 'mode: global\n'));
    for (const n of ['node1', 'node2']) b.placed(`a-${n}`, 'agent', n, n, 'running', { observed: 'running', startedAt: 0, containerId: `c-${n}` });
    setNode(b, 'node2', { availability: 'drain' });
    const d = reconcileService(b.build(), 'agent', { now: 200, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['a-node2']);
    expect(d.budgetWait).toBeNull();
  });

  it('a start-first update or drain keeps its slots serving, so the budget does not hold it', () => {
    const extra = 'update: {order: start-first, monitor: 10s}\ndisruption: {maxUnavailable: 0}';
    const b = running(extra);
    setNode(b, 'node1', { availability: 'drain' });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(put(d).filter((t) => t.observed === 'pending').map((t) => t.slot)).toEqual([1]);
    expect(d.budgetWait).toBeNull();
  });

  it('a forced drain moves every task at once, and its record goes once the node carries no task of the service', () => {
    const b = new StateBuilder().node('node1').node('node2').node('node3', { availability: 'drain' }).service(serviceYaml('web'), {
      forcedDisruptions: [{ cause: 'drain', nodeId: 'node3', specVersion: null, at: 50, by: 'alice', message: 'forced' }],
    });
    for (const s of [1, 2, 3]) b.placed(`t${s}`, 'web', s, 'node3', 'running', { observed: 'running', startedAt: 0, containerId: `c-t${s}` });
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['t1', 't2', 't3']);
    expect(d.budgetWait).toBeNull();
    const svc = d.plan.changes.find((c) => c.collection === 'shoal.services');
    expect(svc?.kind === 'put' && svc.doc).toMatchObject({ forcedDisruptions: [] });
  });

  it('a forced update replaces parallelism tasks past the budget; the record goes when the update is over', () => {
    const b = running('update: {parallelism: 3, monitor: 10s}\ndisruption: {maxUnavailable: 1}');
    update(b, 'update: {parallelism: 3, monitor: 10s}\ndisruption: {maxUnavailable: 1}');
    const svc = b.services.get('web');
    if (svc) svc.value = { ...svc.value, forcedDisruptions: [{ cause: 'update', nodeId: null, specVersion: 2, at: 100, by: 'alice', message: 'forced' }] };
    const d = reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['t1', 't2', 't3']);
    if (svc) svc.value = { ...svc.value, updateStatus: { ...svc.value.updateStatus, state: 'completed' } };
    const over = reconcileService(b.build(), 'web', { now: 300, newTaskId: ids('n') }).plan.changes.find((c) => c.collection === 'shoal.services');
    expect(over?.kind === 'put' && over.doc).toMatchObject({ forcedDisruptions: [] });
  });

  it('a start-first replacement stops the old task only once the new one serves on a ready node', () => {
    const b = running('update: {order: start-first}');
    b.placed('new1', 'web', 1, 'node2', 'running', { observed: 'running', startedAt: 5, createdAt: 5 });
    setNode(b, 'node2', { state: 'suspect' });
    expect(stopped(reconcileService(b.build(), 'web', { now: 200, newTaskId: ids('n') }))).toEqual([]);
    setNode(b, 'node2', { state: 'ready' });
    const d = reconcileService(b.build(), 'web', { now: 300, newTaskId: ids('n') });
    expect(stopped(d)).toEqual(['t1']);
    expect(d.plan.compares.some((c) => c.collection === 'shoal.task-status' && c.id === 'new1')).toBe(true);
  });
});

describe('restart policy', () => {
  it('doubles the delay per attempt up to the cap, and starts again after a long run', () => {
    const policy = specOf(serviceYaml('web', 'restart: {delay: 1s, maxDelay: 5s}')).restart;
    expect([1, 2, 3, 4, 5].map((a) => backoffMs(a, policy))).toEqual([1000, 2000, 4000, 5000, 5000]);
    const base: TaskRecord = {
      id: 'x', service: 'web', slot: 1, specVersion: 1, nodeId: 'n', desired: 'shutdown', observed: 'failed', assignedTerm: 1, nodeEpoch: 0,
      containerId: null, exitCode: 1, message: null, pendingReason: null, attempt: 3, createdAt: 0, assignedAt: 0, startedAt: 0, finishedAt: 500, updatedAt: 500,
    };
    expect(restartVerdict(base, policy)).toEqual({ restart: true, attempt: 4, notBefore: 500 + 5000 });
    expect(restartVerdict({ ...base, finishedAt: 120_000 }, policy)).toEqual({ restart: true, attempt: 0, notBefore: 120_000 });
    expect(restartVerdict({ ...base, exitCode: 0 }, { ...policy, condition: 'on-failure' })).toMatchObject({ restart: false });
  });
});

describe('placement', () => {
  it('places pending tasks with the node, its epoch and the term, comparing what it relied on', () => {
    const b = three().task({ id: 'p1', service: 'web', slot: 1 }).task({ id: 'p2', service: 'web', slot: 2 });
    const n2 = b.nodes.get('node2');
    if (n2) n2.value = { ...n2.value, epoch: 4 };
    const d = placePending(b.build(), 7, 99);
    const placed = d.plan.changes.map((c) => c.kind === 'put' && (c.doc as unknown as TaskRecord));
    expect(placed.map((t) => t && [t.id, t.assignedTerm, t.observed, t.assignedAt])).toEqual([['p1', 7, 'assigned', 99], ['p2', 7, 'assigned', 99]]);
    for (const t of placed) if (t) expect(t.nodeEpoch).toBe(b.nodes.get(t.nodeId ?? '')?.value.epoch);
    expect(d.plan.compares.filter((c) => c.path === 'epoch').length).toBe(2);
  });

  it('leaves a task pending with the reason when nothing fits', () => {
    const b = three('resources: {reservations: {memory: 64Gi}}').task({ id: 'p1', service: 'web', slot: 1 });
    const d = placePending(b.build(), 1, 5);
    expect(d.plan.changes.map((c) => c.kind === 'put' && (c.doc as unknown as TaskRecord).pendingReason)).toEqual([expect.stringMatching(/memory/)]);
  });
});
