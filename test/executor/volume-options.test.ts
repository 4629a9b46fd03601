// A named volume with options (issue 39's compose driver_opts) on a node: the agent's container
// create makes the volume with them first; a volume of that name that exists with other options
// or another driver fails the task with volume_options_differ, naming both and what to do, and
// no container is created (Docker would keep the first options silently). Against the memory
// runtime, which holds volumes as Docker does; test/executor/docker-volumes.test.ts runs the same
// on Docker.

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { describeOptions, volumeMismatch, volumesWithOptions } from '../../src/executor/volume-options.ts';
import { FakeStore, MemoryLog, run, spec, startAgent } from './harness.ts';

const tmpfs = { type: 'tmpfs', device: 'tmpfs', o: 'size=1m' };

function setup() {
  const clock = new ManualClock();
  const store = new FakeStore(clock);
  const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
  store.addNode('n1');
  return { clock, store, runtime, log: new MemoryLog() };
}

describe('volume options on a node', () => {
  it('compares an existing volume with the options wanted: the same local ones pass, others say both and what to do', () => {
    expect(volumeMismatch('media', tmpfs, { driver: 'local', options: { o: 'size=1m', device: 'tmpfs', type: 'tmpfs' } })).toBeNull();
    const other = volumeMismatch('media', tmpfs, { driver: 'local', options: {} });
    expect(other).toBe('volume_options_differ: the volume media exists on this node with no options, and the service asks for device=tmpfs o=size=1m type=tmpfs; '
      + 'Docker keeps a volume\'s first options, so the task is not started with the wrong storage. Remove the volume on this node once no container uses it (docker volume rm media) and the task starts with a new one, or name another volume');
    expect(volumeMismatch('media', tmpfs, { driver: 'local', options: { ...tmpfs, o: 'size=2m' } })).toContain('exists on this node with device=tmpfs o=size=2m type=tmpfs,');
    expect(volumeMismatch('media', tmpfs, { driver: 'rexray', options: tmpfs })).toContain('with the driver rexray (device=tmpfs o=size=1m type=tmpfs)');
    expect(volumeMismatch('media', tmpfs, { driver: 'local', options: { ...tmpfs, size: '1' } })).not.toBeNull();
    expect(describeOptions({})).toBe('no options');
    expect([...volumesWithOptions([
      { type: 'volume', source: 'a', target: '/a', readOnly: false, volumeOptions: tmpfs },
      { type: 'volume', source: 'a', target: '/b', readOnly: true, volumeOptions: tmpfs },
      { type: 'volume', source: 'plain', target: '/p', readOnly: false },
      { type: 'bind', source: '/srv', target: '/srv', readOnly: false },
    ])]).toEqual([['a', tmpfs]]);
  });

  it('makes the volume with its options before the container, and starts the task', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'], mounts: [{ type: 'volume', source: 'scratch', target: '/scratch', volumeOptions: tmpfs }] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    expect(runtime.volume('scratch')).toEqual({ driver: 'local', options: tmpfs });
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running' });
    // A second task of the same volume on the node finds it made with the same options.
    store.assign('t2', 'web', 'n1');
    await run(clock, 1000);
    expect(store.statuses.get('t2')).toMatchObject({ state: 'running' });
    await agent.close();
  });

  it('fails the task with volume_options_differ, and creates no container, when the volume exists with other options', async () => {
    const { clock, store, runtime, log } = setup();
    runtime.addVolume('scratch', { type: 'tmpfs', device: 'tmpfs', o: 'size=64m' });
    store.addService(spec({ command: ['sleep', '3600'], mounts: [{ type: 'volume', source: 'scratch', target: '/scratch', volumeOptions: tmpfs }] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const status = store.statuses.get('t1');
    expect(status?.state).toBe('failed');
    expect(status?.message).toMatch(/^volume_options_differ: the volume scratch exists on this node with device=tmpfs o=size=64m type=tmpfs, and the service asks for device=tmpfs o=size=1m type=tmpfs; .*docker volume rm scratch/);
    expect(runtime.all()).toEqual([]);
    expect(runtime.volume('scratch')).toEqual({ driver: 'local', options: { type: 'tmpfs', device: 'tmpfs', o: 'size=64m' } });
    await agent.close();
  });

  it('leaves a volume without options to the runtime, whatever the volume of that name was made with (as before)', async () => {
    const { clock, store, runtime, log } = setup();
    runtime.addVolume('data', tmpfs);
    store.addService(spec({ command: ['sleep', '3600'], mounts: [{ type: 'volume', source: 'data', target: '/data' }] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running' });
    await agent.close();
  });
});
