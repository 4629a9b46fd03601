// The document API on three real processes: a write on one follower is read linearizably on
// another, and a watch on a follower sees every change exactly once across leader changes.

import { describe, expect, it } from 'vitest';
import { getJson, putJson, sleep, useCluster, type ClusterNode } from './process-cluster.ts';

async function post(node: ClusterNode, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://${node.apiAddress}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: await res.json() };
}

interface Event { rev: number; type: string; id: string }

/** Reads server-sent events from a watch into `events` until aborted. */
function watch(node: ClusterNode, query: string, events: Event[]): AbortController {
  const ctrl = new AbortController();
  void (async () => {
    const res = await fetch(`http://${node.apiAddress}/v1/watch?${query}`, { signal: ctrl.signal });
    const reader = res.body!.getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += new TextDecoder().decode(value);
      const blocks = buf.split('\n\n');
      buf = blocks.pop() ?? '';
      for (const b of blocks) {
        const data = b.split('\n').find((l) => l.startsWith('data: '));
        if (data) events.push(JSON.parse(data.slice(6)) as Event);
      }
    }
  })().catch(() => {});
  return ctrl;
}

describe('documents on a three-process cluster', () => {
  const cluster = useCluster({ electionTimeoutMs: 500 });

  it('reads on one follower, linearizably, what was just written on another', async () => {
    const leader = await cluster.waitForLeader();
    const [f1, f2] = cluster.nodes.filter((n) => n !== leader) as [ClusterNode, ClusterNode];
    for (let i = 0; i < 20; i++) {
      const w = await putJson<{ rev: number }>(f1, `/v1/docs/e2e/k${i}`, { i });
      expect(w.status).toBe(200);
      const r = await getJson<{ rev: number; doc: { i: number } }>(f2, `/v1/docs/e2e/k${i}`);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ rev: w.body.rev, doc: { i } });
    }
  }, 60_000);

  it('keeps a watch on a follower going across leader changes with no missed or repeated event', async () => {
    const leader = await cluster.waitForLeader();
    const follower = cluster.nodes.find((n) => n !== leader) as ClusterNode;
    const start = await getJson<{ rev: number }>(follower, '/v1/docs/watched');
    const events: Event[] = [];
    const ctrl = watch(follower, `collection=watched&after=${start.body.rev}`, events);
    const written: { id: string; rev: number }[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 10; i++) {
        const target = cluster.nodes[(round + i) % cluster.nodes.length] as ClusterNode;
        const id = `r${round}-${i}`;
        // Retried under one idempotency key until answered: a write whose outcome was unknown
        // lands once at most.
        const res = await putJson<{ rev: number }>(target, `/v1/docs/watched/${id}`, { round, i }, 5000, { 'idempotency-key': id }).catch(() => undefined);
        if (res?.status === 200) written.push({ id, rev: res.body.rev });
        else i--;
      }
      const current = await cluster.waitForLeader();
      const t = await post(current, '/v1/cluster/leader', {});
      expect(t.status).toBe(200);
    }
    const deadline = Date.now() + 10_000;
    while (events.length < written.length && Date.now() < deadline) await sleep(50);
    await sleep(300);
    ctrl.abort();
    expect(events.map((e) => e.id)).toEqual(written.map((w) => w.id));
    expect(events.map((e) => e.rev)).toEqual(written.map((w) => w.rev));
  }, 90_000);

  // Last: it leaves two members.
  it('removes the leader asked to remove itself only after handing leadership to another voter', async () => {
    const leader = await cluster.waitForLeader();
    const res = await fetch(`http://${leader.apiAddress}/v1/cluster/members/${leader.id}`, { method: 'DELETE', signal: AbortSignal.timeout(15_000) });
    const view = (await res.json()) as { node: string; leader: string; members: { id: string }[] };
    expect(res.status).toBe(200);
    expect(view.members.map((m) => m.id)).not.toContain(leader.id);
    // The answer comes from the new leader, which made the change: the removed node was a
    // follower by then, so the others were never left waiting on it (docs/raft.md).
    expect(view.node).not.toBe(leader.id);
    expect(view.leader).toBe(view.node);
    const rest = cluster.nodes.filter((n) => n !== leader);
    const next = await cluster.waitForLeader(20_000, rest);
    expect(next.id).toBe(view.leader);
    expect((await putJson<{ rev: number }>(next, '/v1/docs/e2e/after-removal', { ok: true })).status).toBe(200);
  }, 60_000);
});
