// Addresses that change under a cluster (docs/operations.md, "Changing addresses"), on real
// `shoal serve` processes: every machine restarts with new IP addresses and ports (not in their
// certificates), with a `--peers` hint on one of them and no hand edit of stored state; then a
// second full restart without any hint (the membership holds the new addresses by then); and
// one node alone moving.

import { describe, expect, it } from 'vitest';
import { getJson, putJson, sleep, useCluster, type ClusterNode, type ProcessCluster } from './process-cluster.ts';

interface ClusterView {
  members: { id: string; peerAddress: string; apiAddress: string }[];
}

/** Writes `count` documents through `node`; returns the acknowledged ones. */
async function writeSome(node: ClusterNode, prefix: string, count: number): Promise<Map<string, string>> {
  const acked = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const key = `${prefix}-${i}`;
    const res = await putJson(node, `/v1/docs/kv/${key}`, { value: key }, 5000);
    expect(res.status, `PUT ${key} on ${node.name}`).toBe(200);
    acked.set(key, key);
  }
  return acked;
}

/** Every acknowledged document on `node`, after it has caught up with the leader. */
async function expectAll(node: ClusterNode, acked: Map<string, string>): Promise<void> {
  const deadline = Date.now() + 20_000;
  let ready = { status: 0 };
  while (ready.status !== 200 && Date.now() < deadline) {
    ready = await getJson<unknown>(node, '/readyz?sync', 5000).catch(() => ({ status: 0 }));
    if (ready.status !== 200) await sleep(200);
  }
  expect(ready.status, `readyz?sync on ${node.name}`).toBe(200);
  const missing: string[] = [];
  for (const [key, value] of acked) {
    const res = await getJson<{ doc?: { value?: string } }>(node, `/v1/docs/kv/${key}?consistency=stale`);
    if (res.status !== 200 || res.body.doc?.value !== value) missing.push(key);
  }
  expect(missing, `missing on ${node.name}`).toEqual([]);
}

/** Waits until every running node's membership names each node at its current addresses. */
async function expectRecordsMoved(cluster: ProcessCluster): Promise<void> {
  const want = cluster.nodes.map((n) => ({ id: n.id, peerAddress: n.peerAddress, apiAddress: n.apiAddress })).sort((a, b) => a.id.localeCompare(b.id));
  const deadline = Date.now() + 20_000;
  let seen: unknown[] = [];
  while (Date.now() < deadline) {
    seen = await Promise.all(cluster.nodes.map(async (n) => {
      const v = await getJson<ClusterView>(n, '/v1/cluster?local').catch(() => undefined);
      return v?.body.members?.map(({ id, peerAddress, apiAddress }) => ({ id, peerAddress, apiAddress })).sort((a, b) => a.id.localeCompare(b.id));
    }));
    if (seen.every((s) => JSON.stringify(s) === JSON.stringify(want))) return;
    await sleep(200);
  }
  expect(seen, `membership records\n${cluster.tailLogs(15)}`).toEqual(cluster.nodes.map(() => want));
}

async function stopAll(cluster: ProcessCluster): Promise<void> {
  const codes = await Promise.all(cluster.nodes.map((n) => cluster.stop(n)));
  expect(codes).toEqual(cluster.nodes.map(() => 0));
}

describe('a cluster whose addresses change', () => {
  const cluster = useCluster({ electionTimeoutMs: 500 });

  it('recovers when every node restarts with new addresses and one has --peers, and again without hints', async () => {
    const leader = await cluster.waitForLeader();
    const acked = await writeSome(leader, 'before', 20);
    await stopAll(cluster);
    // New IP addresses (127.0.0.21-23), which the nodes' certificates do not name, and new ports.
    for (const [i, n] of cluster.nodes.entries()) await cluster.move(n, `127.0.0.${21 + i}`);
    const [n1, n2, n3] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
    // Only n1 is told where the others are now; they learn n1's address from its connections,
    // and each other's from the hints its hellos pass on.
    cluster.start(n1, ['--peers', `${n2.peerAddress},${n3.peerAddress}`]);
    cluster.start(n2);
    cluster.start(n3);
    const after = await cluster.waitForLeader(30_000);
    for (const n of cluster.nodes) await expectAll(n, acked);
    for (const [k, v] of await writeSome(after, 'moved', 10)) acked.set(k, v);
    await expectRecordsMoved(cluster);

    // The membership now holds the new addresses: a restart needs no hint.
    await stopAll(cluster);
    cluster.startAll();
    const again = await cluster.waitForLeader(30_000);
    for (const [k, v] of await writeSome(again, 'again', 5)) acked.set(k, v);
    for (const n of cluster.nodes) await expectAll(n, acked);
  }, 180_000);

  it('takes back one node that restarted alone with new addresses, with no hint', async () => {
    const leader = await cluster.waitForLeader();
    const mover = cluster.nodes.find((n) => n !== leader) as ClusterNode;
    expect(await cluster.stop(mover)).toBe(0);
    const acked = await writeSome(leader, 'while-away', 5);
    await cluster.move(mover);
    cluster.start(mover);
    await cluster.waitForLeader(30_000);
    await expectAll(mover, acked);
    await expectRecordsMoved(cluster);
  }, 120_000);
});
