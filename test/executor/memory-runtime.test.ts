// The memory runtime behaves as the port says, and its faults happen when told, by the clock.

import { describe, expect, it } from 'vitest';
import { containerLabels } from '../../src/executor/labels.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime, killedExitCode } from '../../src/executor/memory-runtime.ts';
import { runtimeSettingsNone, RuntimeError, type ContainerSpec, type RuntimeEvent } from '../../src/executor/runtime.ts';
import { flush } from './harness.ts';

function cspec(name: string, o: Partial<ContainerSpec> = {}): ContainerSpec {
  return {
    name, image: 'busybox:local', command: null, args: null, env: {}, user: null,
    labels: containerLabels({ clusterId: 'c1', nodeId: 'n1', service: 'web', slot: 1, taskId: name, specVersion: 1, term: 1, nodeEpoch: 0 }),
    limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 1000, logs: { maxSizeBytes: 1, maxFiles: 1 }, ...o,
  };
}

function setup() {
  const clock = new ManualClock();
  const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
  return { clock, runtime };
}

async function rejection(p: Promise<unknown>): Promise<RuntimeError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof RuntimeError) return err;
    throw err;
  }
  throw new Error('expected a rejection');
}

describe('MemoryRuntime: the lifecycle', () => {
  it('creates, starts, stops and removes, stamping times from the clock and emitting an event for each change', async () => {
    const { clock, runtime } = setup();
    const seen: RuntimeEvent[] = [];
    runtime.events({ 'io.shoal.node': 'n1' }, (e) => seen.push(e), () => undefined);
    const id = await runtime.create(cspec('a'));
    expect(await runtime.inspect(id)).toMatchObject({ id, name: 'a', state: 'created', startedAt: null });
    clock.advance(1000);
    await runtime.start(id);
    expect(await runtime.inspect(id)).toMatchObject({ state: 'running', startedAt: clock.wallNow() });
    clock.advance(1000);
    await runtime.stop(id, { signal: 'SIGTERM', graceMs: 5000 });
    expect(await runtime.inspect(id)).toMatchObject({ state: 'exited', exitCode: 0, finishedAt: clock.wallNow() });
    await runtime.stop(id, { signal: 'SIGTERM', graceMs: 5000 });
    await runtime.remove(id);
    await runtime.remove(id);
    expect(await runtime.inspect(id)).toBeUndefined();
    await flush();
    expect(seen.map((e) => e.type)).toEqual(['create', 'start', 'die', 'destroy']);
    expect(seen[2]).toMatchObject({ exitCode: 0, containerId: id });
  });

  it('refuses a second container of one name, a missing image, and calls on a container that does not exist', async () => {
    const { runtime } = setup();
    await runtime.create(cspec('a'));
    expect((await rejection(runtime.create(cspec('a')))).message).toMatch(/already in use/);
    expect(await rejection(runtime.create(cspec('b', { image: 'nope:1' })))).toMatchObject({ kind: 'failed', message: 'No such image: nope:1' });
    expect(await rejection(runtime.start('missing'))).toMatchObject({ kind: 'not_found' });
    expect(await rejection(runtime.stop('missing', { signal: 'SIGTERM', graceMs: 1 }))).toMatchObject({ kind: 'not_found' });
  });

  it('lists by labels, so nodes sharing it see only their own', async () => {
    const { runtime } = setup();
    const a = await runtime.create(cspec('a'));
    await runtime.create(cspec('b', { labels: { ...cspec('b').labels, 'io.shoal.node': 'n2' } }));
    expect((await runtime.list({ 'io.shoal.node': 'n1' })).map((c) => c.id)).toEqual([a]);
    expect(await runtime.list({})).toHaveLength(2);
  });

  it('gives deterministic ids and the same history for the same inputs', async () => {
    const once = async () => {
      const { clock, runtime } = setup();
      runtime.program(() => true, { exitAfterMs: 50, exitCode: 4 });
      for (const n of ['a', 'b']) await runtime.start(await runtime.create(cspec(n)));
      clock.advance(100);
      return runtime.history();
    };
    expect(await once()).toEqual(await once());
  });
});

describe('MemoryRuntime: injected behaviour', () => {
  it('exits by itself after a delay with a code, and again after each start', async () => {
    const { clock, runtime } = setup();
    runtime.program((s) => s.name === 'a', { exitAfterMs: 500, exitCode: 3 });
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    clock.advance(499);
    expect((await runtime.inspect(id))?.state).toBe('running');
    clock.advance(1);
    expect(await runtime.inspect(id)).toMatchObject({ state: 'exited', exitCode: 3 });
    await runtime.start(id);
    clock.advance(500);
    expect(runtime.history().filter((e) => e.type === 'die').map((e) => e.exitCode)).toEqual([3, 3]);
  });

  it('exits on command, as OOM-killed when told', async () => {
    const { runtime } = setup();
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    runtime.exit(id, 137, { oom: true });
    expect(await runtime.inspect(id)).toMatchObject({ state: 'exited', exitCode: 137, error: 'OOM-killed' });
    expect(runtime.history().map((e) => e.type)).toEqual(['create', 'start', 'oom', 'die']);
  });

  it('a container that ignores its stop signal is killed after the grace period', async () => {
    const { clock, runtime } = setup();
    runtime.program(() => true, { ignoresStopSignal: true });
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    let stopped = false;
    const stop = runtime.stop(id, { signal: 'SIGTERM', graceMs: 2000 }).then(() => { stopped = true; });
    await flush();
    clock.advance(1999);
    await flush();
    expect(stopped).toBe(false);
    clock.advance(1);
    await stop;
    expect(await runtime.inspect(id)).toMatchObject({ state: 'exited', exitCode: killedExitCode });
  });

  it('fails a start with the injected error', async () => {
    const { runtime } = setup();
    runtime.program(() => true, { startError: 'invalid mount config' });
    const id = await runtime.create(cspec('a'));
    expect(await rejection(runtime.start(id))).toMatchObject({ kind: 'failed', message: 'invalid mount config' });
    expect(await runtime.inspect(id)).toMatchObject({ state: 'created', error: 'invalid mount config' });
  });

  it('runs health checks that pass, fail, or wait for a verdict', async () => {
    const { clock, runtime } = setup();
    const healthCheck = { command: ['true'], intervalMs: 1000, timeoutMs: 500, retries: 3, startPeriodMs: 2000 };
    runtime.program((s) => s.name === 'bad', { health: 'fail' });
    runtime.program((s) => s.name === 'held', { health: 'hold' });
    const ids: Record<string, string> = {};
    for (const n of ['good', 'bad', 'held']) {
      ids[n] = await runtime.create(cspec(n, { healthCheck }));
      await runtime.start(ids[n]!);
    }
    expect((await runtime.inspect(ids['good']!))?.health).toBe('starting');
    clock.advance(1000);
    expect((await runtime.inspect(ids['good']!))?.health).toBe('healthy');
    clock.advance(4000);
    expect((await runtime.inspect(ids['bad']!))?.health).toBe('unhealthy');
    expect((await runtime.inspect(ids['held']!))?.health).toBe('starting');
    runtime.setHealth(ids['held']!, 'healthy');
    expect((await runtime.inspect(ids['held']!))?.health).toBe('healthy');
    expect(runtime.history().filter((e) => e.type === 'health').map((e) => e.health)).toEqual(['healthy', 'unhealthy', 'healthy']);
  });

  it('a container without a health check has no health', async () => {
    const { runtime } = setup();
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    expect((await runtime.inspect(id))?.health).toBeNull();
  });
});

describe('MemoryRuntime: images', () => {
  it('has preloaded images at once, pulls pullable ones after a delay, and fails absent ones at the timeout', async () => {
    const clock = new ManualClock();
    const runtime = new MemoryRuntime({ clock, images: ['here:1'], pullable: ['there:1'], pullDelayMs: 300 });
    await runtime.ensureImage('here:1', 1000);
    let pulled = false;
    const pull = runtime.ensureImage('there:1', 1000).then(() => { pulled = true; });
    await flush();
    clock.advance(299);
    await flush();
    expect(pulled).toBe(false);
    clock.advance(1);
    await pull;
    expect(runtime.hasImage('there:1')).toBe(true);
    let failed: RuntimeError | null = null;
    const absent = runtime.ensureImage('nowhere:1', 5000).catch((e: RuntimeError) => { failed = e; });
    await flush();
    clock.advance(4999);
    await flush();
    expect(failed).toBeNull();
    clock.advance(1);
    await absent;
    expect(failed).toMatchObject({ kind: 'image_pull_failed' });
  });
});

describe('MemoryRuntime: faults of the runtime itself', () => {
  it('when unavailable, every call rejects and event streams break; containers keep running; it comes back', async () => {
    const { runtime } = setup();
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    const errors: RuntimeError[] = [];
    runtime.events({}, () => undefined, (e) => errors.push(e));
    runtime.setUnavailable('dial unix /var/run/docker.sock: connect: no such file or directory');
    await flush();
    expect(errors).toMatchObject([{ kind: 'unavailable' }]);
    expect(await rejection(runtime.ping())).toMatchObject({ kind: 'unavailable', message: /docker\.sock/ });
    expect(await rejection(runtime.list({}))).toMatchObject({ kind: 'unavailable' });
    const late: RuntimeError[] = [];
    runtime.events({}, () => undefined, (e) => late.push(e));
    await flush();
    expect(late).toHaveLength(1);
    runtime.setAvailable();
    await runtime.ping();
    expect(await runtime.inspect(id)).toMatchObject({ state: 'running' });
  });

  it('a hang holds matching calls until released, then they run; others pass', async () => {
    const { runtime } = setup();
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    const hang = runtime.hang((c) => c.op === 'stop');
    let done = false;
    const stop = runtime.stop(id, { signal: 'SIGTERM', graceMs: 1 }).then(() => { done = true; });
    await flush();
    expect(done).toBe(false);
    expect(hang.held).toBe(1);
    expect(await runtime.inspect(id)).toMatchObject({ state: 'running' });
    hang.release();
    await stop;
    expect(await runtime.inspect(id)).toMatchObject({ state: 'exited' });
  });

  it('close ends streams and refuses calls, leaving containers as they are', async () => {
    const { runtime } = setup();
    const id = await runtime.create(cspec('a'));
    await runtime.start(id);
    await runtime.close();
    await runtime.close();
    expect(await rejection(runtime.ping())).toMatchObject({ kind: 'unavailable' });
    expect(runtime.all()).toMatchObject([{ id, state: 'running' }]);
  });
});
