// The control plane's commands on a real cluster: three `shoal serve` processes, each running its
// tasks on the in-memory runtime (`runtime: {kind: memory}`), driven by the `shoal` command as a
// user runs it, against different nodes. Apply the example (three tasks, one per node), scale to
// five, drain a node and see its tasks move, update and roll back, then bring the node back and
// rebalance; read a task's and the service's logs through another node than the one running them.
// Then a rebalance, a rolling update and a drain at once, watched from outside: never more slots down than the
// service's disruption budget (issue 36). Runs under the machine-wide lock (flock /tmp/shoal-heavy.lock).

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { getJson, sleep, useCluster, type ClusterNode } from '../cluster/process-cluster.ts';

interface Result { code: number; stdout: string; stderr: string }
interface Task { id: string; nodeName: string | null; desired: string; observed: string; record: { specVersion: number } }

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
const example = fileURLToPath(new URL('../../docs/examples/web.yaml', import.meta.url));
const cluster = useCluster({ runtime: 'memory' });
const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-ctl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function shoal(node: ClusterNode, ...args: string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env.SHOAL_ADDR;
    const child = spawn(process.execPath, [bin, ...args, '--addr', node.apiAddress], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const node = (i: number): ClusterNode => cluster.nodes[i] as ClusterNode;

async function running(): Promise<Task[]> {
  const { body } = await getJson<{ tasks: Task[] }>(node(0), '/v1/services/web', 5_000);
  return body.tasks.filter((t) => t.desired === 'running' && t.observed === 'running');
}

function perNode(tasks: readonly Task[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tasks) out[t.nodeName ?? '-'] = (out[t.nodeName ?? '-'] ?? 0) + 1;
  return out;
}

function expectOk(r: Result, what: string): void {
  expect(r.code, `${what}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\n${cluster.tailLogs(15)}`).toBe(0);
}

describe('the control plane commands on three processes', () => {
  it('applies the example, scales, drains, updates, rolls back and rebalances', async () => {
    for (let i = 0; ; i++) {
      // Until the cluster has a leader, the read answers an error (no items).
      const { body } = await getJson<{ items?: { record: { runtime: { status: string } } }[] }>(node(0), '/v1/nodes', 5_000).catch(() => ({ body: { items: [] } }));
      if (body.items?.length === 3 && body.items.every((n) => n.record.runtime.status === 'up')) break;
      if (i > 600) throw new Error(`the nodes did not register\n${cluster.tailLogs()}`);
      await sleep(50);
    }
    const applied = await shoal(node(0), 'apply', '-f', example, '--timeout', '60s');
    expectOk(applied, 'apply');
    expect(applied.stdout).toBe('web: created\nweb: converged, 3/3 running\n');
    expect(perNode(await running())).toEqual({ n1: 1, n2: 1, n3: 1 });

    // Logs come from the node that runs the task, through the node asked (a proxy over the API).
    const onN3 = (await running()).find((t) => t.nodeName === 'n3') as Task;
    const taskLogs = await shoal(node(0), 'task', 'logs', onN3.id);
    expectOk(taskLogs, 'task logs');
    expect(taskLogs.stdout).toBe('shoal memory runtime: container started\n');
    const serviceLogs = await shoal(node(1), 'service', 'logs', 'web');
    expectOk(serviceLogs, 'service logs');
    expect(serviceLogs.stdout.trim().split('\n').map((l) => l.replace(/^web\.\d+\.[0-9a-f]+@/, '')).sort())
      .toEqual(['n1', 'n2', 'n3'].map((n) => `${n} | shoal memory runtime: container started`));

    expectOk(await shoal(node(1), 'service', 'scale', 'web', '5', '--timeout', '60s'), 'scale');
    const five = await running();
    expect(five).toHaveLength(5);
    expect(Object.keys(perNode(five)).sort()).toEqual(['n1', 'n2', 'n3']);

    const drained = await shoal(node(2), 'node', 'drain', 'n2', '--deadline', '60s');
    expectOk(drained, 'drain');
    // Its moves go one at a time (the budget: the update's parallelism, 1).
    expect(drained.stdout).toMatch(/^n2: draining .*\n {2}web: (?:1 task to move within its disruption budget \(maxUnavailable 1\)|2 tasks to move; waiting for the disruption budget of web \(maxUnavailable 1\): .*)\nn2: drained, no task runs there any more\n {2}web: 5\/5 running\n$/);
    const moved = await running();
    expect(moved).toHaveLength(5);
    expect(perNode(moved).n2).toBeUndefined();

    // Replace every task at once, good as soon as it runs: the update and the rollback are quick.
    const fast = path.join(dir, 'web.yaml');
    writeFileSync(fast, `${readFileSync(example, 'utf8').replace('replicas: 3', 'replicas: 5')}update: {parallelism: 5, monitor: 0s}\n`);
    expectOk(await shoal(node(0), 'apply', '-f', fast, '--timeout', '60s'), 'apply the update policy');
    const updated = await shoal(node(1), 'service', 'update', 'web', '--image', 'busybox:v2', '--timeout', '60s');
    expectOk(updated, 'update');
    expect(updated.stdout).toContain('a rolling update replaces 5 tasks (spec version 2)');
    expect((await running()).map((t) => t.record.specVersion)).toEqual([2, 2, 2, 2, 2]);

    const back = await shoal(node(2), 'service', 'rollback', 'web', '--timeout', '60s');
    expectOk(back, 'rollback');
    expect(back.stdout).toBe('web: rolling back to spec version 1\nweb: converged, 5/5 running\n');
    const rolled = await running();
    expect(rolled.map((t) => t.record.specVersion)).toEqual([1, 1, 1, 1, 1]);
    expect(perNode(rolled).n2).toBeUndefined();

    expectOk(await shoal(node(0), 'node', 'activate', 'n2'), 'activate');
    const rebalanced = await shoal(node(0), 'service', 'rebalance', 'web', '--timeout', '60s');
    expectOk(rebalanced, 'rebalance');
    expect(rebalanced.stdout).toMatch(/off n[13] .* toward n2/);
    const spread = perNode(await running());
    expect(Object.values(spread).sort()).toEqual([1, 2, 2]);
  }, 300_000);

  it('runs a rebalance, a rolling update and a drain together without ever taking more slots down than the disruption budget', async () => {
    // n1 emptied and back: a rebalance has work. Parallelism 2 alone would replace two at once,
    // and the drain and the rebalance would move tasks beside them.
    expectOk(await shoal(node(0), 'node', 'drain', 'n1', '--deadline', '60s'), 'drain n1');
    expectOk(await shoal(node(0), 'node', 'activate', 'n1'), 'activate n1');
    const budgeted = path.join(dir, 'web-budget.yaml');
    writeFileSync(budgeted, `${readFileSync(example, 'utf8').replace('replicas: 3', 'replicas: 5')}update: {parallelism: 2, monitor: 1s}\ndisruption: {maxUnavailable: 1}\n`);
    expectOk(await shoal(node(0), 'apply', '-f', budgeted, '--timeout', '60s'), 'apply the budget');
    const before = await running();
    expect(before).toHaveLength(5);
    expect(perNode(before).n1).toBeUndefined();
    expect(perNode(before).n3).toBeGreaterThan(0);

    // Watch the service from outside, every 50 ms, while all three run.
    let watching = true;
    let worst = 0;
    let held = '';
    const watcher = (async () => {
      while (watching) {
        const { body } = await getJson<{ service: { status: { disruption: { unavailable: unknown[]; waiting: string | null } } } }>(node(1), '/v1/services/web', 5_000)
          .catch(() => ({ body: undefined }));
        const d = body?.service.status.disruption;
        if (d !== undefined) {
          worst = Math.max(worst, d.unavailable.length);
          if (d.waiting !== null && held === '') held = d.waiting;
        }
        await sleep(50);
      }
    })();
    // The rebalance's first move takes the budget; then the update and the drain join it.
    const rebalancing = shoal(node(2), 'service', 'rebalance', 'web', '--timeout', '90s');
    for (let i = 0; worst === 0; i++) {
      if (i > 400) throw new Error(`the rebalance moved nothing\n${cluster.tailLogs(15)}`);
      await sleep(25);
    }
    const [rebalanced, updated, drained] = await Promise.all([
      rebalancing,
      shoal(node(0), 'service', 'update', 'web', '--image', 'busybox:v3', '--timeout', '90s'),
      shoal(node(1), 'node', 'drain', 'n3', '--deadline', '90s'),
    ]);
    watching = false;
    await watcher;
    expectOk(rebalanced, 'rebalance');
    expectOk(updated, 'update');
    expectOk(drained, 'drain');
    expect(rebalanced.stdout).toMatch(/off n[23] .* toward n1/);
    expect(worst, `the most slots seen unavailable at once (held back: ${held})`).toBe(1);
    // The others had to wait for the budget at some point: the rebalance's, the update's and the drain's moves share it.
    expect(held).toMatch(/^waiting for the disruption budget of web \(maxUnavailable 1\): \d slots? unavailable.*; waiting: (the rolling update|the drain of n3|a rebalance off n[23]) \(\d tasks?\)/);
    const after = await running();
    // 5 tasks, or fewer when a drain's or rebalance's replacement started on the new spec first.
    const version = Number(/a rolling update replaces [1-5] tasks? \(spec version (\d+)\)/.exec(updated.stdout)?.[1]);
    expect(after.map((t) => t.record.specVersion), updated.stdout).toEqual([version, version, version, version, version]);
    expect(perNode(after).n3).toBeUndefined();
  }, 180_000);
});
