// Issue 22's scenarios 5 and 9 on a real three-process cluster running real containers on the
// machine's Docker daemon (docker-system.ts): a rolling update to a command that exits at once,
// and one to a health check that never passes. Both services say `failureAction: rollback`: the
// update stops after its first task and goes back by itself, and the service ends on its old
// spec with every replica running. Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/rolling-updates.test.ts

import { describe, expect, it } from 'vitest';
import { describeRun, runsOf, slotOverlaps } from './container-events.ts';
import { serviceDoc, withDockerSystem, type DockerSystem } from './docker-system.ts';

const policy = { parallelism: 1, monitor: '2s', failureAction: 'rollback' };

/** Applies `bad` over a converged web of 3, and checks the update rolled back after one task. */
async function expectRolledBack(sys: DockerSystem, bad: Record<string, unknown>): Promise<void> {
  const good = serviceDoc('web', { replicas: 3, update: policy });
  await sys.apply(good);
  await sys.waitConverged('web');
  const before = await sys.containers('web');

  await sys.apply({ ...good, ...bad });
  const end = await sys.waitFor('the update rolled back', async () => {
    const s = await sys.service('web');
    return s.service.record.updateStatus.state === 'rolled-back' && s.service.status.converged ? s : undefined;
  }, 90_000);
  const record = end.service.record;
  expect(record.updateStatus.message).toMatch(/^rolled back: task \S+ \(slot 1\) failed within the update's monitor/);
  // The old spec is current again (with its version), the failed one kept as the previous.
  expect(record.specVersion).toBe(1);
  expect(record.spec.command).toEqual(['sleep', '3600']);
  expect(record.spec.healthCheck).toBeNull();
  expect(record.previousSpecVersion).toBe(2);
  const running = end.tasks.filter((t) => t.desired === 'running');
  expect(running.map((t) => [t.slot, t.observed, t.record.specVersion])).toEqual([[1, 'running', 1], [2, 'running', 1], [3, 'running', 1]]);

  const now = (await sys.containers('web')).filter((c) => c.running);
  expect(now.map((c) => c.specVersion)).toEqual([1, 1, 1]);
  // Slots 2 and 3 were never touched: the update stopped after the first task.
  expect(now.filter((c) => c.slot !== '1').map((c) => c.id)).toEqual(before.filter((c) => c.slot !== '1').map((c) => c.id));
  const log = sys.events;
  if (log === undefined) throw new Error('no event log');
  await log.catchUp(sys.cluster.clusterId);
  log.assertWhole();
  const newVersion = new Set(log.events.filter((e) => e.action === 'create' && e.specVersion === 2).map((e) => e.containerId));
  expect(newVersion.size, 'containers created for spec version 2').toBe(1);
  // Stop-first, forward and back: no slot ever ran two containers at once.
  expect(slotOverlaps(runsOf(log.events), 'web').map(([a, b]) => `${describeRun(a)} / ${describeRun(b)}`)).toEqual([]);
}

describe('rolling updates that fail, on real Docker', () => {
  it('rolls back by itself an update to a command that exits at once', async () => {
    await withDockerSystem({}, async (sys) => {
      await expectRolledBack(sys, { command: ['false'] });
    });
  }, 180_000);

  it('rolls back by itself an update whose monitor waits on a health check that never passes', async () => {
    await withDockerSystem({}, async (sys) => {
      await expectRolledBack(sys, { healthCheck: { command: ['false'], interval: '500ms', timeout: '1s', retries: 1 } });
    });
  }, 180_000);
});
