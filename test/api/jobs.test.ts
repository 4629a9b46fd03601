// The jobs' routes through inject(), on one node that runs the control plane with an in-memory
// runtime: apply of Job documents (strict, a name shared with a service refused), the schedule
// running runs at their times, `run` (a manual run now; refused under forbid while one runs),
// suspend and resume, history, remove, and the reserved collections refused by /v1/docs.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogued, expectError, problemPaths } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';
import { ClockWatch, type ClockReport } from '../../src/node/clock-watch.ts';

interface RunView { id: string; job: string; state: string; cause: string; attempts: number; taskId: string | null; nodeName: string | null; exitCode: number | null; scheduledAt: number }
interface JobView { name: string; schedule: string | null; suspended: boolean; active: number; nextAt: number | null; lastRun: RunView | null; lastFinished: RunView | null }

let s: SingleNode;
beforeAll(async () => {
  s = await singleNode({ control: true });
  // Containers of the `chore` image exit 0 after 300 ms, those of `slow` run until stopped.
  s.runtime?.program((spec) => spec.image === 'chore:1', { exitAfterMs: 300, exitCode: 0 });
  await until('the node registered', async () => ((await s.app.inject({ url: '/v1/nodes' })).json() as { items: unknown[] }).items.length === 1);
});
afterAll(async () => { await s.close(); });

async function get<T>(url: string): Promise<T> {
  const res = await s.app.inject({ url });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as T;
}
const post = (url: string, payload?: unknown) => s.app.inject({ method: 'POST', url, ...(payload !== undefined ? { payload: payload as object } : {}) });

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const job = (name: string) => get<{ job: JobView; runs: RunView[] }>(`/v1/jobs/${name}`);
const doc = (name: string, extra: Record<string, unknown> = {}) => ({ apiVersion: 'shoal/v1', kind: 'Job', name, image: 'chore:1', ...extra });

describe('jobs through the API', () => {
  it('refuses a bad Job with every problem at once', async () => {
    const res = await post('/v1/apply', { documents: [doc('bad', { schedule: '61 * * * *', concurrency: 'sometimes', timezone: 'Mars/Base', backoffLimit: -1, replicas: 2 })] });
    const e = expectError(res, 'bad_request');
    expect(problemPaths(e).sort()).toEqual(['jobs[0].backoffLimit', 'jobs[0].concurrency', 'jobs[0].replicas', 'jobs[0].schedule', 'jobs[0].timezone'].sort());
  });

  it('a job and a service never share a name', async () => {
    const res = await post('/v1/apply', { documents: [{ apiVersion: 'shoal/v1', kind: 'Service', name: 'twin', image: 'chore:1' }, doc('twin')] });
    expect(problemPaths(expectError(res, 'bad_request'))).toEqual(['jobs[0].name']);
  });

  it('runs a manual job at once, and keeps its run', async () => {
    const a = await post('/v1/apply', { documents: [doc('once')] });
    expect(a.statusCode, a.body).toBe(200);
    expect(a.json()).toMatchObject({ jobs: [{ name: 'once', outcome: 'created', specVersion: 1 }] });
    expect((await job('once')).job).toMatchObject({ schedule: null, nextAt: null, active: 0, lastRun: null });
    const r = await post('/v1/jobs/once/run');
    expect(r.statusCode, r.body).toBe(200);
    const id = (r.json() as { id: string }).id;
    expect(id).toMatch(/^once-\d{8}t\d{6}(\d{3})?z-manual$/);
    await until('the manual run succeeded', async () => (await job('once')).runs[0]?.state === 'succeeded');
    const v = await job('once');
    expect(v.runs).toHaveLength(1);
    expect(v.runs[0]).toMatchObject({ id, cause: 'manual', attempts: 1, exitCode: 0, nodeName: 'solo' });
  });

  it('runs a scheduled job at its times, once each, and keeps the history asked for', async () => {
    const a = await post('/v1/apply', { documents: [doc('tick', { schedule: '@every 1s', history: { succeeded: 2, failed: 1 } })] });
    expect(a.statusCode, a.body).toBe(200);
    await until('four runs created', async () => {
      const v = await job('tick');
      return v.runs.filter((r) => r.state === 'succeeded').length >= 2 && (v.runs[0]?.scheduledAt ?? 0) - (v.runs[v.runs.length - 1]?.scheduledAt ?? 0) >= 1_000;
    });
    const v = await job('tick');
    expect(v.runs.filter((r) => r.state === 'succeeded').length).toBeLessThanOrEqual(2);
    expect(new Set(v.runs.map((r) => r.scheduledAt)).size).toBe(v.runs.length);
    for (const r of v.runs) expect(r.scheduledAt % 1_000).toBe(0);
  });

  it('suspend stops the schedule, resume starts it again', async () => {
    expect((await post('/v1/jobs/tick/suspend')).statusCode).toBe(200);
    expect((await job('tick')).job).toMatchObject({ suspended: true, nextAt: null });
    expect((await post('/v1/jobs/tick/resume')).statusCode).toBe(200);
    expect((await job('tick')).job.suspended).toBe(false);
    expect((await job('tick')).job.nextAt).not.toBeNull();
  });

  it('run is refused under forbid while a run is going', async () => {
    s.runtime?.program((spec) => spec.image === 'slow:1', { exitAfterMs: null });
    expect((await post('/v1/apply', { documents: [doc('long', { image: 'slow:1' })] })).statusCode).toBe(200);
    expect((await post('/v1/jobs/long/run')).statusCode).toBe(200);
    await until('the run is running', async () => (await job('long')).runs[0]?.state === 'running');
    const res = await post('/v1/jobs/long/run');
    expect(expectError(res, 'job_run_active')).toMatchObject({ job: 'long' });
    expect(catalogued(res).message).toMatch(/forbids overlapping runs/);
  });

  it('removing a job stops its attempt and deletes its runs', async () => {
    const res = await s.app.inject({ method: 'DELETE', url: '/v1/jobs/long' });
    expect(res.statusCode, res.body).toBe(200);
    expectError(await s.app.inject({ url: '/v1/jobs/long' }), 'not_found');
    await until('the attempt is gone', async () => ((await get<{ items: { service: string }[] }>('/v1/tasks')).items.every((t) => t.service !== 'long')));
  });

  it('the job collections are reserved', async () => {
    const res = await s.app.inject({ method: 'PUT', url: '/v1/docs/shoal.jobs/x', payload: { a: 1 } });
    expectError(res, 'bad_request');
    expect(catalogued(res).message).toMatch(/reserved for the control plane/);
  });

  it('lists jobs', async () => {
    const l = await get<{ items: JobView[] }>('/v1/jobs');
    expect(l.items.map((j) => j.name)).toEqual(['once', 'tick']);
    expect(l.items[0]?.lastFinished?.state).toBe('succeeded');
    expect(l).not.toHaveProperty('clock');
  });

  it('the list carries the answering node\'s view of the clocks: a leader whose clock is not synchronized says it holds', async () => {
    const watch = new ClockWatch({ node: s.node, synchronized: () => false, record: () => {}, log: { info: () => {}, warn: () => {} } });
    s.ctx.jobClock = () => watch.report();
    try {
      const l = await get<{ clock: ClockReport }>('/v1/jobs');
      expect(l.clock).toMatchObject({ node: s.node.id, leader: true, synchronized: false, skewMaxMs: 30_000, skewMs: null, offsets: [] });
      expect(l.clock.hold).toMatch(/not synchronized/);
    } finally {
      delete s.ctx.jobClock;
    }
  });
});
