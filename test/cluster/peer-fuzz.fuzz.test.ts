// Three real `shoal serve` processes; a member gone bad (peer-fuzzer.ts: a member's certificate
// from its data directory) sends every node garbage, malformed and meaningless frames, corrupted
// frames and frames of past terms, while clients write. The cluster must keep committing, no
// process may exit, and the nodes must say what they dropped.
//
// Starts processes: run it under the machine-wide lock,
//   flock /tmp/shoal-heavy.lock npx vitest run test/cluster/peer-fuzz.fuzz.test.ts
// SHOAL_FUZZ_SECONDS sets how long the fuzzing lasts (default 6; `npm run test:fuzz` more).

import { describe, expect, it } from 'vitest';
import { getJson, putJson, sleep, useCluster, type ClusterNode, type ProcessCluster } from './process-cluster.ts';
import { PeerFuzzer, type FuzzStats } from './peer-fuzzer.ts';

const fuzzMs = Number(process.env.SHOAL_FUZZ_SECONDS ?? 6) * 1000;

/** Closed-loop writes to rotating nodes; counts the acknowledged ones. */
function startWrites(cluster: ProcessCluster): { acked: () => number; stop: () => Promise<void> } {
  let acked = 0;
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const node = cluster.nodes[i % cluster.nodes.length] as ClusterNode;
      const res = await putJson(node, `/v1/docs/fuzz/k${i % 32}`, { i }, 3000).catch(() => undefined);
      if (res?.status === 200) acked++;
      else await sleep(20);
    }
  })();
  return { acked: () => acked, stop: async () => { running = false; await loop; } };
}

async function termOf(node: ClusterNode): Promise<number> {
  const h = await getJson<{ term?: number }>(node, '/healthz', 1000);
  return h.body.term ?? 0;
}

describe('a three-process cluster with a member gone bad on the wire', () => {
  const cluster = useCluster({ electionTimeoutMs: 500 });

  it('keeps committing, no process exits, and every node reports what it dropped', async () => {
    const writes = startWrites(cluster);
    await sleep(500);
    const members = cluster.nodes.map((n) => n.id);
    // Each node gets the frames of another member, as that member: n1 as n2, n2 as n3, n3 as n1.
    const fuzzers = cluster.nodes.map((target, i) => {
      const as = cluster.nodes[(i + 1) % cluster.nodes.length] as ClusterNode;
      return new PeerFuzzer({ as, target, members, term: () => termOf(target), seed: 1000 + i });
    });
    const before = writes.acked();
    const stats: FuzzStats[] = await Promise.all(fuzzers.map((f) => f.run(fuzzMs)));
    const during = writes.acked() - before;
    await sleep(1000);
    const after = writes.acked();
    await sleep(1000);
    await writes.stop();

    const exited = cluster.nodes.filter((n) => n.proc === undefined).map((n) => n.name);
    expect(exited, cluster.tailLogs()).toEqual([]);
    for (const s of stats) {
      expect(s.connections, JSON.stringify(s)).toBeGreaterThan(0);
      expect(s.dropped, JSON.stringify(s)).toBeGreaterThan(50);
    }
    expect(during, 'writes acknowledged while the frames arrived').toBeGreaterThan(0);
    expect(writes.acked(), 'writes acknowledged after').toBeGreaterThan(after);
    // The dropping node logs each kind of drop (at most once a minute per kind).
    for (const n of cluster.nodes) expect(n.logs.join(''), n.name).toMatch(/dropped a malformed frame|dropped a '\w+' message/);
    // And every node still serves a linearizable read of what was written last.
    await cluster.waitForLeader();
    for (const n of cluster.nodes) expect((await getJson(n, '/readyz?sync', 10_000)).status, n.name).toBe(200);
  }, 180_000);
});
