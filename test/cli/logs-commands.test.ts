// `shoal task logs` and `shoal service logs` through main() in-process, against one node that runs
// the control plane (its agent on an in-memory runtime) on a real port: stdout and stderr kept
// apart, --tail, --since, --json, --follow until the container stops, a service's prefixes, the
// exit codes of the typed errors, usage errors and --help.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { labelKeys } from '../../src/executor/labels.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

interface Result { code: number; stdout: string; stderr: string }
interface TaskItem { id: string; slot: number; desired: string; observed: string }

const started = 'shoal memory runtime: container started';
let solo: SingleNode;
let addr: string;
let task: TaskItem;

async function shoal(...args: string[]): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { stdout += `${a.join(' ')}\n`; });
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { stderr += `${a.join(' ')}\n`; });
  try {
    const code = await main([...args, '--addr', addr]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function running(service: string): Promise<TaskItem[]> {
  const res = await solo.app.inject({ url: `/v1/services/${service}` });
  return (res.json() as { tasks: TaskItem[] }).tasks.filter((t) => t.desired === 'running' && t.observed === 'running');
}

function containerOf(taskId: string): string {
  const c = solo.runtime?.all().find((i) => i.labels[labelKeys.task] === taskId && i.state === 'running');
  if (c === undefined) throw new Error(`no running container of task ${taskId}`);
  return c.id;
}

async function apply(text: string): Promise<void> {
  const r = await solo.app.inject({ method: 'POST', url: '/v1/apply', payload: { text } });
  expect(r.statusCode, r.body).toBe(200);
}

beforeAll(async () => {
  solo = await singleNode({ control: true });
  await solo.app.listen({ port: 0, host: '127.0.0.1' });
  const a = solo.app.server.address();
  if (a === null || typeof a !== 'object') throw new Error('no address');
  addr = `127.0.0.1:${a.port}`;
  await apply('apiVersion: shoal/v1\nkind: Service\nname: echo\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 1\n');
  await until('echo running', async () => (await running('echo')).length === 1);
  task = (await running('echo'))[0] as TaskItem;
  solo.runtime?.writeLog(containerOf(task.id), 'stdout', 'hello');
  solo.runtime?.writeLog(containerOf(task.id), 'stderr', 'a warning');
});
afterAll(async () => { await solo.close(); });

describe('shoal task logs', () => {
  it("prints the container's stdout on stdout and its stderr on stderr", async () => {
    const r = await shoal('task', 'logs', task.id);
    expect(r).toEqual({ code: 0, stdout: `${started}\nhello\n`, stderr: 'a warning\n' });
  });

  it('takes --tail, --since and --json', async () => {
    expect(await shoal('task', 'logs', task.id, '--tail', '2')).toEqual({ code: 0, stdout: 'hello\n', stderr: 'a warning\n' });
    expect((await shoal('task', 'logs', task.id, '--since', '1h')).stdout).toBe(`${started}\nhello\n`);
    const json = await shoal('task', 'logs', task.id, '--tail', '1', '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ stream: 'stderr', text: 'a warning', at: expect.any(Number) });
  });

  it('with --follow prints new lines until the container stops', async () => {
    await apply('apiVersion: shoal/v1\nkind: Service\nname: brief\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 1\nrestart: {condition: never}\n');
    await until('brief running', async () => (await running('brief')).length === 1);
    const t = (await running('brief'))[0] as TaskItem;
    const id = containerOf(t.id);
    const follow = shoal('task', 'logs', t.id, '-f', '--tail', '0');
    await until('the follow to be served', async () => (await solo.app.inject({ url: '/metrics' })).body.includes('shoal_api_log_streams 1'));
    solo.runtime?.writeLog(id, 'stdout', 'late line');
    solo.runtime?.exit(id, 0);
    expect(await follow).toEqual({ code: 0, stdout: 'late line\nshoal memory runtime: container exited with code 0\n', stderr: '' });
  });

  it('exits 1 for an unknown task or one that never started, 2 on bad flags', async () => {
    const missing = await shoal('task', 'logs', 'no-such-task');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/not_found|no task no-such-task/);
    await apply('apiVersion: shoal/v1\nkind: Service\nname: nowhere\nimage: busybox:local\nconstraints: ["node.name == absent"]\nreplicas: 1\n');
    let pending = '';
    await until('the pending task', async () => {
      pending = ((await solo.app.inject({ url: '/v1/services/nowhere' })).json() as { tasks: TaskItem[] }).tasks[0]?.id ?? '';
      return pending !== '';
    });
    const notStarted = await shoal('task', 'logs', pending);
    expect(notStarted.code).toBe(1);
    expect(notStarted.stderr).toMatch(/pending/);
    expect((await shoal('task', 'logs', task.id, '--tail', 'many')).code).toBe(2);
    expect((await shoal('task', 'logs', task.id, '--since', 'yesterday')).code).toBe(2);
  });

  it('explains itself with --help', async () => {
    const r = await shoal('task', 'logs', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Usage: shoal task logs TASK/);
    expect(r.stdout).toMatch(/--follow/);
    expect(r.stdout).toMatch(/--tail N/);
    expect(r.stdout).toMatch(/--since DURATION/);
  });
});

describe('shoal service logs', () => {
  it("prints its tasks' lines with their prefix", async () => {
    const r = await shoal('service', 'logs', 'echo');
    const prefix = `echo.1.${task.id.slice(0, 12)}@solo | `;
    expect(r).toEqual({ code: 0, stdout: `${prefix}${started}\n${prefix}hello\n`, stderr: `${prefix}a warning\n` });
  });

  it('exits 1 for an unknown service, and explains itself with --help', async () => {
    expect((await shoal('service', 'logs', 'no-such')).code).toBe(1);
    const h = await shoal('service', 'logs', '--help');
    expect(h.code).toBe(0);
    expect(h.stdout).toMatch(/Usage: shoal service logs NAME/);
  });
});
