// Three real `shoal serve` processes on loopback with durable storage and the mTLS transport.
// Fault: kill -9 of the leader under a load of writes. Checks: a new leader within a few
// election timeouts, and every acknowledged write present on every node, including the killed
// one after its restart and all three after a whole-cluster restart in random order.

import { describe, expect, it } from 'vitest';
import { getJson, putJson, sleep, useCluster, type ClusterNode, type ProcessCluster } from './process-cluster.ts';

const electionTimeoutMs = 500;

interface Load {
  acked: Map<string, string>;
  errors: number;
  stop(): Promise<void>;
}

/** Closed-loop writers, each to a rotating node; records every acknowledged key and value. */
function startLoad(cluster: ProcessCluster, writers: number): Load {
  const acked = new Map<string, string>();
  let running = true;
  let errors = 0;
  const loops = Array.from({ length: writers }, async (_, w) => {
    for (let i = 0; running; i++) {
      const alive = cluster.nodes.filter((n) => n.proc);
      const target = alive[(w + i) % alive.length];
      if (!target) { await sleep(20); continue; }
      const key = `w${w}-${i}`;
      const value = `v-${w}-${i}`;
      try {
        const res = await putJson<{ rev?: number }>(target, `/v1/docs/kv/${key}`, { value }, 3000);
        if (res.status === 200) acked.set(key, value);
        else { errors++; await sleep(20); }
      } catch {
        errors++;
        await sleep(20);
      }
    }
  });
  return {
    acked,
    get errors() { return errors; },
    stop: async () => { running = false; await Promise.all(loops); },
  };
}

async function missingOn(node: ClusterNode, acked: Map<string, string>): Promise<string[]> {
  // Make the node's applied index catch up with the leader's commit, then read locally. A node
  // that just restarted may see the leader change once more; retry for a while.
  const deadline = Date.now() + 15_000;
  let ready = await getJson<unknown>(node, '/readyz?sync', 10_000).catch((e: Error) => ({ status: 0, body: e.message }));
  while (ready.status !== 200 && Date.now() < deadline) {
    await sleep(200);
    ready = await getJson<unknown>(node, '/readyz?sync', 10_000).catch((e: Error) => ({ status: 0, body: e.message }));
  }
  expect(ready, `readyz?sync on ${node.name}`).toMatchObject({ status: 200 });
  const missing: string[] = [];
  const entries = [...acked];
  for (let i = 0; i < entries.length; i += 64) {
    await Promise.all(entries.slice(i, i + 64).map(async ([key, value]) => {
      const res = await getJson<{ doc?: { value?: string } }>(node, `/v1/docs/kv/${key}?consistency=stale`);
      if (res.status !== 200 || res.body.doc?.value !== value) missing.push(key);
    }));
  }
  return missing;
}

describe('a three-process cluster', () => {
  const cluster = useCluster({ electionTimeoutMs, snapshotEntries: 500, snapshotIntervalMs: 1000, logKeepEntries: 100 });

  it('elects a new leader after kill -9 of the leader under load and loses no acknowledged write', async () => {
    const load = startLoad(cluster, 16);
    await sleep(1500);
    const oldLeader = await cluster.waitForLeader();
    const before = load.acked.size;
    const killedAt = Date.now();
    await cluster.kill(oldLeader);
    const survivors = cluster.nodes.filter((n) => n !== oldLeader);
    const newLeader = await cluster.waitForLeader(10 * electionTimeoutMs, survivors);
    const failoverMs = Date.now() - killedAt;
    await sleep(1500);
    await load.stop();

    expect(newLeader.id).not.toBe(oldLeader.id);
    expect(failoverMs).toBeLessThan(10 * electionTimeoutMs);
    expect(before).toBeGreaterThan(0);
    expect(load.acked.size).toBeGreaterThan(before); // writes went on after the failover
    for (const n of survivors) expect(await missingOn(n, load.acked)).toEqual([]);

    cluster.start(oldLeader);
    await cluster.waitForLeader();
    expect(await missingOn(oldLeader, load.acked)).toEqual([]);
  }, 120_000);

  it('comes back with a leader and all data after every process stops and restarts in random order', async () => {
    const load = startLoad(cluster, 4);
    await sleep(1000);
    await load.stop();
    expect(load.acked.size).toBeGreaterThan(0);
    for (const n of cluster.nodes) expect(await cluster.stop(n)).toBe(0);
    const order = [...cluster.nodes].sort(() => Math.random() - 0.5);
    for (const n of order) {
      cluster.start(n);
      await sleep(200);
    }
    await cluster.waitForLeader();
    for (const n of cluster.nodes) expect(await missingOn(n, load.acked)).toEqual([]);
  }, 120_000);
});
