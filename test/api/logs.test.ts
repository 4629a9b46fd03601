// The log routes through inject(), on one node that runs the control plane with its agent on an
// in-memory runtime: a task's log (text and NDJSON, tail, since, follow until the container
// stops), a service's logs merged with prefixes, the typed errors (no such task, a task that never
// started, a runtime that is down, a node that does not answer), the proxy to the node that runs a
// task (here: the node itself, on a real port), and the bound on log streams.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRemoteTaskLog } from '../../src/api/log-source.ts';
import type { NodeRecord } from '../../src/resources/records.ts';
import { ShoalError } from '../../src/errors.ts';
import { labelKeys } from '../../src/executor/labels.ts';
import type { LogLine } from '../../src/executor/runtime.ts';
import { expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

interface TaskItem { id: string; slot: number; desired: string; observed: string; nodeId: string | null }

const started = 'shoal memory runtime: container started';
let s: SingleNode;
let tasks: TaskItem[];
let addr: string;

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function running(service: string): Promise<TaskItem[]> {
  const res = await s.app.inject({ url: `/v1/services/${service}` });
  return (res.json() as { tasks: TaskItem[] }).tasks.filter((t) => t.desired === 'running' && t.observed === 'running');
}

function containerOf(taskId: string): string {
  const c = s.runtime?.all().find((i) => i.labels[labelKeys.task] === taskId && i.state === 'running');
  if (c === undefined) throw new Error(`no running container of task ${taskId}`);
  return c.id;
}

function apply(text: string): Promise<unknown> {
  return s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text } }).then((r) => {
    expect(r.statusCode, r.body).toBe(200);
  });
}

beforeAll(async () => {
  s = await singleNode({ control: true, limits: { logStreamsMax: 3 } });
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  const a = s.app.server.address();
  if (a === null || typeof a !== 'object') throw new Error('no address');
  addr = `127.0.0.1:${a.port}`;
  await apply('apiVersion: shoal/v1\nkind: Service\nname: echo\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 2\n');
  await until('echo running twice', async () => (await running('echo')).length === 2);
  tasks = (await running('echo')).sort((x, y) => x.slot - y.slot);
  for (const t of tasks) s.runtime?.writeLog(containerOf(t.id), 'stdout', `hello from slot ${t.slot}`);
  s.runtime?.writeLog(containerOf(tasks[0]?.id ?? ''), 'stderr', 'a warning');
});
afterAll(async () => { await s.close(); });

const first = (): TaskItem => tasks[0] as TaskItem;

describe('GET /v1/tasks/{id}/logs', () => {
  it('answers the lines as the container wrote them, stdout and stderr', async () => {
    const res = await s.app.inject({ url: `/v1/tasks/${first().id}/logs` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body).toBe(`${started}\nhello from slot 1\na warning\n`);
  });

  it('answers NDJSON with format=json; tail and since select lines', async () => {
    const res = await s.app.inject({ url: `/v1/tasks/${first().id}/logs?format=json` });
    expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const lines = res.body.trim().split('\n').map((l) => JSON.parse(l) as LogLine);
    expect(lines.map((l) => [l.stream, l.text])).toEqual([['stdout', started], ['stdout', 'hello from slot 1'], ['stderr', 'a warning']]);
    expect(lines.every((l) => typeof l.at === 'number' && l.at > 0)).toBe(true);
    expect((await s.app.inject({ url: `/v1/tasks/${first().id}/logs?tail=1` })).body).toBe('a warning\n');
    expect((await s.app.inject({ url: `/v1/tasks/${first().id}/logs?tail=0` })).body).toBe('');
    const after = (lines[2]?.at ?? 0) + 1;
    expect((await s.app.inject({ url: `/v1/tasks/${first().id}/logs?since=${after}` })).body).toBe('');
  });

  it('follows new lines until the container stops', async () => {
    await apply('apiVersion: shoal/v1\nkind: Service\nname: brief\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 1\nrestart: {condition: never}\n');
    await until('brief running', async () => (await running('brief')).length === 1);
    const [t] = await running('brief');
    const id = containerOf(t?.id ?? '');
    const follow = s.app.inject({ url: `/v1/tasks/${t?.id ?? ''}/logs?follow=true&tail=0` });
    await new Promise((r) => setTimeout(r, 50));
    s.runtime?.writeLog(id, 'stdout', 'late line');
    s.runtime?.exit(id, 0);
    const res = await follow;
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('late line\nshoal memory runtime: container exited with code 0\n');
  });

  it('says not_found for an unknown task, and bad_request for a bad tail or since', async () => {
    expectError(await s.app.inject({ url: '/v1/tasks/no-such-task/logs' }), 'not_found');
    expectError(await s.app.inject({ url: `/v1/tasks/${first().id}/logs?tail=-1` }), 'bad_request');
    expectError(await s.app.inject({ url: `/v1/tasks/${first().id}/logs?tail=100001` }), 'bad_request');
    expectError(await s.app.inject({ url: `/v1/tasks/${first().id}/logs?since=soon` }), 'bad_request');
    expectError(await s.app.inject({ url: `/v1/tasks/${first().id}/logs?follow=yes` }), 'bad_request');
  });

  it('says task_not_started for a task no node can take', async () => {
    await apply('apiVersion: shoal/v1\nkind: Service\nname: nowhere\nimage: busybox:local\nconstraints: ["node.name == absent"]\nreplicas: 1\n');
    let id = '';
    await until('the pending task', async () => {
      const res = await s.app.inject({ url: '/v1/services/nowhere' });
      id = (res.json() as { tasks: TaskItem[] }).tasks[0]?.id ?? '';
      return id !== '';
    });
    const res = await s.app.inject({ url: `/v1/tasks/${id}/logs` });
    expectError(res, 'task_not_started');
    expect(res.json()).toMatchObject({ details: { observed: 'pending' } });
  });

  it('says node_unreachable (runtime_unavailable) while the runtime is down', async () => {
    s.runtime?.setUnavailable('dial unix /var/run/docker.sock: connect: no such file or directory');
    try {
      const res = await s.app.inject({ url: `/v1/tasks/${first().id}/logs` });
      expectError(res, 'node_unreachable');
      expect(res.json()).toMatchObject({ details: { node: 'solo', reason: 'runtime_unavailable' } });
    } finally {
      s.runtime?.setAvailable();
    }
  });
});

describe('GET /v1/services/{name}/logs', () => {
  it("merges its running tasks' lines, each prefixed by its task", async () => {
    const res = await s.app.inject({ url: '/v1/services/echo/logs' });
    expect(res.statusCode).toBe(200);
    const lines = res.body.trim().split('\n').sort();
    const prefix = (t: TaskItem) => `echo.${t.slot}.${t.id.slice(0, 12)}@solo | `;
    const [a, b] = tasks as [TaskItem, TaskItem];
    expect(lines).toEqual([
      `${prefix(a)}${started}`, `${prefix(a)}a warning`, `${prefix(a)}hello from slot 1`,
      `${prefix(b)}${started}`, `${prefix(b)}hello from slot 2`,
    ].sort());
    const json = (await s.app.inject({ url: '/v1/services/echo/logs?format=json&tail=1' })).body.trim().split('\n').map((l) => JSON.parse(l) as object);
    expect(json).toEqual(expect.arrayContaining([
      expect.objectContaining({ task: a.id, slot: 1, node: 'solo', stream: 'stderr', text: 'a warning' }),
      expect.objectContaining({ task: b.id, slot: 2, node: 'solo', stream: 'stdout', text: 'hello from slot 2' }),
    ]));
    expect(json).toHaveLength(2);
  });

  it('says not_found for an unknown service, and overloaded past logStreamsMax', async () => {
    expectError(await s.app.inject({ url: '/v1/services/no-such/logs' }), 'not_found');
    // echo has two tasks (two streams); three follows of one task each hold the other three slots.
    const holds = ['?follow=true', '?follow=true', '?follow=true'].map(() => s.app.inject({ url: `/v1/tasks/${first().id}/logs?follow=true&tail=0` }));
    try {
      await until('three follows open', async () => (await s.app.inject({ url: '/metrics' })).body.includes('shoal_api_log_streams 3'));
      expectError(await s.app.inject({ url: '/v1/services/echo/logs' }), 'overloaded');
      expectError(await s.app.inject({ url: `/v1/tasks/${first().id}/logs` }), 'overloaded');
    } finally {
      for (const c of s.ctx.streams) c();
      await Promise.all(holds);
    }
  });
});

describe('the proxy to the node that runs a task', () => {
  const self = (): NodeRecord => ({ id: 'solo', name: 'solo', addresses: { api: addr, peer: 'memory:solo' } } as NodeRecord);

  it("reads a task's log through that node's API (NDJSON), with tail", async () => {
    const reader = await openRemoteTaskLog(s.ctx, self(), first().id, { follow: false, tailLines: 2, sinceMs: null });
    const got: LogLine[] = [];
    for await (const l of reader) got.push(l);
    expect(got.map((l) => [l.stream, l.text])).toEqual([['stdout', 'hello from slot 1'], ['stderr', 'a warning']]);
  });

  it("passes on the other node's typed error, and says node_unreachable when it does not answer", async () => {
    const missing = await openRemoteTaskLog(s.ctx, self(), 'no-such-task', { follow: false, tailLines: null, sinceMs: null }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ShoalError);
    expect(missing).toMatchObject({ code: 'not_found', details: { node: 'solo' } });
    const down = { ...self(), addresses: { api: '127.0.0.1:1', peer: 'memory:x' } };
    const err = await openRemoteTaskLog(s.ctx, down, first().id, { follow: false, tailLines: null, sinceMs: null }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ShoalError);
    expect(err).toMatchObject({ code: 'node_unreachable', details: { node: 'solo' } });
  });
});
