// Growing a cluster the way docs/operations.md says, with real processes (run under flock
// /tmp/shoal-heavy.lock): init with --ca-from, serve with join, cluster add, promote, transfer
// the leadership and remove, every member named by its name. The leader refuses to add a node of
// another cluster or one that does not answer, and promotes a learner only once it has caught up.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { freePort } from '../../bench/lib/proc.ts';

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
const deadlineMs = 30_000;
const raft = { tickMs: 50, heartbeatIntervalMs: 50, electionTimeoutMs: 500 };

interface Result { code: number; stdout: string; stderr: string }

/**
 * The nodes here serve the insecure loopback API (plain HTTP), so the CLI must find no credential:
 * init writes its admin credential elsewhere.
 */
const initCredentialDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-init-credential-'));

function run(...args: string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const env = args[0] === 'init' ? { ...process.env, SHOAL_CONFIG: initCredentialDir } : process.env;
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const servers: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(servers.map((p) => new Promise<void>((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    p.once('exit', () => resolve());
    p.kill('SIGKILL');
  })));
});

interface Node { name: string; id: string; dir: string; api: string; peer: string; proc?: ChildProcess }

/** `shoal init`, then a config: a founder's bootstrap list, or a joiner's join.api. */
async function prepare(root: string, name: string, how: { caFrom?: string; bootstrapSelf?: boolean; joinApi?: string }): Promise<Node> {
  const dir = path.join(root, name);
  const api = `127.0.0.1:${await freePort()}`;
  const peer = `127.0.0.1:${await freePort()}`;
  const init = await run('init', '--data', dir, '--name', name, '--api', api, '--peer', peer, '--json', '--no-start', ...(how.caFrom !== undefined ? ['--ca-from', how.caFrom] : []));
  expect(init.code, init.stderr).toBe(0);
  const { id } = JSON.parse(init.stdout) as { id: string };
  const config = {
    dataDir: '.', api: { listen: api, insecureLoopback: true }, peer: { listen: peer }, raft,
    ...(how.bootstrapSelf === true ? { bootstrap: [{ id, name, apiAddress: api, peerAddress: peer }] } : {}),
    ...(how.joinApi !== undefined ? { join: { api: how.joinApi } } : {}),
  };
  writeFileSync(path.join(dir, 'shoal.yaml'), stringify(config));
  return { name, id, dir, api, peer };
}

function serve(n: Node): void {
  n.proc = spawn(process.execPath, [bin, 'serve', '--config', path.join(n.dir, 'shoal.yaml')], { stdio: 'ignore' });
  servers.push(n.proc);
}

async function until<T>(what: string, attempt: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const got = await attempt();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`not within ${deadlineMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function localView(api: string): Promise<{ node: string; leader: string | null } | undefined> {
  try {
    return await (await fetch(`http://${api}/v1/cluster?local`, { signal: AbortSignal.timeout(1000) })).json() as { node: string; leader: string | null };
  } catch {
    return undefined;
  }
}

describe('growing a cluster by name, with the leader\'s guardrails', () => {
  it('refuses a node of another cluster and a silent one, adds, promotes once caught up, transfers and removes by name', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-members-'));
    const n1 = await prepare(root, 'n1', { bootstrapSelf: true });
    serve(n1);
    await until('n1 leads', async () => ((await localView(n1.api))?.leader === n1.id ? true : undefined));
    const n2 = await prepare(root, 'n2', { caFrom: n1.dir, joinApi: n1.api });
    const stranger = await prepare(root, 'stranger', { joinApi: n1.api });
    serve(n2);
    serve(stranger);
    await until('n2 and the stranger serve their APIs', async () => ((await localView(n2.api)) && (await localView(stranger.api)) ? true : undefined));

    const foreign = await run('cluster', 'add', '--id', stranger.id, '--name', 'stranger', '--peer', stranger.peer, '--api', stranger.api, '--addr', n1.api, '--json');
    expect(foreign.code).toBe(1);
    expect(JSON.parse(foreign.stderr)).toMatchObject({ error: { code: 'member_not_ready', details: { reason: 'cluster_mismatch' } }, exitCode: 1 });
    stranger.proc?.kill('SIGKILL');

    const silent = await run('cluster', 'add', '--id', n2.id, '--name', 'n2', '--peer', n2.peer, '--api', `127.0.0.1:${await freePort()}`, '--addr', n1.api);
    expect(silent.code).toBe(1);
    expect(silent.stderr).toContain('member_not_ready');
    expect(silent.stderr).toContain('start the node first');
    const taken = await run('cluster', 'add', '--id', n2.id, '--name', 'n1', '--peer', n2.peer, '--api', n2.api, '--addr', n1.api);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain(`the name 'n1' is taken by n1 (${n1.id})`);

    const added = await run('cluster', 'add', '--id', n2.id, '--name', 'n2', '--peer', n2.peer, '--api', n2.api, '--addr', n1.api);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain('shoal cluster promote n2');

    // Promoted as soon as the leader sees it caught up; every refusal before that is the guardrail's.
    const promoted = await until('n2 promoted', async () => {
      const r = await run('cluster', 'promote', 'n2', '--addr', n1.api);
      if (r.code === 0) return r;
      expect(r.stderr).toContain('member_not_ready');
      return undefined;
    });
    expect(promoted.stdout).toBe(`promoted n2 (${n2.id}) to voter; voters now: n1, n2 (quorum 2)\n`);

    const members = await run('cluster', 'members', '--addr', n2.api, '--json');
    expect((JSON.parse(members.stdout) as { name: string; role: string }[]).map((m) => [m.name, m.role])).toEqual([['n1', 'voter'], ['n2', 'voter']]);

    const moved = await run('cluster', 'transfer-leader', '--to', 'n2', '--addr', n1.api);
    expect(moved.code, moved.stderr).toBe(0);
    expect(moved.stdout).toMatch(new RegExp(`^leadership moved: the leader is now n2 \\(${n2.id}\\) at term \\d+`));

    const removed = await run('cluster', 'remove', 'n1', '--addr', n2.api);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toMatch(new RegExp(`^removed n1 \\(${n1.id}\\) from the cluster`));
    expect(removed.stdout).toContain('voters now: n2 (quorum 1)');
  });
});
