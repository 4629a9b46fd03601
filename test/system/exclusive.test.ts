// Exclusive services on a real three-process cluster running real containers on the machine's
// Docker daemon (docker-system.ts; docs/control-plane.md, "Exclusive services"): the node running
// the task is frozen (SIGSTOP of its shoal process, so only the fence in the container can kill
// it), cut off both ways or one way, either way (with iptables; each node on its own loopback
// address, which it also dials from), or frozen while the leader is killed (the new leader must wait lease + margin from its own start). Each time,
// checked from Docker's own event times: the old container died before the new one started, no
// two containers of the slot ever ran at once, and the service was back within the target.
// Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/exclusive.test.ts

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { leaseDefaults, replaceAfterMs } from '../../src/resources/lease.ts';
import { getJson, logArrival, type ClusterNode } from '../cluster/process-cluster.ts';
import { runsOf, slotOverlaps, type Run } from './container-events.ts';
import { cutPeers, portOf } from './partition.ts';
import { serviceDoc, withDockerSystem, type DockerSystem } from './docker-system.ts';

const fastHealth = { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 };
/** The target with the defaults (lease 10 s + margin 3.2 s, a start, the down timeout). */
const recoveryTargetMs = 30_000;
const nsPerMs = 1_000_000n;

/** The exclusive service `db` converged on a node other than the leader; returns that node and its container's run. */
async function placedOffLeader(sys: DockerSystem): Promise<{ victim: ClusterNode; leader: ClusterNode; run: Run }> {
  await sys.apply(serviceDoc('db', { exclusive: true }));
  for (let attempt = 0; ; attempt++) {
    const s = await sys.waitConverged('db');
    const task = s.tasks.find((t) => t.desired === 'running');
    const leader = await sys.leader();
    if (task?.nodeId !== leader.id) {
      const victim = sys.cluster.nodes.find((n) => n.id === task?.nodeId);
      if (victim === undefined) throw new Error('the task is on no node');
      const log = sys.events;
      if (log === undefined) throw new Error('no event log');
      await log.catchUp(sys.cluster.clusterId);
      const run = runsOf(log.events).find((r) => r.service === 'db' && r.endNs === null && r.nodeId === victim.id);
      if (run === undefined) throw new Error('no running container of db in the event log');
      return { victim, leader, run };
    }
    if (attempt >= 3) throw new Error('the task stays on the leader');
    // The task is on the leader: hand leadership to another node, so the victim is a follower.
    const r = await sys.api<unknown>('POST', '/v1/cluster/leader', {});
    expect(r.status).toBe(200);
    await sys.waitFor('a new leader', async () => ((await sys.leader()).id !== leader.id ? true : undefined));
  }
}

/** Waits for db running again elsewhere than `victim`, then checks the slot's runs from Docker's events. */
async function checkReplaced(sys: DockerSystem, victim: ClusterNode, old: Run, faultAtNs: bigint): Promise<{ recoveryMs: number }> {
  const log = sys.events;
  if (log === undefined) throw new Error('no event log');
  const fresh = await sys.waitFor('db running on another node', async () => {
    await log.catchUp(sys.cluster.clusterId);
    return runsOf(log.events).find((r) => r.service === 'db' && r.nodeId !== victim.id && r.startNs > faultAtNs);
  }, 60_000);
  await log.catchUp(sys.cluster.clusterId);
  log.assertWhole();
  const runs = runsOf(log.events);
  const oldNow = runs.find((r) => r.containerId === old.containerId);
  expect(oldNow?.endNs, 'the old container died').not.toBeNull();
  expect((oldNow?.endNs ?? 0n) < fresh.startNs, 'the old container died before the new one started').toBe(true);
  expect(slotOverlaps(runs, 'db')).toEqual([]);
  return { recoveryMs: Number((fresh.startNs - faultAtNs) / nsPerMs) };
}

const nowNs = (): bigint => BigInt(Date.now()) * nsPerMs;

/** Drops every TCP segment sent to `port` on this machine (the others' messages to one node), until the returned heal. */
function dropTo(port: number): () => void {
  const rule = ['OUTPUT', '-p', 'tcp', '-d', '127.0.0.1', '--dport', String(port), '-j', 'DROP'];
  const r = spawnSync('iptables', ['-I', ...rule]);
  if (r.status !== 0) throw new Error(`iptables: ${r.stderr.toString()}`);
  return () => { spawnSync('iptables', ['-D', ...rule]); };
}

/**
 * The victim cut off (both ways, or only what it sends): nobody hears it, so the leader declares
 * it down and waits lease + margin from its last renewal; its agent, alive, kills the task at
 * expiry. The old container dies before the new one starts, within the target.
 */
async function partitionAndReplace(ways: { in: boolean; out: boolean }, what: string): Promise<void> {
  await withDockerSystem({ control: fastHealth, ownHosts: true }, async (sys) => {
    const { victim, run } = await placedOffLeader(sys);
    const at = nowNs();
    const heal = cutPeers(sys.cluster.nodes, victim, ways);
    try {
      const { recoveryMs } = await checkReplaced(sys, victim, run, at);
      expect(recoveryMs).toBeLessThanOrEqual(recoveryTargetMs);
      console.log(`exclusive: ${what} of ${victim.name}: back after ${recoveryMs} ms`);
    } finally {
      heal();
    }
    // Healed, the node learns its epoch was raised, removes what is left of it, and runs nothing of db.
    await sys.waitFor(`${victim.name} ready again`, async () => ((await sys.nodeView(victim.name)).record.state === 'ready' ? true : undefined), 60_000);
    const end = await sys.waitConverged('db');
    expect(end.tasks.filter((t) => t.desired === 'running')).toHaveLength(1);
    expect((await sys.containers('db')).filter((c) => c.running)).toHaveLength(1);
    const log = sys.events;
    if (log === undefined) throw new Error('no event log');
    await log.catchUp(sys.cluster.clusterId);
    log.assertWhole();
    expect(slotOverlaps(runsOf(log.events), 'db')).toEqual([]);
  });
}

describe('exclusive services on real Docker', () => {
  it('SIGSTOP of the node\'s shoal: the fence in the container kills it at expiry, and only then does the slot start elsewhere', async () => {
    await withDockerSystem({ control: fastHealth }, async (sys) => {
      const { victim, run } = await placedOffLeader(sys);
      const pid = victim.proc?.pid;
      if (pid === undefined) throw new Error('no victim process');
      const at = nowNs();
      process.kill(pid, 'SIGSTOP');
      try {
        const { recoveryMs } = await checkReplaced(sys, victim, run, at);
        expect(recoveryMs).toBeLessThanOrEqual(recoveryTargetMs);
        console.log(`exclusive: SIGSTOP of ${victim.name}: back after ${recoveryMs} ms (leader waits ${replaceAfterMs(leaseDefaults)} ms after the last renewal)`);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      // Thawed, the node removes what is left of its stale epoch and runs nothing of db.
      await sys.waitFor(`${victim.name} ready again`, async () => ((await sys.nodeView(victim.name)).record.state === 'ready' ? true : undefined));
      const end = await sys.waitConverged('db');
      expect(end.tasks.filter((t) => t.desired === 'running')).toHaveLength(1);
      expect((await sys.containers('db')).filter((c) => c.running)).toHaveLength(1);
    });
  }, 240_000);

  it('SIGSTOP of the node and kill -9 of the leader at once: the new leader waits lease + margin from its own start', async () => {
    await withDockerSystem({ control: fastHealth }, async (sys) => {
      const { victim, leader, run } = await placedOffLeader(sys);
      const pid = victim.proc?.pid;
      if (pid === undefined) throw new Error('no victim process');
      const at = nowNs();
      process.kill(pid, 'SIGSTOP');
      try {
        await sys.cluster.kill(leader);
        sys.cluster.start(leader);
        // The new leader knows nothing of the victim's last renewal: it waits lease + margin from its own start.
        const fresh = await sys.cluster.waitForLeader(60_000, sys.cluster.nodes.filter((n) => n !== victim));
        // Elected when its leader loops started, as its log says (waitForLeader returns only once
        // the restarted old leader answers too, which on a loaded machine can be seconds later).
        const { body: { term } } = await getJson<{ term: number }>(fresh, '/healthz');
        const loops = `leader loops started for term ${term}`;
        const electedMs = await sys.waitFor(`${fresh.name}'s ${loops}`, async () => logArrival(fresh, loops));
        const electedNs = BigInt(electedMs) * nsPerMs;
        const { recoveryMs } = await checkReplaced(sys, victim, run, at);
        const afterElectionMs = recoveryMs - Number((electedNs - at) / nsPerMs);
        expect(afterElectionMs).toBeGreaterThanOrEqual(replaceAfterMs(leaseDefaults) - 2_000);
        expect(afterElectionMs).toBeLessThanOrEqual(recoveryTargetMs);
        console.log(`exclusive: SIGSTOP of ${victim.name} and kill -9 of leader ${leader.name}: new leader ${fresh.name}; back ${afterElectionMs} ms after it was elected (${recoveryMs} ms after the SIGSTOP)`);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      await sys.waitConverged('db');
      expect((await sys.containers('db')).filter((c) => c.running)).toHaveLength(1);
    });
  }, 240_000);

  it('two-way partition of the node (its agent alive, cut off from every peer): the agent kills the task at expiry, and only then does the slot start elsewhere', async () => {
    await partitionAndReplace({ in: true, out: true }, 'two-way partition');
  }, 240_000);

  it('one-way cut the other way (the node hears the others, they never hear it): nothing runs twice', async () => {
    await partitionAndReplace({ in: false, out: true }, 'one-way cut of what it sends');
  }, 240_000);

  // iptables comes with docker.io (.ci/run installs it); the test runs as root like every system test.
  it('one-way cut (the others\' messages to the node lost): its agent kills the task at expiry; no second instance ever runs', async () => {
    await withDockerSystem({ control: fastHealth }, async (sys) => {
      const { victim, run } = await placedOffLeader(sys);
      const heal = dropTo(portOf(victim.peerAddress));
      const log = sys.events;
      if (log === undefined) throw new Error('no event log');
      try {
        // The node still reaches the others, so it is heard and not declared down; its renewals
        // commit without it ever learning so: its agent (or the fence) kills the task at expiry.
        const died = await sys.waitFor('the cut-off node\'s container killed', async () => {
          await log.catchUp(sys.cluster.clusterId);
          return runsOf(log.events).find((r) => r.containerId === run.containerId && r.endNs !== null);
        }, 60_000);
        expect(died.endNs).not.toBeNull();
      } finally {
        heal();
      }
      const end = await sys.waitFor('db running again', async () => {
        const s = await sys.service('db');
        return s.service.status.converged && s.service.status.running === 1 ? s : undefined;
      }, 90_000);
      expect(end.tasks.filter((t) => t.desired === 'running')).toHaveLength(1);
      await log.catchUp(sys.cluster.clusterId);
      log.assertWhole();
      expect(slotOverlaps(runsOf(log.events), 'db')).toEqual([]);
    });
  }, 240_000);
});
