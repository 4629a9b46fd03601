// Issue 22's scenarios 1, 2 and 6 on a real three-process cluster running real containers on
// the machine's Docker daemon (docker-system.ts): a service spread one container per node; the
// leader's process killed with SIGKILL (under a writer of documents: no acknowledged write may be
// lost); every shoal process restarted one after another. In the last two no container may
// restart, and no slot may ever have two containers running at once, as Docker's own events
// show. Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/placement-and-failover.test.ts

import { describe, expect, it } from 'vitest';
import { agentDefaults } from '../../src/executor/agent.ts';
import type { ClusterNode } from '../cluster/process-cluster.ts';
import { getJson, putJson, sleep } from '../cluster/process-cluster.ts';
import { describeRun, runsOf, slotOverlaps } from './container-events.ts';
import { perNode, serviceDoc, withDockerSystem, type Container, type DockerSystem } from './docker-system.ts';

/** Asserts that each container of `before` still runs, with its id and its start time. */
async function expectSameContainers(sys: DockerSystem, before: readonly Container[]): Promise<void> {
  const ids = new Set(before.map((c) => c.id));
  const after = (await sys.containers('web')).filter((c) => ids.has(c.id));
  // On a mismatch, what the nodes said about health, epochs and containers, to tell why.
  const why = after.length === before.length ? '' : `\n${sys.cluster.nodes.map((n) => `--- ${n.name}\n${logText(n).split('\n')
    .filter((l) => /node health|epoch|remov|replac|down|adopt|leader loops|stopping|goodbye/i.test(l)).slice(-40).join('\n')}`).join('\n')}`;
  expect(after.map((c) => ({ id: c.id, running: c.running, startedAt: c.startedAt })), `the containers before the restarts${why}`)
    .toEqual(before.map((c) => ({ id: c.id, running: true, startedAt: c.startedAt })));
  // And from Docker's events: each started once (before the test's kill or restarts), never died.
  const events = sys.events?.events ?? [];
  for (const c of before) {
    expect(events.filter((e) => e.containerId === c.id).map((e) => e.action), `the events of ${c.id}`).toEqual(['create', 'start']);
  }
}

/** Asserts from Docker's events that no slot of web ever had two containers running at once. */
async function expectOneContainerPerSlot(sys: DockerSystem): Promise<void> {
  const log = sys.events;
  if (log === undefined) throw new Error('no event log');
  await log.catchUp(sys.cluster.clusterId);
  log.assertWhole();
  const overlaps = slotOverlaps(runsOf(log.events), 'web');
  expect(overlaps.map(([a, b]) => `${describeRun(a)} / ${describeRun(b)}`)).toEqual([]);
}

/**
 * Writes documents one after another to the running nodes in turn until stopped; resolves with
 * the ids of the writes that were acknowledged (200). A failed write goes to the next node.
 */
function startWriter(sys: DockerSystem): { stop: () => Promise<string[]> } {
  const acked: string[] = [];
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const running = sys.cluster.nodes.filter((n) => n.proc !== undefined);
      const target = running[i % Math.max(1, running.length)];
      const id = `w${i}`;
      const res = target === undefined ? undefined : await putJson(target, `/v1/docs/acked/${id}`, { i }, 1_000).catch(() => undefined);
      if (res?.status === 200) acked.push(id);
      else await sleep(25);
    }
  })();
  return { stop: async () => { stopped = true; await loop; return acked; } };
}

function logText(node: ClusterNode): string {
  return node.logs.join('');
}

function count(text: string, pattern: RegExp): number {
  return [...text.matchAll(pattern)].length;
}

describe('services on real Docker, across the loss of shoal processes', () => {
  it('runs a service of 3 replicas as one container per node (spread)', async () => {
    await withDockerSystem({}, async (sys) => {
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      const { tasks } = await sys.waitConverged('web');
      expect(perNode(tasks)).toEqual({ n1: 1, n2: 1, n3: 1 });
      const containers = await sys.containers('web');
      expect(containers.filter((c) => c.running)).toHaveLength(3);
      expect(new Set(containers.map((c) => c.nodeId))).toEqual(new Set(sys.cluster.nodes.map((n) => n.id)));
      for (const t of tasks) {
        const c = containers.find((x) => x.taskId === t.id);
        expect(c?.nodeId, `the container of task ${t.id}`).toBe(t.nodeId);
        expect(c?.id).toBe(t.report?.containerId);
      }
    });
  }, 120_000);

  it('keeps every container, with its id, when the leader is killed; the new leader\'s loops take over', async () => {
    await withDockerSystem({}, async (sys) => {
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await sys.waitConverged('web');
      const before = await sys.containers('web');
      const old = await sys.leader();
      const { body: oldHealth } = await getJson<{ term: number }>(old, '/healthz');
      const writer = startWriter(sys);
      await sleep(500);
      await sys.cluster.kill(old);
      const survivors = sys.cluster.nodes.filter((n) => n !== old);
      const next = await sys.cluster.waitForLeader(30_000, survivors);
      const { body: health } = await getJson<{ term: number }>(next, '/healthz');
      expect(health.term).toBeGreaterThan(oldHealth.term);
      await sys.waitFor(`the loops of term ${health.term} on ${next.name}`, async () => (logText(next).includes(`leader loops started for term ${health.term}`) ? true : undefined));
      // The new leader's loops decide: a fourth task, placed in the new term.
      const scaled = await sys.api<unknown>('POST', '/v1/services/web/scale', { replicas: 4 }, next);
      expect(scaled.status).toBe(200);
      const placed = await sys.waitFor('the fourth task placed', async () => (await sys.service('web')).tasks.find((t) => t.slot === 4 && t.nodeId !== null));
      expect(placed.record.assignedTerm).toBe(health.term);
      // No write acknowledged across the kill is lost.
      const acked = await writer.stop();
      expect(acked.length).toBeGreaterThan(0);
      const lost: string[] = [];
      for (const id of acked) if ((await getJson(next, `/v1/docs/acked/${id}`)).status !== 200) lost.push(id);
      expect(lost).toEqual([]);
      // The killed process comes back (before the down timeout) and adopts its container.
      sys.cluster.start(old);
      const { tasks } = await sys.waitConverged('web');
      expect(tasks.filter((t) => t.desired === 'running')).toHaveLength(4);
      await expectSameContainers(sys, before);
      await expectOneContainerPerSlot(sys);
    });
  }, 180_000);

  it('restarts no container when every shoal process is restarted one after another', async () => {
    await withDockerSystem({}, async (sys) => {
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await sys.waitConverged('web');
      const before = await sys.containers('web');
      for (const node of sys.cluster.nodes) {
        const registered = count(logText(node), /registered with the control plane/g);
        expect(await sys.cluster.stop(node), `${node.name}'s exit code`).toBe(0);
        sys.cluster.start(node);
        // Registered again: its agent has started (and adopted, or not, what it found).
        await sys.waitFor(`${node.name}'s agent started again`, async () => (count(logText(node), /registered with the control plane/g) > registered ? true : undefined));
        await sys.waitConverged('web');
      }
      // The agent's slow timer guarantees a pass within one interval: anything a restarted agent
      // would do to its containers, it has done by then.
      await sleep(agentDefaults.resyncIntervalMs);
      await sys.waitConverged('web');
      await expectSameContainers(sys, before);
      await expectOneContainerPerSlot(sys);
    });
  }, 240_000);
});
