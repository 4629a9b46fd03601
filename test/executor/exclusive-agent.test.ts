// The agent's side of exclusive services (docs/control-plane.md, "Exclusive services"): tasks
// start only under a lease renewed by a committed write, are SIGKILLed when it runs out (through
// the process when the runtime hangs), and a restarted agent adopts them under the lease its
// previous life held. Time is a ManualClock (its boot clock is the same clock here).

import { describe, expect, it } from 'vitest';
import { Agent } from '../../src/executor/agent.ts';
import { MemoryLeaseStore, type LeaseWriter } from '../../src/executor/lease-keeper.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import type { ContainerInfo, Labels, Runtime } from '../../src/executor/runtime.ts';
import { clusterId, FakeStore, MemoryLog, run, spec } from './harness.ts';

const lease = { leaseMs: 3_000, driftRho: 0.01, killMs: 500, stopReportMs: 500 };

class FakeLeaseWriter implements LeaseWriter {
  renewals: { epoch: number; atMs: number }[] = [];
  /** False: every renewal fails (no quorum). */
  ok = true;
  constructor(private readonly clock: ManualClock) {}
  async renewLease(r: { epoch: number; leaseMs: number }): Promise<void> {
    await Promise.resolve();
    if (!this.ok) throw Object.assign(new Error('no leader'), { code: 'no_leader' });
    this.renewals.push({ epoch: r.epoch, atMs: this.clock.now() });
  }
}

function setup() {
  const clock = new ManualClock(1_000);
  const store = new FakeStore(clock);
  const runtime = new MemoryRuntime({ clock, images: ['busybox:local'] });
  const log = new MemoryLog();
  const writer = new FakeLeaseWriter(clock);
  const leases = new MemoryLeaseStore();
  store.addNode('n1');
  store.addService(spec({ command: ['sleep', '3600'], exclusive: true }));
  return { clock, store, runtime, log, writer, leases };
}

function agentOf(s: ReturnType<typeof setup>, runtime: Runtime = s.runtime, killProcess?: (pid: number, id: string) => 'killed' | 'gone'): Agent {
  const agent = new Agent({
    owner: { clusterId, nodeId: 'n1' }, view: s.store, writer: s.store.writerFor('n1'), caughtUp: () => s.store.caughtUp(),
    runtime, clock: s.clock, log: s.log,
    lease: { writer: s.writer, config: lease, boot: s.clock, store: s.leases, ...(killProcess !== undefined ? { killProcess } : {}) },
  });
  agent.start();
  return agent;
}

const running = (rt: MemoryRuntime): ContainerInfo[] => rt.all().filter((c) => c.state === 'running');

describe('agent: exclusive tasks under the node\'s lease', () => {
  it('starts an exclusive task only once a renewal has committed, labelled exclusive', async () => {
    const s = setup();
    s.writer.ok = false;
    s.store.assign('t1', 'web', 'n1');
    const agent = agentOf(s);
    await run(s.clock, 2_000);
    expect(running(s.runtime)).toEqual([]);
    s.writer.ok = true;
    await run(s.clock, 2_000);
    const [c] = running(s.runtime);
    expect(c?.labels['io.shoal.exclusive']).toBe('true');
    expect(s.writer.renewals.length).toBeGreaterThan(0);
    await agent.close();
  });

  it('SIGKILLs it when renewals stop committing, even without a quorum, and never restarts it', async () => {
    const s = setup();
    s.store.assign('t1', 'web', 'n1');
    const agent = agentOf(s);
    await run(s.clock, 1_000);
    expect(running(s.runtime)).toHaveLength(1);
    s.writer.ok = false;
    s.store.quorum = false;
    const cut = s.clock.now();
    await run(s.clock, lease.leaseMs + 1_000);
    const [c] = s.runtime.all();
    expect(c).toMatchObject({ state: 'exited', exitCode: 137 });
    const died = s.runtime.history().find((e) => e.type === 'die');
    // Dead by the end of the last renewal's lease (sent before the cut), plus the expiry check's period.
    expect(died?.at).toBeLessThanOrEqual(s.clock.wallNow() - (s.clock.now() - cut) + lease.leaseMs + 200);
    expect(s.log.matching(/ran out; killing/)).toHaveLength(1);
    await run(s.clock, 5_000);
    expect(running(s.runtime)).toEqual([]);
    await agent.close();
  });

  it('kills the container\'s process directly when the runtime does not answer the kill', async () => {
    const s = setup();
    s.store.assign('t1', 'web', 'n1');
    const killed: [number, string][] = [];
    // The runtime as Docker shows it (a pid per running container), with a kill that hangs.
    const withPid: Runtime = Object.assign(Object.create(s.runtime) as Runtime, {
      list: async (labels: Labels) => (await s.runtime.list(labels)).map((c) => (c.state === 'running' ? { ...c, pid: 4242 } : c)),
      kill: () => new Promise<void>(() => {}),
    });
    const agent = agentOf(s, withPid, (pid, id) => {
      killed.push([pid, id]);
      s.runtime.exit(id, 137);
      return 'killed';
    });
    await run(s.clock, 1_000);
    const [c] = running(s.runtime);
    s.writer.ok = false;
    await run(s.clock, lease.leaseMs + 2_000);
    expect(killed).toEqual([[4242, c?.id]]);
    expect(s.runtime.all()[0]).toMatchObject({ state: 'exited', exitCode: 137 });
    await agent.close();
  });

  it('a restarted agent adopts a running exclusive task under the lease its previous life held', async () => {
    const s = setup();
    s.store.assign('t1', 'web', 'n1');
    const first = agentOf(s);
    await run(s.clock, 1_000);
    await first.close();
    const second = agentOf(s);
    await run(s.clock, 500);
    expect(running(s.runtime)).toHaveLength(1);
    expect(s.log.matching(/killing exclusive/)).toEqual([]);
    await second.close();
  });

  it('a graceful stop renews once more, so a restart shorter than a whole lease keeps the task', async () => {
    const s = setup();
    s.store.assign('t1', 'web', 'n1');
    const first = agentOf(s);
    // Renewals at 0 and 1000 ms (every third of the 3 s lease): without another, the lease ends at 4000.
    await run(s.clock, 1_900);
    const stopAt = s.clock.now();
    await first.close();
    expect(s.writer.renewals.at(-1)?.atMs).toBe(stopAt);
    expect(s.leases.read(0)).toBe(stopAt + lease.leaseMs);
    // Down for 2.5 s: past where the lease would have ended, within a lease of the stop.
    await run(s.clock, 2_500);
    expect(running(s.runtime)).toHaveLength(1);
    const second = agentOf(s);
    await run(s.clock, 500);
    expect(running(s.runtime)).toHaveLength(1);
    expect(s.log.matching(/killing exclusive|ran out/)).toEqual([]);
    await second.close();
  });

  it('a restarted agent with no lease on record kills the exclusive task it finds', async () => {
    const s = setup();
    s.store.assign('t1', 'web', 'n1');
    const first = agentOf(s);
    await run(s.clock, 1_000);
    await first.close();
    s.leases.held.clear();
    s.writer.ok = false;
    const second = agentOf(s);
    await run(s.clock, 500);
    expect(running(s.runtime)).toEqual([]);
    expect(s.log.matching(/killing exclusive container .*no lease that covers it/)).toHaveLength(1);
    await second.close();
  });
});
