// shoal job (ls, ps, run, logs, suspend, resume, rm) and shoal apply of a Job, through main()
// in-process against one node that runs the control plane on an in-memory runtime.

import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

interface Result { code: number; stdout: string; stderr: string }

let solo: SingleNode;
let addr: string;

async function shoal(...args: string[]): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => { stdout += `${a.join(' ')}\n`; });
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => { stderr += `${a.join(' ')}\n`; });
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => { stdout += String(chunk); return true; });
  try {
    return { code: await main([...args, '--addr', addr]), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    write.mockRestore();
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  solo = await singleNode({ control: true });
  solo.runtime?.program((spec) => spec.image === 'chore:1', { exitAfterMs: 200, exitCode: 0 });
  await solo.app.listen({ port: 0, host: '127.0.0.1' });
  const a = solo.app.server.address();
  addr = typeof a === 'object' && a !== null ? `127.0.0.1:${a.port}` : '';
});
afterAll(async () => { await solo.close(); });

describe('shoal job', () => {
  it('apply prints the job; ls, run, ps, logs, suspend, resume and rm work on it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-job-cli-'));
    const file = path.join(dir, 'nightly.yaml');
    writeFileSync(file, 'apiVersion: shoal/v1\nkind: Job\nname: nightly\nimage: chore:1\nschedule: "30 3 * * *"\ntimezone: Europe/Paris\n');
    const applied = await shoal('apply', '-f', file, '--detach');
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('job nightly: created');

    const ls = await shoal('job', 'ls');
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(/nightly\s+30 3 \* \* \* \(Europe\/Paris\)\s+forbid\s+no/);
    expect(ls.stdout).not.toContain('held');
    // The leader's clock rule holds scheduled runs: ls says why, on a last line.
    const clock = { node: 'solo', leader: true, synchronized: false, skewMaxMs: 30_000, skewMs: null, offsets: [], hold: "this leader's clock is not synchronized" };
    solo.ctx.jobClock = () => clock;
    try {
      expect((await shoal('job', 'ls')).stdout).toMatch(/\n\nscheduled runs held: this leader's clock is not synchronized\n/);
      clock.leader = false;
      expect((await shoal('job', 'ls')).stdout).not.toContain('held');
    } finally {
      delete solo.ctx.jobClock;
    }

    const run = await shoal('job', 'run', 'nightly');
    expect(run.code, run.stderr).toBe(0);
    const id = /started run (\S+);/.exec(run.stdout)?.[1];
    expect(id).toMatch(/^nightly-.*-manual$/);
    await until('the run succeeded', async () => (await shoal('job', 'ps', 'nightly')).stdout.includes('succeeded'));
    const ps = await shoal('job', 'ps', 'nightly', '--json');
    const body = JSON.parse(ps.stdout) as { runs: { id: string; state: string; exitCode: number }[] };
    expect(body.runs[0]).toMatchObject({ id, state: 'succeeded', exitCode: 0 });

    const logs = await shoal('job', 'logs', 'nightly');
    expect(logs.code, logs.stderr).toBe(0);
    const unknownRun = await shoal('job', 'logs', 'nightly', '--run', 'nightly-nope');
    expect(unknownRun.code).toBe(1);
    expect(unknownRun.stderr).toMatch(/has no run nightly-nope/);

    expect((await shoal('job', 'suspend', 'nightly')).stdout).toMatch(/suspended/);
    expect((JSON.parse((await shoal('job', 'ls', '--json')).stdout) as { items: { suspended: boolean }[] }).items[0]?.suspended).toBe(true);
    expect((await shoal('job', 'resume', 'nightly')).code).toBe(0);
    expect((await shoal('job', 'rm', 'nightly')).stdout).toMatch(/removed job nightly/);
    const gone = await shoal('job', 'ps', 'nightly');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/no job named 'nightly'/);
  });

  it('every subcommand has --help', async () => {
    for (const sub of ['ls', 'ps', 'logs', 'run', 'suspend', 'resume', 'rm']) {
      const r = await shoal('job', sub, '--help');
      expect(r.code, sub).toBe(0);
      expect(r.stdout, sub).toMatch(/^Usage: shoal job /);
    }
  });
});
