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
/** Each process's output, for the failure message: which node got stuck, and why. */
const logs: { name: string; text: () => string }[] = [];

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
  let err = '';
  proc.stdout?.on('data', (b: Buffer) => { out += b.toString(); });
  proc.stderr?.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-20_000); });
  logs.push({ name: args.slice(0, 6).join(' '), text: () => `${out.slice(-2000)}\n${err.split('\n').slice(-15).join('\n')}` });
  return { proc, out: () => out };
}

async function until<T>(what: string, attempt: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const got = await attempt();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`not within ${deadlineMs} ms: ${what}\n${logs.map((l) => `--- ${l.name}\n${l.text()}`).join('\n')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface Member { id: string; name: string; role: string }

/** `shoal cluster members --json` with the admin credential `init` wrote (to $SHOAL_CONFIG, from test/setup-env.ts). */
function members(api: string): Promise<Member[] | undefined> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, 'cluster', 'members', '--json', '--addr', api], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    child.on('close', (code) => {
      try {
        resolve(code === 0 ? JSON.parse(out) as Member[] : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
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
    // Joined at once, as an operator pastes the printed command: the node may not lead yet
    // (the join asks again on no_leader), nor have written the token into the store (the join
    // waits for it). The API is HTTPS; the CLI finds the admin credential init wrote. One machine
    // after the other, as an operator types them.
    for (const name of ['n2', 'n3']) {
      start('join', n1.api, '--token', token ?? '', '--name', name, '--data', path.join(root, name), '--api', await addr(), '--peer', await addr());
      await until(`${name} is a member`, async () => ((await members(n1.api))?.some((m) => m.name === name) ? true : undefined));
    }
    const final = await until('n2 and n3 are voters', async () => {
      const m = await members(n1.api);
      return m !== undefined && m.length === 3 && m.every((x) => x.role === 'voter') ? m : undefined;
    });
    expect(final.map((m) => m.name).sort()).toEqual(['n1', 'n2', 'n3']);
  }, 120_000);
});
