// A node whose disk stalls, and the bounds on what waits in a node: neither may hang a client
// or keep a dead leader in office (hashicorp/raft issue 503).

import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryNodeStorage, PersistBatch } from '../../src/node/node-storage.ts';
import { KvStateMachine } from './kv-state-machine.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { MemoryCluster } from './memory-cluster.ts';
import { waitFor } from '../transport/helpers.ts';

const put = (key: string, value: string): Uint8Array => KvStateMachine.encode({ op: 'put', key, value });

let cluster: MemoryCluster | undefined;
const gates = new Map<string, DiskGate>();
afterEach(async () => {
  for (const g of gates.values()) g.release();
  gates.clear();
  await cluster?.stopAll();
  cluster = undefined;
});

/** A storage seam: while `stalled`, every save() waits until `release()`. */
class DiskGate {
  private waiting: (() => void)[] = [];
  stalled = false;

  wrap(storage: MemoryNodeStorage): void {
    const save = storage.save.bind(storage);
    storage.save = async (batch: PersistBatch): Promise<void> => {
      if (this.stalled) await new Promise<void>((r) => this.waiting.push(r));
      return save(batch);
    };
  }

  release(): void {
    this.stalled = false;
    for (const r of this.waiting.splice(0)) r();
  }
}

describe('a stalled disk', () => {
  it('takes the leader out of office: another is elected, the stalled node refuses requests, and recovers when the disk does', async () => {
    const c = new MemoryCluster({
      instrument: (id, storage) => { const g = new DiskGate(); g.wrap(storage); gates.set(id, g); },
      nodeOptions: { diskStallMs: 100 },
    });
    cluster = c;
    await c.start();
    const leader = await c.waitForLeader();
    await leader.node.propose(put('before', '1'));
    const gate = gates.get(leader.id) as DiskGate;
    gate.stalled = true;
    const stuck = leader.node.propose(put('during', '2'));
    await expect(stuck).rejects.toMatchObject({ code: 'disk_stalled' });
    expect(leader.node.failure?.code).toBe('disk_stalled');
    expect(() => leader.node.propose(put('x', 'y'))).toThrow(expect.objectContaining({ code: 'disk_stalled' }));
    expect(() => leader.node.readBarrier()).toThrow(expect.objectContaining({ code: 'disk_stalled' }));

    const others = c.nodes.filter((n) => n !== leader);
    const next = await c.waitForLeader(5000, others);
    expect(next.id).not.toBe(leader.id);
    await next.node.propose(put('new-leader', '3'));

    gate.release();
    await waitFor('the stalled node to serve again', () => leader.node.failure === undefined && leader.node.leaderId === next.id);
    await leader.node.readBarrier();
    expect(leader.kv.get('new-leader')?.value).toBe('3');
    expect(c.warnings.some((w) => w.startsWith(`${leader.id}: the disk completed the stalled write`))).toBe(true);
  });
});

describe('bounds', () => {
  it('refuses proposals beyond proposalsPendingMax with overloaded, and counts it', async () => {
    const c = new MemoryCluster({ nodeOptions: { proposalsPendingMax: 3 } });
    cluster = c;
    await c.start();
    const leader = await c.waitForLeader();
    await waitFor('the feature level raise to be done', () => leader.node.featureLevel === featureLevelMax && leader.node.pendingCounts().proposals === 0);
    // Cut the leader off, so nothing it proposes can commit while the test fills its bound.
    for (const n of c.nodes) if (n !== leader) c.network.partition(leader.id, n.id);
    const pending = [0, 1, 2].map((i) => leader.node.propose(put(`k${i}`, 'v')).catch((e: unknown) => e));
    expect(() => leader.node.propose(put('over', 'v'))).toThrow(expect.objectContaining({ code: 'overloaded', details: { limit: 'proposalsPendingMax', value: 3 } }));
    expect(leader.node.overloads.proposals).toBe(1);
    expect(leader.node.pendingCounts().proposals).toBe(3);
    c.network.heal();
    await Promise.all(pending);
  });

  it('refuses reads beyond readsPendingMax with overloaded', async () => {
    const c = new MemoryCluster({ nodeOptions: { readsPendingMax: 2 } });
    cluster = c;
    await c.start();
    const leader = await c.waitForLeader();
    for (const n of c.nodes) if (n !== leader) c.network.partition(leader.id, n.id);
    const pending = [0, 1].map(() => leader.node.readBarrier(500).catch((e: unknown) => e));
    expect(() => leader.node.readBarrier()).toThrow(expect.objectContaining({ code: 'overloaded', details: { limit: 'readsPendingMax', value: 2 } }));
    expect(leader.node.overloads.reads).toBe(1);
    await Promise.all(pending);
  });
});
