// Failover drills (shoal drill) against three real `shoal serve` processes run by the `shoal dev`
// supervisor, which starts again a node that exits asking to be restarted (a drill's kill), as
// systemd does. Each drill must report nothing lost, no read gone backwards, the target
// recovered, no peer message refused by any node, and be kept in the store (shoal drill ls); a
// node-reboot past the down timeout must see its tasks replaced. A target that never comes back
// must be reported as such, with a failing exit code. leader-isolate uses nftables (root).
// Runs under the machine-wide lock (flock /tmp/shoal-heavy.lock).

import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevSupervisor, type DevEvent } from '../../src/cli/dev-supervisor.ts';
import type { DrillReport } from '../../src/node/drill/drill-report.ts';
import { inProcess } from '../cli/in-process.ts';
import { ProcessCluster, getJson, sleep, type ClusterNode } from './process-cluster.ts';

const cluster = new ProcessCluster({ runtime: 'memory', control: { suspectAfterMs: 2000, downAfterMs: 4000, restartGraceMs: 4000 } });
let supervisor: DevSupervisor;
const events: DevEvent[] = [];
const example = fileURLToPath(new URL('../../docs/examples/web.yaml', import.meta.url));

beforeAll(async () => {
  await cluster.init();
  const logs = createWriteStream(path.join(cluster.root, 'nodes.log'));
  supervisor = new DevSupervisor(cluster.nodes, (e) => events.push(e), logs as unknown as NodeJS.WriteStream);
  supervisor.startAll();
  const n1 = cluster.nodes[0] as ClusterNode;
  for (let i = 0; ; i++) {
    const { body } = await getJson<{ items?: { record: { runtime: { status: string } } }[] }>(n1, '/v1/nodes', 5_000).catch(() => ({ body: { items: [] } }));
    if (body.items?.length === 3 && body.items.every((n) => n.record.runtime.status === 'up')) break;
    if (i > 600) throw new Error('the nodes did not register');
    await sleep(50);
  }
  // A budget that lets a drill take a whole node away: after node-reboot a node serves two of the
  // three slots, which the default budget (1) would refuse (test/api/disruption-budget.test.ts).
  const spec = path.join(cluster.root, 'web.yaml');
  writeFileSync(spec, `${readFileSync(example, 'utf8')}disruption: {maxUnavailable: 100%}\n`);
  const applied = await inProcess('apply', '-f', spec, '--timeout', '60s', '--addr', n1.apiAddress);
  expect(applied.code, applied.stderr).toBe(0);
}, 90_000);

afterAll(async () => {
  await supervisor.stopAll();
  await cluster.destroy();
});

function nodeLogs(): string {
  try {
    return readFileSync(path.join(cluster.root, 'nodes.log'), 'utf8').split('\n').slice(-60).join('\n');
  } catch {
    return '';
  }
}

async function drill(...args: string[]): Promise<{ code: number; report: DrillReport; stderr: string }> {
  const addr = (cluster.nodes[0] as ClusterNode).apiAddress;
  const r = await inProcess('drill', ...args, '--json', '--addr', addr);
  let report: DrillReport;
  try {
    report = JSON.parse(r.stdout) as DrillReport;
  } catch {
    throw new Error(`drill ${args.join(' ')} printed no report (exit ${r.code})\nstderr: ${r.stderr}\n${nodeLogs()}`);
  }
  return { code: r.code, report, stderr: r.stderr };
}

/**
 * Peer messages each node's transport refused as no correct node sends them, counted since the
 * process started (GET /metrics). A message claiming another sender (wrong_sender) or addressed
 * past its receiver (misaddressed) is dropped, and Raft lives with a lost message, so nothing
 * else in a drill fails: a proposal relayed twice through a deposed leader kept its first
 * sender's `from` and was dropped as wrong_sender 65 ms after a paused leader resumed (fixed by
 * f6e1953), and only this counter showed it. A node restarted by a drill starts from 0, so what
 * its previous process counted is not seen here; the drill's own report counts across restarts.
 */
async function refusedPeerMessages(): Promise<Record<string, { wrongSender: number; misaddressed: number }>> {
  const out: Record<string, { wrongSender: number; misaddressed: number }> = {};
  for (const n of cluster.nodes) {
    const text = await (await fetch(`http://${n.apiAddress}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    const sample = (reason: string): number => {
      const line = text.split('\n').find((l) => l.startsWith(`shoal_peer_messages_dropped_total{reason="${reason}"} `));
      if (line === undefined) throw new Error(`${n.name} has no shoal_peer_messages_dropped_total{reason="${reason}"} sample`);
      return Number(line.split(' ')[1]);
    };
    out[n.name] = { wrongSender: sample('wrong_sender'), misaddressed: sample('misaddressed') };
  }
  return out;
}

/** A follower that runs a task: the drills before may have moved every task off one node. */
async function followerWithTask(): Promise<string> {
  const n1 = cluster.nodes[0] as ClusterNode;
  const { body: view } = await getJson<{ leader: string }>(n1, '/v1/cluster', 5000);
  const { body: tasks } = await getJson<{ items: { nodeId: string | null; nodeName: string | null; observed: string }[] }>(n1, '/v1/tasks', 5000);
  const t = tasks.items.find((x) => x.observed === 'running' && x.nodeId !== null && x.nodeId !== view.leader);
  if (t?.nodeName == null) throw new Error(`no follower runs a task: ${JSON.stringify(tasks.items)}`);
  return t.nodeName;
}

describe('shoal drill on a three-process cluster', { timeout: 400_000 }, () => {
  const ran: string[] = [];

  // node-reboot stays off past control.downAfterMs (4 s here), so its tasks are replaced.
  const drills = [['leader-kill', 3], ['leader-isolate', 3], ['leader-pause', 3], ['follower-pause', 3], ['node-reboot', 6], ['disk-stall', 3]] as const;
  for (const [name, seconds] of drills) {
    it(`${name}: nothing lost, no read backwards, the target recovers, no peer message refused`, async () => {
      const { code, report } = await drill(name, '--duration', String(seconds), ...(name === 'node-reboot' ? ['--target', await followerWithTask()] : []));
      const why = JSON.stringify(report, null, 1);
      expect(report.writes.lost, why).toBe(0);
      expect(report.reads.backwards, why).toBe(0);
      expect(report.recovered, why).toBe(true);
      expect(report.writes.acknowledged, why).toBeGreaterThan(20);
      expect(report.writes.checked, why).toBeGreaterThan(10);
      expect(report.writes.checked, why).toBeLessThan(report.writes.acknowledged);
      expect(report.reads.done, why).toBeGreaterThan(10);
      expect(report.workloads.duplicated, why).toBe(0);
      if (name.startsWith('leader-') || name === 'disk-stall') {
        expect(report.newLeaderMs, why).not.toBeNull();
      }
      if (name === 'node-reboot') {
        // Off for 6 s: declared down after 4 s of silence, its in-memory containers gone with
        // the process, its tasks replaced on the others before it came back.
        expect(report.targetDownMs, why).not.toBeNull();
        expect(report.servicesBackMs, why).toBeGreaterThan(report.targetDownMs ?? Infinity);
        expect(report.workloads.restarted, why).toBeGreaterThan(0);
      }
      // No assertion that the others were not declared down: a killed leader that takes more
      // than 4 s to start again on a busy machine is down by then, as it should be.
      expect(report.peerMessagesRefused, why).toEqual({ wrongSender: 0, misaddressed: 0 });
      expect(await refusedPeerMessages()).toEqual(Object.fromEntries(cluster.nodes.map((n) => [n.name, { wrongSender: 0, misaddressed: 0 }])));
      expect(report.ok, why).toBe(true);
      expect(code).toBe(0);
      ran.push(report.id);
    });
  }

  it('keeps every report in the store (shoal drill ls)', async () => {
    const r = await inProcess('drill', 'ls', '--json', '--addr', (cluster.nodes[1] as ClusterNode).apiAddress);
    expect(r.code, r.stderr).toBe(0);
    const kept = (JSON.parse(r.stdout) as DrillReport[]).map((d) => d.id);
    expect(kept.filter((id) => ran.includes(id)).sort()).toEqual([...ran].sort());
  });

  it('shoal doctor finds a healthy cluster and a node on loopback with fresh certificates', async () => {
    const n1 = cluster.nodes[0] as ClusterNode;
    const r = await inProcess('doctor', '--data', n1.dir, '--json', '--addr', n1.apiAddress);
    const checks = Object.fromEntries((JSON.parse(r.stdout) as { checks: { name: string; status: string }[] }).checks.map((c) => [c.name, c.status]));
    expect(checks).toMatchObject({ quorum: 'ok', 'failure tolerance': 'ok', 'clock skew': 'ok', 'versions and feature level': 'ok', 'API exposure': 'ok', certificates: 'ok' });
    // The memory runtime: no Docker to ask, so this node's containers are not compared.
    expect(checks).toMatchObject({ 'container runtime': 'ok', containers: 'skip', services: 'ok', images: 'ok' });
    expect(['ok', 'warn', 'fail']).toContain(checks['disk free']);
    expect(r.code).toBe(checks['disk free'] === 'fail' ? 1 : 0);
  });

  it('a target that does not come back is reported, and the exit code says so', async () => {
    const target = cluster.nodes[2] as ClusterNode;
    const running = drill('follower-pause', '--duration', '2', '--target', target.name, '--recover-timeout', '3');
    // Killed while paused, by something else than the drill: the supervisor leaves it down.
    await sleep(1500);
    const pid = supervisor.pids()[target.name];
    if (typeof pid === 'number') process.kill(pid, 'SIGKILL');
    const { code, report } = await running;
    expect(report.recovered).toBe(false);
    expect(report.ok).toBe(false);
    expect(report.problems.join('\n')).toContain('had not caught up');
    expect(code).toBe(1);
    await supervisor.restart(target.name);
  });
});
