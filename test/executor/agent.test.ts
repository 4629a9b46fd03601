// The agent against the memory runtime, with a fake store: every behaviour of docs/agent.md.
// Time is a ManualClock; assertions are on what happened, never on how long it took to happen.

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { containerLabels } from '../../src/executor/labels.ts';
import { runtimeSettingsNone, type ContainerSpec } from '../../src/executor/runtime.ts';
import { FakeStore, MemoryLog, run, spec, startAgent, clusterId } from './harness.ts';

function setup(images = ['busybox:local']) {
  const clock = new ManualClock();
  const store = new FakeStore(clock);
  const runtime = new MemoryRuntime({ clock, images });
  const log = new MemoryLog();
  store.addNode('n1');
  return { clock, store, runtime, log };
}

const ofTask = (taskId: string) => (s: ContainerSpec) => s.labels['io.shoal.task'] === taskId;

function eventsOf(runtime: MemoryRuntime, type: string, containerId?: string) {
  return runtime.history().filter((e) => e.type === type && (containerId === undefined || e.containerId === containerId));
}

/** A ContainerSpec made by hand (what an earlier agent, or someone else, created). */
function handMade(name: string, labels: Record<string, string>): ContainerSpec {
  return {
    name, image: 'busybox:local', command: null, args: null, env: {}, user: null, labels,
    limits: { cpuMillis: null, memoryBytes: null }, ports: [], mounts: [], devices: [], capAdd: [], capDrop: [], privileged: false,
    hostNetwork: false, networks: [], dns: [], settings: runtimeSettingsNone(), healthCheck: null, stopSignal: 'SIGTERM', stopGracePeriodMs: 1000, logs: { maxSizeBytes: 1, maxFiles: 1 },
  };
}

/** A container of task `taskId` (service web, slot 1) as an earlier agent left it: created, and started unless `started` is false. */
async function leftover(runtime: MemoryRuntime, taskId: string, epoch: number, nodeId = 'n1', started = true): Promise<string> {
  const labels = containerLabels({ clusterId, nodeId, service: 'web', slot: 1, taskId, specVersion: 1, term: 1, nodeEpoch: epoch });
  const id = await runtime.create(handMade(`shoal-web.1.${taskId}`, labels));
  if (started) await runtime.start(id);
  return id;
}

describe('agent: starting tasks', () => {
  it('creates and starts a container per assigned task, labelled, and reports them running in one batched write', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    store.assign('t2', 'web', 'n1');
    store.assign('t3', 'web', 'n2');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const mine = runtime.all();
    expect(mine.map((c) => [c.labels['io.shoal.task'], c.state, c.name])).toEqual([['t1', 'running', 'shoal-web.1.t1'], ['t2', 'running', 'shoal-web.2.t2']]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running', containerId: mine[0]?.id, nodeEpoch: 0, nodeId: 'n1' });
    expect(store.statuses.get('t2')).toMatchObject({ state: 'running', containerId: mine[1]?.id });
    expect(store.statuses.has('t3')).toBe(false);
    expect(store.writes[0]?.statuses.map((s) => s.taskId)).toEqual(['t1', 't2']);
    expect(store.runtimeWrites).toEqual([{ nodeId: 'n1', status: 'up', error: null, kind: 'memory' }]);
    expect(agent.state()).toMatchObject({ runtime: 'up', opsInFlight: 0, reportsPending: 0 });
    await agent.close();
  });

  it('writes at most once per 200 ms, coalescing reports per task', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    for (let i = 1; i <= 20; i++) store.assign(`t${i}`, 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { opsConcurrentMax: 3 });
    await run(clock, 5000);
    expect([...store.statuses.values()].filter((s) => s.state === 'running')).toHaveLength(20);
    for (let i = 1; i < store.writes.length; i++) expect(store.writes[i]!.atMs - store.writes[i - 1]!.atMs).toBeGreaterThanOrEqual(200);
    // 20 tasks, each reported starting then running: far fewer writes than reports.
    expect(store.writes.length).toBeLessThan(20);
    expect(runtime.all()).toHaveLength(20);
    await agent.close();
  });

  it('retries a failed write with backoff and keeps only the newest report of a task', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.failWrites = { code: 'timeout', times: 3 };
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 10_000);
    expect(store.writeAttempts).toBe(4);
    expect(store.writes).toHaveLength(1);
    expect(store.writes[0]?.statuses).toMatchObject([{ taskId: 't1', state: 'running' }]);
    expect(log.matching(/writing 1 task reports failed/)).toHaveLength(1);
    await agent.close();
  });
});

describe('agent: adoption after a restart of shoal', () => {
  it('adopts running containers of current tasks: same ids, never restarted', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    store.assign('t2', 'web', 'n1');
    const first = startAgent(store, runtime, log);
    await run(clock, 1000);
    const before = runtime.all();
    await first.close();
    const writes = store.writes.length;
    const second = startAgent(store, runtime, log);
    await run(clock, 30_000);
    expect(runtime.all()).toEqual(before);
    expect(eventsOf(runtime, 'start')).toHaveLength(2);
    expect(eventsOf(runtime, 'create')).toHaveLength(2);
    expect(eventsOf(runtime, 'die')).toHaveLength(0);
    expect(store.writes.length).toBe(writes);
    await second.close();
  });

  it('does not remove a container of a task its lagging store has not applied yet: it catches up first, then adopts it', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const first = startAgent(store, runtime, log);
    await run(clock, 1000);
    const [c] = runtime.all();
    await first.close();
    // After a restart the applied store is behind what the node did: t1 is not in it yet.
    store.lagging.add('t1');
    store.holdBarrier();
    const second = startAgent(store, runtime, log);
    await run(clock, 5000);
    expect(runtime.all()).toEqual([c]);
    store.releaseBarrier();
    await run(clock, 5000);
    expect(runtime.all()).toEqual([c]);
    expect(eventsOf(runtime, 'destroy')).toHaveLength(0);
    expect(log.matching(/removed container/)).toEqual([]);
    await second.close();
  });

  it('starts a container created but never started (shoal stopped between create and start)', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const id = await leftover(runtime, 't1', 0, 'n1', false);
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    expect(runtime.all()).toMatchObject([{ id, state: 'running' }]);
    expect(eventsOf(runtime, 'create')).toHaveLength(1);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running', containerId: id });
    await agent.close();
  });
});

describe('agent: epochs', () => {
  it('removes stale-epoch containers only after catching up, and before it starts anything new', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    // It ignores SIGTERM, so its stop takes the whole grace period: a start must wait for it.
    runtime.program(ofTask('t-old'), { ignoresStopSignal: true });
    const old = await leftover(runtime, 't-old', 0);
    store.assign('t-old', 'web', 'n1', { nodeEpoch: 0 });
    store.raiseEpoch('n1');
    store.assign('t-new', 'web', 'n1');
    store.holdBarrier();
    const agent = startAgent(store, runtime, log);
    await run(clock, 5000);
    expect(runtime.all().map((c) => [c.id, c.state])).toEqual([[old, 'running']]);
    store.releaseBarrier();
    await run(clock, 15_000);
    const mine = runtime.all();
    expect(mine.map((c) => c.labels['io.shoal.task'])).toEqual(['t-new']);
    expect(mine[0]?.labels['io.shoal.node-epoch']).toBe('1');
    const h = runtime.history();
    const destroyedAt = h.findIndex((e) => e.type === 'destroy' && e.containerId === old);
    const createdAt = h.findIndex((e) => e.type === 'create' && e.containerId === mine[0]?.id);
    expect(destroyedAt).toBeGreaterThanOrEqual(0);
    expect(createdAt).toBeGreaterThan(destroyedAt);
    expect(log.matching(/removed container shoal-web\.1\.t-old .*epoch 0 and the node is in epoch 1/)).toHaveLength(1);
    // The old task is not reported: the leader has replaced it.
    expect(store.statuses.has('t-old')).toBe(false);
    await agent.close();
  });

  it('drops reports the writer refuses as stale_epoch, without retrying them, then removes the stale container', async () => {
    const { clock, store, runtime, log } = setup();
    runtime.program(() => true, { health: 'hold' });
    store.addService(spec({ command: ['sleep', '3600'], healthCheck: { command: ['true'] } }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { resyncIntervalMs: 1e9 });
    await run(clock, 1000);
    const [c] = runtime.all();
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting' });
    // The leader declared the node down; its applied store has not seen that yet.
    store.freezeNodeView('n1');
    store.raiseEpoch('n1');
    const attempts = store.writeAttempts;
    runtime.setHealth(c!.id, 'healthy');
    await run(clock, 5000);
    expect(store.writeAttempts).toBe(attempts + 1);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting' });
    expect(log.matching(/1 task reports of epoch 0 dropped: the node's epoch was raised/)).toHaveLength(1);
    store.thawNodeView('n1');
    await run(clock, 5000);
    expect(runtime.all()).toEqual([]);
    expect(store.writeAttempts).toBe(attempts + 1);
    await agent.close();
  });
});

describe('agent: removal', () => {
  // Issue 40: a rolling update's replacement image is pulled before the old task stops.
  it('pulls the image of the spec that replaces a task before it stops the task, so the slot is not down for the download', async () => {
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    const runtime = new MemoryRuntime({ clock, images: ['busybox:local'], pullable: ['app:2'], pullDelayMs: 5_000 });
    const log = new MemoryLog();
    store.addNode('n1');
    const v1 = spec({ command: ['sleep', '3600'] });
    const service = store.addService(v1);
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const [c] = runtime.all();
    // The update: spec version 2 runs another image; the leader shuts the old task down.
    store.addService({ ...v1, image: 'app:2' }, { specVersion: 2, previousSpec: v1, previousSpecVersion: 1, createdAt: service.createdAt });
    store.update('t1', { desired: 'shutdown' });
    await run(clock, 2000);
    // Still running while the new image downloads.
    expect(runtime.all()).toMatchObject([{ id: c!.id, state: 'running' }]);
    expect(runtime.hasImage('app:2')).toBe(false);
    await run(clock, 4000);
    expect(runtime.hasImage('app:2')).toBe(true);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'shutdown' });
    expect(log.matching(/pulled app:2 before stopping task t1/)).toHaveLength(1);
    await agent.close();
  });

  // Issue 40: the replacement goes to another node (image-pulls.ts): that node pulls, the old one does not.
  it('pulls an image the leader asks for before a task of another node stops, and says so through the store with its progress', async () => {
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    const runtime = new MemoryRuntime({ clock, images: ['busybox:local'], pullable: ['app:2'], pullDelayMs: 5_000 });
    const log = new MemoryLog();
    store.addNode('n1');
    store.addNode('n2');
    const agent = startAgent(store, runtime, log, 'n2', { pullTimeoutMs: 10_000 });
    await run(clock, 500);
    store.askPull('t1', 'n2', 'app:2');
    await run(clock, 2_000);
    expect(store.imagePulls.get('t1')).toMatchObject({ state: 'pulling', message: expect.stringMatching(/^pulling app:2: /) });
    expect(runtime.hasImage('app:2')).toBe(false);
    await run(clock, 4_000);
    expect(runtime.hasImage('app:2')).toBe(true);
    expect(store.imagePulls.get('t1')).toMatchObject({ state: 'present', message: null });
    // Answered once: not pulled again while the request stays.
    const reports = store.imagePullReports.length;
    await run(clock, 3_000);
    expect(store.imagePullReports).toHaveLength(reports);
    // One it cannot pull is answered `failed` with the reason: the leader's stop goes on.
    store.askPull('t2', 'n2', 'absent/app:3');
    await run(clock, 12_000);
    expect(store.imagePulls.get('t2')).toMatchObject({ state: 'failed', message: expect.stringContaining('absent/app:3') });
    await agent.close();
  });

  it('does not pull before the stop a replacement image that another node pulls', async () => {
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    const runtime = new MemoryRuntime({ clock, images: ['busybox:local'], pullable: ['app:2'], pullDelayMs: 5_000 });
    const log = new MemoryLog();
    store.addNode('n1');
    store.addNode('n2');
    const v1 = spec({ command: ['sleep', '3600'] });
    const service = store.addService(v1);
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    store.addService({ ...v1, image: 'app:2' }, { specVersion: 2, previousSpec: v1, previousSpecVersion: 1, createdAt: service.createdAt });
    store.askPull('t1', 'n2', 'app:2');
    store.update('t1', { desired: 'shutdown' });
    await run(clock, 1000);
    expect(runtime.all()).toEqual([]);
    expect(runtime.hasImage('app:2')).toBe(false);
    expect(log.matching(/before stopping task t1/)).toEqual([]);
    await agent.close();
  });

  it('stops the task anyway when the replacement image cannot be pulled', async () => {
    const clock = new ManualClock();
    const store = new FakeStore(clock);
    const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
    const log = new MemoryLog();
    store.addNode('n1');
    const v1 = spec({ command: ['sleep', '3600'] });
    store.addService(v1);
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { pullTimeoutMs: 3_000 });
    await run(clock, 1000);
    store.addService({ ...v1, image: 'absent/app:2' }, { specVersion: 2, previousSpec: v1, previousSpecVersion: 1 });
    store.update('t1', { desired: 'shutdown' });
    await run(clock, 5000);
    expect(runtime.all()).toEqual([]);
    expect(log.matching(/pulling absent\/app:2 before stopping task t1 failed: .*; stopping it anyway/)).toHaveLength(1);
    await agent.close();
  });

  it('stops a task shut down with its stop signal and grace period, removes it and reports it shut down', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'], stopGracePeriod: '5s' }));
    runtime.program(ofTask('t1'), { ignoresStopSignal: true });
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const [c] = runtime.all();
    store.update('t1', { desired: 'shutdown' });
    await run(clock, 4000);
    expect(runtime.all()).toMatchObject([{ id: c!.id, state: 'running' }]);
    await run(clock, 2000);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'shutdown', containerId: c!.id, exitCode: 137 });
    expect(log.matching(/removed container shoal-web\.1\.t1 .*its task is shut down/)).toHaveLength(1);
    await agent.close();
  });

  it('removes containers no task claims and ones whose labels do not parse, and never touches what is not its own', async () => {
    const { clock, store, runtime, log } = setup();
    store.addNode('n2');
    store.addService(spec({ command: ['sleep', '3600'] }));
    const unclaimed = await leftover(runtime, 't-gone', 0);
    const otherNode = await leftover(runtime, 't-n2', 0, 'n2');
    store.assign('t-n2', 'web', 'n2');
    // Our cluster and node ids, the rest missing: ours to remove, not to adopt.
    const mislabelled = await runtime.create(handMade('shoal-web.9.x', { 'io.shoal.cluster': clusterId, 'io.shoal.node': 'n1', 'io.shoal.task': 'x' }));
    const foreign = await runtime.create(handMade('postgres', {}));
    const otherCluster = await runtime.create(handMade('other', { ...containerLabels({ clusterId: 'c2', nodeId: 'n1', service: 'web', slot: 1, taskId: 'y', specVersion: 1, term: 1, nodeEpoch: 0 }) }));
    const agent = startAgent(store, runtime, log);
    await run(clock, 3000);
    expect(runtime.all().map((c) => c.id).sort()).toEqual([otherNode, foreign, otherCluster].sort());
    expect(log.matching(new RegExp(`removed container .*${unclaimed}.*no task assigned to this node claims it`))).toHaveLength(1);
    expect(log.matching(new RegExp(`removed container shoal-web.9.x \\(${mislabelled}\\): its labels do not parse`))).toHaveLength(1);
    await agent.close();
  });

  it('two agents on one runtime keep to their own containers', async () => {
    const { clock, store, runtime, log } = setup();
    store.addNode('n2');
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('a', 'web', 'n1');
    store.assign('b', 'web', 'n2');
    const a1 = startAgent(store, runtime, log, 'n1');
    const a2 = startAgent(store, runtime, log, 'n2');
    await run(clock, 2000);
    expect(runtime.all().map((c) => [c.labels['io.shoal.task'], c.labels['io.shoal.node'], c.state])).toEqual([['a', 'n1', 'running'], ['b', 'n2', 'running']]);
    store.update('a', { desired: 'shutdown' });
    await run(clock, 2000);
    expect(runtime.all().map((c) => c.labels['io.shoal.task'])).toEqual(['b']);
    expect(eventsOf(runtime, 'die')).toHaveLength(1);
    await a1.close();
    await a2.close();
  });
});

describe('agent: without a quorum', () => {
  it('keeps running containers, removes nothing and starts nothing new', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    store.assign('t2', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const before = runtime.all();
    store.quorum = false;
    store.update('t1', { desired: 'shutdown' });
    store.tasks.delete('t2');
    store.assign('t3', 'web', 'n1');
    await run(clock, 60_000);
    expect(runtime.all()).toEqual(before);
    expect(agent.state().lastQuorum).toBe('no');
    expect(log.matching(/cannot catch up with the leader/)).toHaveLength(1);
    store.quorum = true;
    await run(clock, 15_000);
    expect(runtime.all().map((c) => c.labels['io.shoal.task'])).toEqual(['t3']);
    await agent.close();
  });

  it('restarts an exited container of its own under the restart policy, with backoff', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'], restart: { condition: 'on-failure', delay: '1s', maxDelay: '4s' } }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const [c] = runtime.all();
    store.quorum = false;
    runtime.exit(c!.id, 3);
    await run(clock, 500);
    expect(runtime.all()[0]?.state).toBe('exited');
    await run(clock, 600);
    expect(runtime.all()).toMatchObject([{ id: c!.id, state: 'running' }]);
    // The second exit waits twice as long.
    runtime.exit(c!.id, 3);
    await run(clock, 1500);
    expect(runtime.all()[0]?.state).toBe('exited');
    await run(clock, 600);
    expect(runtime.all()[0]?.state).toBe('running');
    expect(eventsOf(runtime, 'start', c!.id)).toHaveLength(3);
    expect(eventsOf(runtime, 'create')).toHaveLength(1);
    // Quorum back: what the leader hears is the container running again.
    store.quorum = true;
    await run(clock, 12_000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running', containerId: c!.id });
    await agent.close();
  });

  it('does not restart when the policy says not to (exit 0 under on-failure)', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'], restart: { condition: 'on-failure', delay: '1s' } }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const [c] = runtime.all();
    store.quorum = false;
    runtime.exit(c!.id, 0);
    await run(clock, 20_000);
    expect(runtime.all()[0]?.state).toBe('exited');
    store.quorum = true;
    await run(clock, 12_000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', exitCode: 0, message: 'exited with code 0' });
    await agent.close();
  });

  it('with a quorum, reports a failed task and leaves its replacement to the leader', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'], restart: { condition: 'always', delay: '1s' } }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    const [c] = runtime.all();
    runtime.exit(c!.id, 1, { oom: true });
    await run(clock, 30_000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', exitCode: 1, containerId: c!.id, message: 'exited with code 1: OOM-killed' });
    expect(eventsOf(runtime, 'start')).toHaveLength(1);
    // Losing the quorum after the failure was written changes nothing: the leader owns it.
    store.quorum = false;
    await run(clock, 30_000);
    expect(eventsOf(runtime, 'start')).toHaveLength(1);
    await agent.close();
  });
});

describe('agent: images', () => {
  it('fails a task whose image cannot be pulled with image_pull_failed, once, and stays up', async () => {
    const { clock, store, runtime, log } = setup([]);
    store.addService(spec({ image: 'registry.invalid/app:1', command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { pullTimeoutMs: 5000 });
    await run(clock, 4000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting' });
    await run(clock, 2000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', containerId: null, exitCode: null });
    expect(store.statuses.get('t1')?.message).toMatch(/^image_pull_failed: pulling registry\.invalid\/app:1/);
    await run(clock, 30_000);
    expect(runtime.all()).toEqual([]);
    expect(log.matching(/did not start/)).toHaveLength(1);
    expect(agent.state().runtime).toBe('up');
    await agent.close();
  });

  it('pulls an image a registry has', async () => {
    const { clock, store, runtime, log } = setup([]);
    runtime.allowPull('busybox:local');
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 1000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running' });
    await agent.close();
  });

  it('fails a task whose container does not start with the runtime\'s words', async () => {
    const { clock, store, runtime, log } = setup();
    runtime.program(ofTask('t1'), { startError: 'error gathering device information while adding custom device "/dev/ttyUSB0": no such file or directory' });
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 5000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', containerId: runtime.all()[0]?.id });
    expect(store.statuses.get('t1')?.message).toMatch(/^start failed: error gathering device/);
    expect(eventsOf(runtime, 'start')).toHaveLength(0);
    await agent.close();
  });
});

describe('agent: health', () => {
  it('reports running only once the health check passes', async () => {
    const { clock, store, runtime, log } = setup();
    runtime.program(() => true, { health: 'hold' });
    store.addService(spec({ command: ['sleep', '3600'], healthCheck: { command: ['true'], interval: '2s' } }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log);
    await run(clock, 3000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting', health: 'starting' });
    const [c] = runtime.all();
    runtime.setHealth(c!.id, 'healthy');
    await run(clock, 500);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running', health: 'healthy' });
    runtime.setHealth(c!.id, 'unhealthy');
    await run(clock, 500);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting', health: 'unhealthy', message: 'health check failing' });
    await agent.close();
  });
});

describe('agent: the runtime', () => {
  it('reports the runtime unavailable, leaves containers alone, and recovers by itself when it is back', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { resyncIntervalMs: 1e9 });
    await run(clock, 1000);
    const [c] = runtime.all();
    runtime.setUnavailable('connect ENOENT /var/run/docker.sock');
    await run(clock, 1000);
    expect(agent.state()).toMatchObject({ runtime: 'unavailable', runtimeError: 'connect ENOENT /var/run/docker.sock' });
    expect(store.nodes.get('n1')?.runtime).toEqual({ status: 'unavailable', error: 'connect ENOENT /var/run/docker.sock' });
    store.assign('t2', 'web', 'n1');
    await run(clock, 60_000);
    expect(runtime.all()).toMatchObject([{ id: c!.id, state: 'running' }]);
    runtime.setAvailable();
    await run(clock, 31_000);
    expect(agent.state().runtime).toBe('up');
    expect(store.nodes.get('n1')?.runtime).toEqual({ status: 'up', error: null });
    expect(runtime.all().map((x) => x.labels['io.shoal.task'])).toEqual(['t1', 't2']);
    // Events flow again (the slow resync is off): an exit is seen and reported.
    runtime.exit(c!.id, 2);
    await run(clock, 1000);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'failed', exitCode: 2 });
    expect(log.matching(/answers again/)).toHaveLength(1);
    await agent.close();
  });

  it('a runtime that hangs altogether is reported unavailable, and recovers once it answers', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { callTimeoutMs: 5000 });
    await run(clock, 1000);
    const hang = runtime.hang();
    store.assign('t2', 'web', 'n1');
    await run(clock, 15_000);
    expect(agent.state().runtime).toBe('unavailable');
    expect(store.nodes.get('n1')?.runtime).toEqual({ status: 'unavailable', error: 'runtime ping: no answer within 5000 ms' });
    hang.release();
    await run(clock, 60_000);
    expect(agent.state().runtime).toBe('up');
    expect(runtime.all().map((c) => [c.labels['io.shoal.task'], c.state])).toEqual([['t1', 'running'], ['t2', 'running']]);
    await agent.close();
  });

  it('a hung call holds only its own task; the call times out and the task is left alone until it settles', async () => {
    const { clock, store, runtime, log } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    const agent = startAgent(store, runtime, log, 'n1', { callTimeoutMs: 5000, stopMarginMs: 5000 });
    await run(clock, 1000);
    const [c1] = runtime.all();
    const hang = runtime.hang((call) => call.op === 'stop' && call.containerId === c1!.id);
    store.update('t1', { desired: 'shutdown' });
    store.assign('t2', 'web', 'n1');
    await run(clock, 2000);
    expect(runtime.all().map((c) => [c.labels['io.shoal.task'], c.state])).toEqual([['t1', 'running'], ['t2', 'running']]);
    expect(hang.held).toBe(1);
    await run(clock, 30_000);
    // Timed out long ago, but the stop is still held: no second stop on the same container.
    expect(hang.held).toBe(1);
    expect(log.matching(/stopping the container: no answer within/).length).toBeGreaterThanOrEqual(1);
    hang.release();
    await run(clock, 15_000);
    expect(runtime.all().map((c) => c.labels['io.shoal.task'])).toEqual(['t2']);
    // One slow call is not an unavailable runtime: the ping answered.
    expect(store.runtimeWrites.map((w) => w.status)).toEqual(['up']);
    expect(agent.state().runtime).toBe('up');
    await agent.close();
  });
});
