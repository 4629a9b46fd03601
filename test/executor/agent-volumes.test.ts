// The agent with replicated volumes (issue 41): before it creates the container of a task with
// a replicated mount it asks its TaskVolumes port; the task waits (starting, with the reason)
// until the volume is ready for this node's era, then runs with the mount bound to the live
// volume; a lost copy fails the start. Memory runtime, fake store, fake port.

import { describe, expect, it } from 'vitest';
import { Agent } from '../../src/executor/agent.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import type { TaskVolumes, VolumeAnswer } from '../../src/executor/volumes/task-volumes.ts';
import type { MountSpec } from '../../src/resources/spec/service-spec.ts';
import { clusterId, FakeStore, MemoryLog, run, spec } from './harness.ts';

function setup(answer: () => VolumeAnswer) {
  const clock = new ManualClock();
  const store = new FakeStore(clock);
  const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
  const log = new MemoryLog();
  store.addNode('n1');
  const s = spec({ command: ['sleep', '3600'], mounts: [{ type: 'volume', source: 'pgdata', target: '/data' }] });
  // The reader allows replicate only on an exclusive service; the agent's hook does not depend on it.
  store.addService({ ...s, mounts: s.mounts.map((m) => ({ ...m, replicate: { copies: 2, everyMs: 30_000, sizeBytes: 1 << 30 } })) });
  store.assign('t1', 'web', 'n1');
  const asked: { node: { id: string; epoch: number }; mounts: readonly MountSpec[] }[] = [];
  const volumes: TaskVolumes = { prepare: async (node, mounts) => { asked.push({ node, mounts }); return answer(); } };
  const agent = new Agent({
    owner: { clusterId, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(), runtime, clock, log, volumes,
  });
  agent.start();
  return { clock, store, runtime, agent, asked };
}

const bound: MountSpec = { type: 'bind', source: '/var/lib/shoal/volumes/pgdata/mnt/live', target: '/data', readOnly: false };

describe('agent: replicated volumes', () => {
  it('waits, saying why, until the volume is ready for this node\'s era; then binds the live volume', async () => {
    let answer: VolumeAnswer = { ok: false, wait: true, message: 'waiting for volume pgdata\'s record to name this node (epoch 0) its writer' };
    const { clock, store, runtime, agent, asked } = setup(() => answer);
    await run(clock, 1000);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting', message: answer.ok ? null : answer.message });
    expect(asked[0]?.node).toEqual({ id: 'n1', epoch: 0 });
    expect(asked[0]?.mounts[0]).toMatchObject({ type: 'volume', source: 'pgdata', replicate: { copies: 2 } });
    answer = { ok: true, mounts: [bound] };
    await run(clock, 5000);
    const [c] = runtime.all();
    expect(c?.state).toBe('running');
    expect(runtime.specOf(c?.id ?? '')?.mounts).toEqual([bound]);
    await agent.close();
  });

  it('fails the start when this node lost the copy its era restores', async () => {
    const { clock, store, runtime, agent } = setup(() => ({ ok: false, wait: false, message: 'volume_no_copy: volume pgdata: this node does not hold version s3-e0-n2' }));
    await run(clock, 1000);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', message: expect.stringMatching(/volume_no_copy/) });
    await agent.close();
  });
});
