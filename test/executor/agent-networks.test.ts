// The agent and overlay networks (docs/agent.md, "Networks"): a task on networks is created only
// once every address is allocated and the node's overlay is in place, with its addresses and its
// DNS server; meanwhile it is reported starting with what it waits for.

import { describe, expect, it } from 'vitest';
import { Agent } from '../../src/executor/agent.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import type { TaskNetworks, TaskNetworksAnswer } from '../../src/executor/task-networks.ts';
import { FakeStore, MemoryLog, run, spec, clusterId } from './harness.ts';

/** A TaskNetworks whose answer the test sets, and that tells the agent when it changes. */
class FakeNetworks implements TaskNetworks {
  answer: TaskNetworksAnswer = { ready: false, waiting: 'waiting for network back: the leader has not given this task an address yet' };
  asked: Array<{ taskId: string; names: readonly string[] }> = [];
  private listeners = new Set<() => void>();
  resolve(taskId: string, names: readonly string[]): TaskNetworksAnswer {
    this.asked.push({ taskId, names });
    return this.answer;
  }
  subscribe(onChange: () => void): () => void {
    this.listeners.add(onChange);
    return () => this.listeners.delete(onChange);
  }
  set(answer: TaskNetworksAnswer): void {
    this.answer = answer;
    for (const l of this.listeners) l();
  }
}

function setup() {
  const clock = new ManualClock();
  const store = new FakeStore(clock);
  const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
  const log = new MemoryLog();
  const networks = new FakeNetworks();
  store.addNode('n1');
  const agent = new Agent({
    owner: { clusterId, nodeId: 'n1' }, view: store, writer: store.writerFor('n1'), caughtUp: () => store.caughtUp(),
    runtime, clock, log, networks,
  });
  return { clock, store, runtime, networks, agent };
}

describe('agent: tasks on overlay networks', () => {
  it('waits, reported starting with the reason, until the addresses and the overlay are there; then creates the container with them', async () => {
    const { clock, store, runtime, networks, agent } = setup();
    store.addService(spec({ command: ['sleep', '3600'], networks: ['back', 'front'] }));
    store.assign('t1', 'web', 'n1');
    agent.start();
    await run(clock, 1000);
    expect(runtime.all()).toEqual([]);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'starting', message: 'waiting for network back: the leader has not given this task an address yet' });
    expect(networks.asked.at(-1)).toEqual({ taskId: 't1', names: ['back', 'front'] });
    // Waiting does not spin: no pass runs again until something changes.
    const asked = networks.asked.length;
    await run(clock, 1000);
    expect(networks.asked.length).toBe(asked);

    networks.set({ ready: true, networks: [{ name: 'back', address: '10.62.1.2' }, { name: 'front', address: '10.63.1.2' }], dns: ['10.62.1.1'] });
    await run(clock, 1000);
    const [c] = runtime.all();
    expect(c?.state).toBe('running');
    const created = runtime.specOf(c?.id ?? '');
    expect(created?.networks).toEqual([{ name: 'back', address: '10.62.1.2' }, { name: 'front', address: '10.63.1.2' }]);
    expect(created?.dns).toEqual(['10.62.1.1']);
    expect(store.statuses.get('t1')).toMatchObject({ state: 'running', message: null });
    await agent.close();
  });

  it('puts the node\'s service resolver before the service\'s own name servers', async () => {
    const { clock, store, runtime, networks, agent } = setup();
    store.addService(spec({ command: ['sleep', '3600'], networks: ['back'], dns: ['1.1.1.1', '10.62.1.1'] }));
    store.assign('t1', 'web', 'n1');
    networks.set({ ready: true, networks: [{ name: 'back', address: '10.62.1.2' }], dns: ['10.62.1.1'] });
    agent.start();
    await run(clock, 1000);
    const [c] = runtime.all();
    expect(runtime.specOf(c?.id ?? '')?.dns).toEqual(['10.62.1.1', '1.1.1.1']);
    await agent.close();
  });

  it('does not ask about a task on no network', async () => {
    const { clock, store, runtime, networks, agent } = setup();
    store.addService(spec({ command: ['sleep', '3600'] }));
    store.assign('t1', 'web', 'n1');
    agent.start();
    await run(clock, 1000);
    expect(runtime.all().map((c) => c.state)).toEqual(['running']);
    expect(networks.asked).toEqual([]);
    await agent.close();
  });
});
