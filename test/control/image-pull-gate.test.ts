// Issue 40: pull before stop when the replacement goes to another node (image-pull-gate.ts). A
// stop-first replacement bound elsewhere (a drain's move, an update the scheduler places on
// another node) waits, bounded, until that node says the image is there; the request goes
// through the store (shoal.image-pulls) and is removed once the old task has stopped.

import { describe, expect, it } from 'vitest';
import { reconcileService } from '../../src/control/orchestrator.ts';
import { replacementNode } from '../../src/control/image-pull-gate.ts';
import { withNewSpec } from '../../src/control/rolling-update.ts';
import { imagePullsCollection, imagePullWaitMs, type ImagePullRequest } from '../../src/resources/image-pulls.ts';
import type { TaskRecord } from '../../src/resources/records.ts';
import type { ControlState } from '../../src/resources/state.ts';
import { ids, specOf, StateBuilder } from './state-builder.ts';

const yaml = (extra = '', image = 'reg.lan/app:2'): string => `apiVersion: shoal/v1\nkind: Service\nname: web\nimage: ${image}\ncommand: ["sleep", "3600"]\nreplicas: 1\n${extra}`;
const ctx = (now: number) => ({ now, newTaskId: ids('n'), pullBeforeStopElsewhere: true });
const taskPut = (d: ReturnType<typeof reconcileService>, id: string): TaskRecord | undefined => {
  const c = d.plan.changes.find((x) => x.kind === 'put' && x.collection === 'shoal.tasks' && x.id === id);
  return c?.kind === 'put' ? c.doc as unknown as TaskRecord : undefined;
};
const pullChanges = (d: ReturnType<typeof reconcileService>) => d.plan.changes.filter((c) => c.collection === imagePullsCollection);

/** One replica of web on node1, which drains; node2 is free. */
function draining(): StateBuilder {
  const b = new StateBuilder().node('node1', { availability: 'drain' }).node('node2')
    .service(yaml())
    .placed('a', 'web', 1, 'node1', 'running', { observed: 'running', startedAt: 0, containerId: 'c-a' });
  return b;
}

function withPull(b: StateBuilder, over: Partial<ImagePullRequest> = {}): ControlState {
  const r: ImagePullRequest = {
    taskId: 'a', service: 'web', nodeId: 'node2', nodeEpoch: 0, image: 'reg.lan/app:2', pullsWith: 'reg.lan',
    requestedAt: 100, state: 'requested', message: null, updatedAt: 100, ...over,
  };
  return { ...b.build(), imagePulls: new Map([['a', { value: r, rev: 77 }]]) };
}

describe('pull before stop on another node', () => {
  it('a drain\'s stop-first move asks the node the replacement goes to for the image, and keeps the old task running meanwhile', () => {
    const d = reconcileService(draining().build(), 'web', ctx(100));
    expect(taskPut(d, 'a')).toBeUndefined();
    expect(pullChanges(d)).toEqual([{
      kind: 'put', collection: imagePullsCollection, id: 'a', expect: { absent: true },
      doc: { taskId: 'a', service: 'web', nodeId: 'node2', nodeEpoch: 0, image: 'reg.lan/app:2', pullsWith: 'reg.lan', requestedAt: 100, state: 'requested', message: null, updatedAt: 100 },
    }]);
    // Woken when the wait would run out.
    expect(d.wakeInMs).toBe(imagePullWaitMs);
  });

  it('waits while the node pulls, and stops the old task once it says the image is there (or failed); the request stays while it stops', () => {
    const b = draining();
    for (const state of ['requested', 'pulling'] as const) {
      const d = reconcileService(withPull(b, { state }), 'web', ctx(5_000));
      expect(taskPut(d, 'a')).toBeUndefined();
      expect(pullChanges(d)).toEqual([]);
    }
    for (const state of ['present', 'failed'] as const) {
      const d = reconcileService(withPull(b, { state }), 'web', ctx(5_000));
      expect(taskPut(d, 'a')).toMatchObject({ desired: 'shutdown', message: 'its node n1 is draining' });
      expect(pullChanges(d)).toEqual([]);
    }
  });

  it('does not wait longer than imagePullWaitMs, nor for a node no longer ready or of another epoch', () => {
    const b = draining();
    expect(taskPut(reconcileService(withPull(b), 'web', ctx(100 + imagePullWaitMs)), 'a')).toMatchObject({ desired: 'shutdown' });
    expect(taskPut(reconcileService(withPull(b, { nodeEpoch: 3 }), 'web', ctx(200)), 'a')).toMatchObject({ desired: 'shutdown' });
    const n2 = b.nodes.get('node2');
    if (n2) n2.value = { ...n2.value, availability: 'pause' };
    expect(taskPut(reconcileService(withPull(b), 'web', ctx(200)), 'a')).toMatchObject({ desired: 'shutdown' });
    if (n2) n2.value = { ...n2.value, availability: 'active', state: 'suspect' };
    expect(taskPut(reconcileService(withPull(b), 'web', ctx(200)), 'a')).toMatchObject({ desired: 'shutdown' });
  });

  it('removes the request once the old task has stopped', () => {
    const b = draining();
    const t = b.tasks.get('a');
    if (t) t.value = { ...t.value, desired: 'shutdown' };
    const st = b.statuses.get('a');
    if (st) st.value = { ...st.value, state: 'shutdown' };
    const d = reconcileService(withPull(b, { state: 'present' }), 'web', ctx(300));
    expect(pullChanges(d)).toEqual([{ kind: 'delete', collection: imagePullsCollection, id: 'a', expect: { rev: 77 } }]);
  });

  it('a rolling update whose replacement the scheduler places elsewhere waits too; one placed on the same node does not (its agent pulls before the stop)', () => {
    // node1 is full for the new spec's memory, node2 has room: the replacement goes to node2.
    const v1 = specOf(yaml('resources: {reservations: {memory: 1Gi}}\n', 'busybox:local'));
    const v2 = specOf(yaml('resources: {reservations: {memory: 6Gi}}\n'));
    const b = new StateBuilder().node('node1', { capacity: { cpuMillis: 4000, memoryBytes: 4 * 2 ** 30 } }).node('node2', { capacity: { cpuMillis: 4000, memoryBytes: 16 * 2 ** 30 } })
      .service(yaml('resources: {reservations: {memory: 1Gi}}\n', 'busybox:local'))
      .placed('a', 'web', 1, 'node1', 'running', { observed: 'running', startedAt: 0, containerId: 'c-a' });
    const svc = b.services.get('web');
    if (svc) svc.value = withNewSpec({ ...svc.value, spec: v1 }, v2, true, 10);
    expect(replacementNode(b.build(), b.services.get('web')!.value, b.tasks.get('a')!.value, 2)).toBe('node2');
    const d = reconcileService(b.build(), 'web', ctx(100));
    expect(taskPut(d, 'a')).toBeUndefined();
    expect(pullChanges(d).map((c) => (c.kind === 'put' ? (c.doc as unknown as ImagePullRequest).nodeId : c.kind))).toEqual(['node2']);
    // The same update with room on node1: it stays there, and nothing waits.
    const roomy = new StateBuilder().node('node1').node('node2')
      .service(yaml('', 'busybox:local'))
      .placed('a', 'web', 1, 'node1', 'running', { observed: 'running', startedAt: 0, containerId: 'c-a' })
      .placed('x', 'other', 1, 'node2', 'running', { observed: 'running', startedAt: 0 });
    const s2 = roomy.services.get('web');
    if (s2) s2.value = withNewSpec(s2.value, { ...s2.value.spec, image: 'reg.lan/app:2' }, true, 10);
    const same = reconcileService(roomy.build(), 'web', ctx(100));
    expect(taskPut(same, 'a')).toMatchObject({ desired: 'shutdown' });
    expect(pullChanges(same)).toEqual([]);
  });

  it('without the feature level that reads the requests, the stop goes on at once', () => {
    const d = reconcileService(draining().build(), 'web', { now: 100, newTaskId: ids('n') });
    expect(taskPut(d, 'a')).toMatchObject({ desired: 'shutdown' });
    expect(pullChanges(d)).toEqual([]);
  });
});
