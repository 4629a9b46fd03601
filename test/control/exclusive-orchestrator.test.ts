// The leader's rule for exclusive services (src/resources/lease.ts): a task whose node was lost is
// replaced only once the lease rule says it is surely dead; until then the slot stays empty.

import { describe, expect, it } from 'vitest';
import { leaseDefaults, leaseMarginMs, replaceAfterMs } from '../../src/resources/lease.ts';
import { reconcileService } from '../../src/control/orchestrator.ts';
import type { TaskRecord } from '../../src/resources/records.ts';
import { ids, serviceYaml, StateBuilder } from './state-builder.ts';

const put = (d: ReturnType<typeof reconcileService>) => d.plan.changes.filter((c) => c.kind === 'put').map((c) => c.doc as unknown as TaskRecord);

function lostNode(extra = 'exclusive: true'): StateBuilder {
  const b = new StateBuilder().node('node1').node('node2').service(serviceYaml('db', extra).replace('replicas: 3', 'replicas: 1'))
    .placed('a', 'db', 1, 'node1', 'running', { observed: 'running', startedAt: 0, containerId: 'c-a' });
  const n1 = b.nodes.get('node1');
  if (n1) n1.value = { ...n1.value, state: 'down', epoch: 1 };
  return b;
}

describe('exclusive services: the leader\'s rule', () => {
  it('the margin is 2ρ·lease + kill time + stop-report allowance, and the defaults recover within 30 s', () => {
    expect(leaseMarginMs({ leaseMs: 10_000, driftRho: 0.01, killMs: 2_000, stopReportMs: 1_000 })).toBe(3_200);
    expect(replaceAfterMs(leaseDefaults)).toBeLessThanOrEqual(15_000);
  });

  it('an orphaned exclusive task is not replaced while its lease may hold; the pass wakes when it cannot', () => {
    const b = lostNode();
    const asked: [string, number][] = [];
    const d = reconcileService(b.build(), 'db', { now: 50, newTaskId: ids('n'), exclusiveClearInMs: (n, e) => { asked.push([n, e]); return 4_000; } });
    expect(put(d).find((t) => t.id === 'a')).toMatchObject({ observed: 'orphaned', desired: 'shutdown' });
    expect(put(d).filter((t) => t.id !== 'a')).toEqual([]);
    expect(asked).toContainEqual(['node1', 0]);
    expect(d.wakeInMs).toBe(4_000);
    b.apply(d.plan);
    const later = reconcileService(b.build(), 'db', { now: 4_050, newTaskId: ids('m'), exclusiveClearInMs: () => 0 });
    expect(put(later).find((t) => t.id !== 'a')).toMatchObject({ slot: 1, observed: 'pending' });
  });

  it('without the lease rule an orphaned exclusive task is never replaced; a plain service is at once', () => {
    expect(put(reconcileService(lostNode().build(), 'db', { now: 50, newTaskId: ids('n') })).filter((t) => t.id !== 'a')).toEqual([]);
    expect(put(reconcileService(lostNode('').build(), 'db', { now: 50, newTaskId: ids('n') })).filter((t) => t.id !== 'a')).toHaveLength(1);
  });

  it('a failed exclusive task (its exit reported) is replaced without waiting', () => {
    const b = new StateBuilder().node('node1').service(serviceYaml('db', 'exclusive: true\nrestart: {delay: 0s}').replace('replicas: 3', 'replicas: 1'))
      .placed('a', 'db', 1, 'node1', 'failed', { observed: 'running', startedAt: 0 });
    const d = reconcileService(b.build(), 'db', { now: 50, newTaskId: ids('n'), exclusiveClearInMs: () => 10_000 });
    expect(put(d).find((t) => t.id !== 'a')).toMatchObject({ slot: 1, observed: 'pending' });
  });
});
