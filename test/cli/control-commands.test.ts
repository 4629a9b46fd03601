// The control plane's commands (apply, service, node, task) through main() in-process, against one
// node that runs the control plane (its agent on an in-memory runtime) on a real port: outputs for
// people and under --json, waiting for convergence and its failures, exit codes. One --watch runs
// as a child process (it runs until a signal).

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeCommand } from '../../fsm/index.ts';
import { main } from '../../src/cli/main.ts';
import { controlFeatureLevel, servicesCollection } from '../../src/resources/collections.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

interface Result { code: number; stdout: string; stderr: string }

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
const example = fileURLToPath(new URL('../../docs/examples/web.yaml', import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-ctl-cli-'));

async function shoal(...args: string[]): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { stdout += `${a.join(' ')}\n`; });
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { stderr += `${a.join(' ')}\n`; });
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => { stdout += String(chunk); return true; });
  try {
    const code = await main([...args, '--addr', addr]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    write.mockRestore();
  }
}

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}

let solo: SingleNode;
let addr: string;

beforeAll(async () => {
  solo = await singleNode({ control: true });
  await solo.app.listen({ port: 0, host: '127.0.0.1' });
  const a = solo.app.server.address();
  if (a === null || typeof a !== 'object') throw new Error('no address');
  addr = `127.0.0.1:${a.port}`;
  for (let i = 0; i < 200 && !(await shoal('node', 'ls', '--json')).stdout.includes('"up"'); i++) await new Promise((r) => setTimeout(r, 25));
});

afterAll(async () => {
  await solo.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('shoal apply', () => {
  it('shows a dry run and changes nothing', async () => {
    const before = solo.store.revision;
    const r = await shoal('apply', '-f', example, '--dry-run');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('web: would be created\ndry run: nothing was changed\n');
    expect(solo.store.revision).toBe(before);
  });

  it('refuses a file with problems, listing each with its path (exit 1), and one it cannot read (exit 2)', async () => {
    const bad = file('bad.yaml', 'apiVersion: shoal/v1\nkind: Service\nname: db\nimage: busybox:local\nreplica: 2\nupdate: {parallelism: 0}\n');
    const r = await shoal('apply', '-f', bad);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('shoal apply: bad_request: the specs are refused, and nothing was applied:');
    expect(r.stderr).toContain('  - services[0].replica: unknown field; did you mean replicas?');
    expect(r.stderr).toContain('  - services[0].update.parallelism: must be at least 1');
    const json = await shoal('apply', '-f', bad, '--json');
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'bad_request', details: { problems: [{ path: 'services[0].replica' }, { path: 'services[0].update.parallelism' }] } }, exitCode: 1 });
    expect((await shoal('apply', '-f', path.join(dir, 'missing.yaml'))).code).toBe(2);
  });

  it('applies the example and waits until its three tasks run', async () => {
    const r = await shoal('apply', '-f', example);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('web: created\nweb: converged, 3/3 running\n');
    expect(r.stderr).toContain('waiting for the services to converge');
    const again = await shoal('apply', '-f', example, '--json');
    expect(JSON.parse(again.stdout)).toMatchObject({ dryRun: false, rev: null, services: [{ name: 'web', outcome: 'unchanged' }], converged: [{ name: 'web', status: { converged: true } }] });
  });

  it('fails (exit 1) when the timeout passes, and when the service\'s update is paused', async () => {
    // No node has the label: its task waits for one, and says so, until the timeout.
    const nowhere = file('nowhere.yaml', 'apiVersion: shoal/v1\nkind: Service\nname: nowhere\nimage: busybox:local\nreplicas: 1\nconstraints: ["node.labels.disk == ssd"]\n');
    const timedOut = await shoal('apply', '-f', nowhere, '--timeout', '1s');
    expect(timedOut.code).toBe(1);
    expect(timedOut.stderr).toMatch(/not converged within 1 s \(the change was made and stays.*\n {2}nowhere: 0\/1 running; 1 pending: 1 node excluded by constraint node.labels.disk == ssd/);
    expect((await shoal('service', 'rm', 'nowhere')).code).toBe(0);
    const upd = file('upd.yaml', 'apiVersion: shoal/v1\nkind: Service\nname: upd\nimage: busybox:local\nreplicas: 1\n');
    expect((await shoal('apply', '-f', upd)).code).toBe(0);
    await pauseUpdate('upd');
    const paused = await shoal('apply', '-f', upd);
    expect(paused.code).toBe(1);
    expect(paused.stderr).toContain("upd's update is paused: paused by the test; fix the spec and apply it again, or: shoal service rollback upd");
    expect((await shoal('service', 'rm', 'upd')).code).toBe(0);
  });

  it('stops waiting (exit 1, tasks_failing) once every task failed the same way, and says why while it waits', async () => {
    // Its containers exit at once with code 1: retried after 2 s (the wait shows the first failures meanwhile), or not at all.
    solo.runtime?.program((spec) => spec.image === 'busybox:broken', { exitAfterMs: 0, exitCode: 1 });
    const broken = (restart: string): string => file('broken.yaml', `apiVersion: shoal/v1\nkind: Service\nname: broken\nimage: busybox:broken\nreplicas: 2\nrestart: ${restart}\n`);
    const started = Date.now();
    const retried = await shoal('apply', '-f', broken('{delay: 2s}'));
    expect(retried.code, retried.stderr).toBe(1);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(retried.stderr).toMatch(/\n {2}broken: 0\/2 running\n {4}2 tasks failed: exited with code 1\n/);
    expect(retried.stderr).toContain('broken: every task failed 2 times in a row, the same way: exited with code 1');
    expect(retried.stderr).toContain('see: shoal service ps broken');
    expect((await shoal('service', 'rm', 'broken')).code).toBe(0);
    const never = await shoal('apply', '-f', broken('{condition: never}'), '--json');
    expect(never.code).toBe(1);
    expect(JSON.parse(never.stderr.trim().split('\n').pop() ?? '')).toMatchObject({ error: { code: 'tasks_failing', message: expect.stringContaining('its restart policy tries no more') }, exitCode: 1 });
    expect((await shoal('service', 'rm', 'broken')).code).toBe(0);
  });
});

/** Marks a service's update paused, as the leader does when a new task fails within the monitor period. */
async function pauseUpdate(name: string): Promise<void> {
  const doc = solo.store.get(servicesCollection, name);
  if (doc === undefined) throw new Error(`no service ${name}`);
  const record = { ...doc.doc, updateStatus: { state: 'paused', startedAt: 1, completedAt: 2, message: 'paused by the test' } };
  const cmd = encodeCommand({ cmd: { op: 'put', collection: servicesCollection, id: name, doc: record, expect: { rev: doc.rev } }, ts: Date.now() });
  const { result } = await solo.node.propose(cmd, { featureLevel: controlFeatureLevel });
  expect((result as { ok: boolean }).ok).toBe(true);
}

describe('shoal service', () => {
  it('lists, shows tasks by slot and inspects', async () => {
    const ls = await shoal('service', 'ls');
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout.split('\n')[0]).toBe('NAME  MODE        REPLICAS  IMAGE         VERSION  UPDATE  STACK');
    expect(ls.stdout).toContain('web   replicated  3/3       nginx:alpine  1        -       -');
    const ps = await shoal('service', 'ps', 'web');
    expect(ps.stdout.split('\n').slice(0, 2)).toEqual(['web: 3/3 running', 'SLOT  TASK          NODE  DESIRED  OBSERVED  VERSION  MESSAGE']);
    expect(ps.stdout.split('\n').slice(2, 5).map((l) => l.split(/\s+/).filter((c, i) => i !== 1).join(' '))).toEqual([
      '1 solo running running 1 -', '2 solo running running 1 -', '3 solo running running 1 -',
    ]);
    const inspect = await shoal('service', 'inspect', 'web');
    expect(inspect.stdout).toContain('status   web: 3/3 running (converged)');
    expect(inspect.stdout).toContain('apiVersion: shoal/v1\nkind: Service\nname: web\nimage: nginx:alpine\n');
    const json = JSON.parse((await shoal('service', 'ps', 'web', '--json')).stdout) as { tasks: { slot: number }[] };
    expect(json.tasks.map((t) => t.slot).sort()).toEqual([1, 2, 3]);
    const missing = await shoal('service', 'ps', 'nope');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("not_found: no service named 'nope'");
  });

  it('scales and updates from flags, waiting until converged', async () => {
    // An update policy that replaces every task at once and needs no monitor period: quick to converge.
    const fast = file('web-fast.yaml', `${readFileSync(example, 'utf8')}update: {parallelism: 4, monitor: 0s}\n`);
    expect((await shoal('apply', '-f', fast)).stdout).toMatch(/^web: updated: update changed; running tasks are kept\n/);
    const scaled = await shoal('service', 'scale', 'web=4');
    expect(scaled.code, scaled.stderr).toBe(0);
    expect(scaled.stdout).toBe('web: scaled to 4 replicas\nweb: converged, 4/4 running\n');
    const updated = await shoal('service', 'update', 'web', '--replicas', '2', '--env', 'MODE=test');
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toMatch(/^web: updated: env, replicas changed; a rolling update replaces 4 tasks \(spec version 2\)\n/);
    expect(updated.stdout).toContain('web: converged, 2/2 running');
    const inspect = await shoal('service', 'inspect', 'web', '--json');
    expect(JSON.parse(inspect.stdout)).toMatchObject({ service: { record: { specVersion: 2, spec: { replicas: 2, env: { MODE: 'test' } } } } });
    expect((await shoal('service', 'update', 'web')).code).toBe(2);
    expect((await shoal('service', 'scale', 'web', 'many')).code).toBe(2);
  }, 60_000);

  it('rolls back, and refuses a service with no previous spec', async () => {
    const back = await shoal('service', 'rollback', 'web', '--timeout', '50s');
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/^web: rolling back to spec version 1\n/);
    const spec = JSON.parse((await shoal('service', 'inspect', 'web', '--json')).stdout) as { service: { record: { specVersion: number; spec: { env: object; replicas: number } } } };
    // Version 1 as it was last: scaled to 4.
    expect(spec.service.record).toMatchObject({ specVersion: 1, spec: { env: {}, replicas: 4 } });
    expect((await shoal('apply', '-f', file('other.yaml', 'apiVersion: shoal/v1\nkind: Service\nname: other\nimage: busybox:local\nreplicas: 0\n'))).code).toBe(0);
    const none = await shoal('service', 'rollback', 'other');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('other has no previous spec to roll back to');
    expect((await shoal('service', 'rm', 'other')).code).toBe(0);
  }, 60_000);

  it('lists current tasks first, one per slot, and the history with --all', async () => {
    const json = JSON.parse((await shoal('service', 'ps', 'web', '--json')).stdout) as { tasks: { desired: string }[] };
    const current = json.tasks.filter((t) => t.desired === 'running').length;
    const earlier = json.tasks.length - current;
    expect(earlier).toBeGreaterThan(0);
    const ps = (await shoal('service', 'ps', 'web')).stdout.trimEnd().split('\n');
    // The status line, the header, one row per slot, then the count of what is folded.
    expect(ps).toHaveLength(2 + current + 1);
    expect(ps.slice(2, 2 + current).every((l) => / running +running /.test(l))).toBe(true);
    expect(ps.at(-1)).toBe(`${earlier} earlier ${earlier === 1 ? 'task' : 'tasks'} (history): --all lists them`);
    const all = (await shoal('service', 'ps', 'web', '--all')).stdout.trimEnd().split('\n');
    expect(all).toHaveLength(2 + json.tasks.length);
  });

  it('rebalances step by step until balanced', async () => {
    const r = await shoal('service', 'rebalance', 'web');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^balanced: /);
  });
});

describe('shoal node and shoal task', () => {
  it('lists and inspects nodes, labels them', async () => {
    const ls = await shoal('node', 'ls');
    expect(ls.stdout.split('\n')[0]).toMatch(/^NAME +ID +STATE +AVAILABILITY +RUNTIME +TASKS +CPU +MEMORY +LABELS +VERSION$/);
    expect(ls.stdout.split('\n')[1]).toMatch(/^solo +solo +ready +active +up +4 /);
    const labelled = await shoal('node', 'label', 'solo', 'disk=ssd', 'room=attic');
    expect(labelled.stdout).toBe('solo: labels disk=ssd,room=attic\n');
    expect((await shoal('node', 'label', 'solo', '--remove', 'room')).stdout).toBe('solo: labels disk=ssd\n');
    // Checked before anything is sent: a usage error naming the rule the key breaks.
    const bad = await shoal('node', 'label', 'solo', 'bad key=x');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("label key 'bad key' (in 'bad key=x'): a label key is 1 to 253 of letters, digits");
    const inspect = await shoal('node', 'inspect', 'solo');
    expect(inspect.stdout).toContain('labels        disk=ssd');
    expect((await shoal('node', 'inspect', 'nowhere')).code).toBe(1);
  });

  it('drains a node as the disruption budget allows, says what waits, and fails at the deadline with the budget named', async () => {
    const budgeted = file('web-budget.yaml', `${readFileSync(example, 'utf8').replace('replicas: 3', 'replicas: 4')}update: {parallelism: 4, monitor: 0s}\ndisruption: {maxUnavailable: 1}\n`);
    expect((await shoal('apply', '-f', budgeted)).code).toBe(0);
    // A lone node: the first task moved has nowhere to go, and holds the budget; the others wait.
    const waiting = await shoal('node', 'drain', 'solo', '--deadline', '2s', '--json');
    expect(waiting.code).toBe(1);
    expect(JSON.parse(waiting.stderr.trim().split('\n').pop() ?? '')).toMatchObject({
      error: { code: 'disruption_budget', message: expect.stringContaining('waiting for the disruption budget of web (maxUnavailable 1): 1 slot unavailable') }, exitCode: 1,
    });
    const inspect = await shoal('service', 'inspect', 'web');
    expect(inspect.stdout).toMatch(/\nbudget {3}maxUnavailable 1: 1 slot unavailable \(slot \d: (pending: no node fits|being placed)\); 0 more may go down now\n {9}waiting for the disruption budget of web/);
  }, 30_000);

  it('drains a node past the budget with --force (its tasks stop and wait for another node), then activates it again', async () => {
    const drained = await shoal('node', 'drain', 'solo', '--force', '--deadline', '30s');
    expect(drained.code, drained.stderr).toBe(0);
    expect(drained.stdout).toMatch(/^solo: draining .*\n {2}web: 3 tasks to move, past the disruption budget \(maxUnavailable 1\): forced\nsolo: drained, no task runs there any more\n {2}web: 0\/4 running; 4 pending: .*draining/);
    expect((await shoal('node', 'pause', 'solo')).stdout).toBe('solo: paused (keeps its tasks, takes no new ones)\n');
    expect((await shoal('node', 'activate', 'solo')).stdout).toBe('solo: active (takes new tasks)\n');
    expect((await shoal('node', 'activate', 'solo')).stdout).toBe('solo: active (takes new tasks) (it already was)\n');
    const running = await shoal('task', 'ls', '--service', 'web', '--state', 'running', '--json');
    expect(running.code).toBe(0);
    const wait = await shoal('apply', '-f', example);
    expect(wait.code, wait.stderr).toBe(0);
    const tasks = await shoal('task', 'ls', '--service', 'web', '--state', 'running');
    expect(tasks.stdout.split('\n')[0]).toBe('SERVICE  SLOT  TASK          NODE  DESIRED  OBSERVED  MESSAGE');
    expect(tasks.stdout.trim().split('\n')).toHaveLength(4);
    expect((await shoal('task', 'ls', '--state', 'sleeping')).code).toBe(2);
    expect((await shoal('task', 'ls', '--node', 'nowhere')).code).toBe(1);
  }, 60_000);
});

describe('--watch', () => {
  it('prints a list again when it changes, until a signal', async () => {
    const child = spawn(process.execPath, [bin, 'service', 'ls', '--watch', '--json', '--addr', addr], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
    const lines = async (n: number): Promise<string[]> => {
      for (let i = 0; i < 400 && stdout.split('\n').length <= n; i++) await new Promise((r) => setTimeout(r, 50));
      return stdout.split('\n').slice(0, n);
    };
    const [first] = await lines(1);
    expect((JSON.parse(first ?? '') as { items: { record: { spec: { replicas: number } } }[] }).items[0]?.record.spec.replicas).toBe(3);
    expect((await shoal('service', 'scale', 'web', '1', '--detach')).code).toBe(0);
    const shown = await lines(2);
    const replicas = shown.map((l) => (JSON.parse(l) as { items: { record: { spec: { replicas: number } } }[] }).items[0]?.record.spec.replicas);
    expect(replicas).toEqual([3, 1]);
    const closed = new Promise<number | null>((r) => child.on('close', r));
    child.kill('SIGTERM');
    expect(await closed).toBe(0);
  }, 30_000);
});
