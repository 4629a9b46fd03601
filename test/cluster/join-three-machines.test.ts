// Three machines, three commands (run under flock /tmp/shoal-heavy.lock): `shoal init` founds a
// one-node cluster and prints the join command; two `shoal join`s with that command's token
// start the other nodes, which the leader's autopilot makes voters once they have caught up.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { clusterMembers, ShoalCommands } from './shoal-commands.ts';

const deadlineMs = 90_000;
const shoal = new ShoalCommands();
const start = shoal.start.bind(shoal);
const until = <T>(what: string, attempt: () => Promise<T | undefined> | T | undefined): Promise<T> => shoal.until(what, attempt, deadlineMs);

afterAll(async () => { await shoal.killAll(); });

const members = clusterMembers;

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
