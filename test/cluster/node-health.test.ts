// Node health on three real `shoal serve` processes (docs/control-plane.md, "Node health"): a
// node whose shoal stops, gracefully (a goodbye on its connections) or by a crash (its port then
// refuses), is taken for a shoal restarting: suspect, not down, for control.restartGraceMs, while
// a silent node would be down after control.downAfterMs. Loopback, so the machine always answers.
// A restarted shoal listens a while before it answers the handshake: the refusal before holds.
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/cluster/node-health.test.ts

import { describe, expect, it } from 'vitest';
import { getJson, sleep, useCluster, type ClusterNode } from './process-cluster.ts';

const health = { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 9_000 };
const cluster = useCluster({ runtime: 'memory', control: health });

async function record(via: ClusterNode, id: string): Promise<{ state: string; epoch: number }> {
  const { body } = await getJson<{ node: { record: { state: string; epoch: number } } }>(via, `/v1/nodes/${id}`, 5_000);
  return body.node.record;
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}\n${cluster.tailLogs()}`);
}

describe('node health on real processes', { timeout: 90_000 }, () => {
  it('a gracefully stopped node is restarting, not down, past the down timeout; back, in the same epoch', async () => {
    const leader = await cluster.waitForLeader();
    const victim = cluster.nodes.find((n) => n !== leader) as ClusterNode;
    await waitFor('every node registered and ready', async () => ((await record(leader, victim.id)).state === 'ready' ? true : undefined));
    const { epoch } = await record(leader, victim.id);
    expect(await cluster.stop(victim)).toBe(0);
    await sleep(health.downAfterMs + 1_500);
    expect(await record(leader, victim.id)).toEqual(expect.objectContaining({ state: 'suspect', epoch }));
    cluster.start(victim);
    await waitFor('the node ready again', async () => ((await record(leader, victim.id)).state === 'ready' ? true : undefined));
    expect((await record(leader, victim.id)).epoch).toBe(epoch);
    // The suspect verdict's reason depends on the race with the third member's peer view (it may
    // still say it hears the node); past the down timeout only the goodbye or the refusal keeps it suspect.
    expect(leader.logs.join('')).toMatch(/suspect: silent (to the leader )?[\d.]+ s(: it said it was stopping|: its machine answers but shoal does not|, heard by)/);
  });

  it('a crashed shoal restarted 2 s later (systemd) is never down; one that stays away waits the restart grace, then is down; back, in the raised epoch', async () => {
    const leader = await cluster.waitForLeader();
    const victim = cluster.nodes.find((n) => n !== leader) as ClusterNode;
    await waitFor('the node ready', async () => ((await record(leader, victim.id)).state === 'ready' ? true : undefined));
    const { epoch } = await record(leader, victim.id);
    // Its silence (the kill, RestartSec, the new process's start) passes downAfterMs.
    await cluster.kill(victim);
    await sleep(2_000);
    cluster.start(victim);
    await waitFor('the node ready again', async () => ((await record(leader, victim.id)).state === 'ready' ? true : undefined));
    expect((await record(leader, victim.id)).epoch).toBe(epoch);

    const killedAt = Date.now();
    await cluster.kill(victim);
    await sleep(health.downAfterMs + 1_500);
    expect(await record(leader, victim.id)).toEqual(expect.objectContaining({ state: 'suspect', epoch }));
    await waitFor('the node down', async () => ((await record(leader, victim.id)).state === 'down' ? true : undefined), 20_000);
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(health.restartGraceMs - 1_000);
    cluster.start(victim);
    await waitFor('the node back', async () => ((await record(leader, victim.id)).state === 'ready' ? true : undefined));
    expect((await record(leader, victim.id)).epoch).toBe(epoch + 1);
  });
});
