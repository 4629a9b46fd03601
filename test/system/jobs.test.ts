// Jobs on a real three-process cluster running real containers on the machine's Docker daemon
// (docker-system.ts; docs/control-plane.md, "Jobs"). One cluster for every case (the cases use
// jobs of their own): an `@every 5s` job whose container appends its run id to a file on a
// mount shared by the three nodes (one daemon) keeps running each time once across a kill of
// the leader; a forbid job longer than its interval never runs twice at once; `job run` starts
// a run at once; history keeps the last N. Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/jobs.test.ts

import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runId } from '../../src/resources/jobs.ts';
import { testImage } from '../executor/test-image.ts';
import { DockerSystem } from './docker-system.ts';

interface RunView { id: string; state: string; cause: string; scheduledAt: number; message: string | null; attempts: number }

const fastHealth = { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 };
let sys: DockerSystem;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-jobs-'));
  chmodSync(dir, 0o777);
  sys = new DockerSystem({ control: fastHealth });
  await sys.start();
}, 120_000);

afterAll(async () => {
  await sys.close();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

function jobDoc(name: string, script: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'shoal/v1', kind: 'Job', name, image: testImage, command: ['sh', '-c', script], stopGracePeriod: '1s',
    mounts: [{ type: 'bind', source: dir, target: '/out' }], ...fields,
  };
}

async function runs(name: string): Promise<RunView[]> {
  const r = await sys.api<{ runs: RunView[] }>('GET', `/v1/jobs/${name}`);
  if (r.status !== 200) throw new Error(`GET /v1/jobs/${name} answered ${r.status}`);
  return r.body.runs;
}

const lines = (file: string): string[] => (existsSync(path.join(dir, file)) ? readFileSync(path.join(dir, file), 'utf8').split('\n').filter((l) => l !== '') : []);

describe('jobs on three processes with Docker', () => {
  it('@every 5s: a kill of the leader between runs leaves no run missing and none twice', async () => {
    await sys.apply(jobDoc('tick', 'echo "$SHOAL_JOB_RUN" >> /out/tick', { schedule: '@every 5s', history: { succeeded: 2, failed: 20 } }));
    // Two runs, then the leader is killed just after one finished (between runs).
    await sys.waitFor('two runs of tick', async () => (lines('tick').length >= 2 ? true : undefined), 30_000);
    // Between runs: the newest run's success is recorded (an attempt whose result was not recorded
    // when its node died is retried under the same id, as documented), and the next is 2 s away at least.
    await sys.waitFor('a run of tick recorded succeeded, the next not due yet', async () => {
      const newest = (await runs('tick'))[0];
      const nextInMs = 5_000 - (Date.now() % 5_000);
      return newest?.state === 'succeeded' && lines('tick').includes(newest.id) && nextInMs > 2_000 ? true : undefined;
    }, 30_000);
    const leader = await sys.leader();
    await sys.cluster.kill(leader);
    const afterKill = lines('tick').length;
    await sys.waitFor('three runs of tick after the kill', async () => (lines('tick').length >= afterKill + 3 ? true : undefined), 45_000);
    sys.cluster.start(leader);

    const ids = lines('tick');
    expect(new Set(ids).size, `a run id written twice: ${ids.join(' ')}`).toBe(ids.length);
    // Every scheduled time from the first to the last written is there, or recorded missed.
    const missed = new Set((await runs('tick')).filter((r) => r.state === 'missed').map((r) => r.id));
    const times = ids.map((id) => Date.parse(id.replace(/^tick-(\d{4})(\d{2})(\d{2})t(\d{2})(\d{2})(\d{2})z$/, '$1-$2-$3T$4:$5:$6Z')));
    const first = Math.min(...times);
    const last = Math.max(...times);
    const absent: string[] = [];
    for (let t = first; t <= last; t += 5_000) {
      const id = runId('tick', t, 'schedule');
      if (!ids.includes(id) && !missed.has(id)) absent.push(id);
    }
    expect(absent, `runs neither written nor recorded missed (written: ${ids.join(' ')})`).toEqual([]);
  }, 150_000);

  it('history keeps the last N succeeded runs', async () => {
    const r = await runs('tick');
    expect(r.filter((x) => x.state === 'succeeded').length).toBeLessThanOrEqual(2);
    expect(r.filter((x) => x.state === 'succeeded').length).toBeGreaterThanOrEqual(1);
    const suspended = await sys.api<unknown>('POST', '/v1/jobs/tick/suspend', {});
    expect(suspended.status).toBe(200);
  }, 30_000);

  it('forbid: a job running longer than its interval is not started again meanwhile', async () => {
    await sys.apply(jobDoc('slow', 'echo "start $SHOAL_JOB_RUN" >> /out/slow; sleep 4; echo "end $SHOAL_JOB_RUN" >> /out/slow', { schedule: '@every 2s' }));
    await sys.waitFor('three runs of slow finished', async () => (lines('slow').filter((l) => l.startsWith('end')).length >= 3 ? true : undefined), 60_000);
    expect((await sys.api<unknown>('POST', '/v1/jobs/slow/suspend', {})).status).toBe(200);
    // Starts and ends alternate: never a start while another run is still going.
    const l = lines('slow');
    l.forEach((line, i) => expect(line.split(' ')[0], `line ${i}: ${l.join(' | ')}`).toBe(i % 2 === 0 ? 'start' : 'end'));
    const r = await runs('slow');
    expect(r.some((x) => x.state === 'missed' || x.scheduledAt % 2_000 === 0)).toBe(true);
  }, 90_000);

  it('job run starts one at once', async () => {
    await sys.apply(jobDoc('manual', 'echo "$SHOAL_JOB_RUN" >> /out/manual'));
    const r = await sys.api<{ id: string }>('POST', '/v1/jobs/manual/run', {});
    expect(r.status).toBe(200);
    await sys.waitFor('the manual run written', async () => (lines('manual').includes(r.body.id) ? true : undefined), 30_000);
    await sys.waitFor('the manual run recorded succeeded', async () => ((await runs('manual'))[0]?.state === 'succeeded' ? true : undefined), 30_000);
    expect((await runs('manual'))[0]).toMatchObject({ id: r.body.id, state: 'succeeded', cause: 'manual', attempts: 1 });
    expect(lines('manual')).toEqual([r.body.id]);
  }, 45_000);
});
