// Three machines, three commands (run under flock /tmp/shoal-heavy.lock): `shoal init` founds a
// one-node cluster and prints the join command; two `shoal join`s with that command's token
// start the other nodes, which the leader's autopilot makes voters once they have caught up.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
const deadlineMs = 90_000;
const procs: ChildProcess[] = [];

afterAll(async () => {
  await Promise.all(procs.map((p) => new Promise<void>((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    p.once('exit', () => resolve());
    p.kill('SIGKILL');
  })));
});

/** Starts a long-running shoal command; resolves with its process and a reader of its stdout so far. */
function start(...args: string[]): { proc: ChildProcess; out: () => string } {
  const proc = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(proc);
  let out = '';
  proc.stdout?.on('data', (b: Buffer) => { out += b.toString(); });
  proc.stderr?.on('data', () => {});
  return { proc, out: () => out };
}

async function until<T>(what: string, attempt: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const got = await attempt();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`not within ${deadlineMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface View { leader: string | null; members: { id: string; name: string; role: string }[] }
async function view(api: string): Promise<View | undefined> {
  try {
    const res = await fetch(`http://${api}/v1/cluster`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? (await res.json()) as View : undefined;
  } catch {
    return undefined;
  }
}

describe('three machines, three commands', () => {
  it('init founds a cluster and prints the join command; two joins with it make a three-voter cluster', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-join-cluster-'));
    const addr = async (): Promise<string> => `127.0.0.1:${await freePort()}`;
    const n1 = { api: await addr(), peer: await addr() };
    const init = start('init', '--data', path.join(root, 'n1'), '--name', 'n1', '--api', n1.api, '--peer', n1.peer, '--json');
    const printed = await until('init prints the join command', () => {
      const line = init.out().split('\n').find((l) => l.startsWith('{'));
      return line === undefined ? undefined : JSON.parse(line) as { joinCommand: string };
    });
    const [, , api, , token] = printed.joinCommand.split(' ');
    expect(api).toBe(n1.api);
    expect(token).toMatch(/^SHOAL1-[0-9a-f]{64}-[0-9a-f]{16}\./);
    // The node writes the token into the store when it first leads.
    await until('n1 leads', async () => ((await view(n1.api))?.leader ?? undefined));
    for (const name of ['n2', 'n3']) {
      start('join', n1.api, '--token', token ?? '', '--name', name, '--data', path.join(root, name), '--api', await addr(), '--peer', await addr());
    }
    const final = await until('n2 and n3 are voters', async () => {
      const v = await view(n1.api);
      return v !== undefined && v.members.length === 3 && v.members.every((m) => m.role === 'voter') ? v : undefined;
    });
    expect(final.members.map((m) => m.name).sort()).toEqual(['n1', 'n2', 'n3']);
  }, 120_000);
});
