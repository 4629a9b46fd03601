// Quorum lost for good, on real processes (run under flock /tmp/shoal-heavy.lock): three `shoal
// serve` nodes, acknowledged writes, two nodes killed with SIGKILL, `shoal recover
// --force-new-cluster` on the stopped survivor. It refuses while the node runs and while another
// member answers; then the survivor leads a one-member cluster with every acknowledged document,
// takes new writes, refuses a second recovery, and the old members, started again on their old
// data, are told they were removed and exit 5 instead of forming the old cluster.

import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, renameSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { loadIdentity } from '../../src/node/identity.ts';
import { getJson, ProcessCluster, putJson, putJsonSettled, sleep, type ClusterNode } from './process-cluster.ts';
import { clusterMembers, ShoalCommands, shoalBin as bin } from './shoal-commands.ts';

const documents = 40;
// A second of election timeout: the machine is shared, and a flapping election is not what is tested.
const cluster = new ProcessCluster({ runtime: 'none', electionTimeoutMs: 1000, heartbeatIntervalMs: 100 });

const shoal = new ShoalCommands();
const start = shoal.start.bind(shoal);
const until = shoal.until.bind(shoal);

afterAll(async () => {
  await cluster.destroy();
  await shoal.killAll();
});

/** Runs a shoal command to its end. */
async function run(...args: string[]): Promise<Run> {
  return promisify(execFile)(process.execPath, [bin, ...args], { timeout: 60_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

async function stopped(proc: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  proc.kill(signal);
  return exited;
}

/** `shoal cluster members --json` with the admin credential init wrote ($SHOAL_CONFIG, test/setup-env.ts). */
const members = clusterMembers;

interface Run { code: number; stdout: string; stderr: string }

/** `shoal recover --force-new-cluster --data DIR --json ...` as a process. */
function recover(node: ClusterNode, ...more: string[]): Promise<Run> {
  return run('recover', '--force-new-cluster', '--data', node.dir, '--json', ...more);
}

const errorCode = (r: Run): string => (JSON.parse(r.stderr) as { error: { code: string } }).error.code;

function exitOf(node: ClusterNode): Promise<number | null> {
  const proc = node.proc;
  if (proc === undefined) throw new Error(`${node.name} is not running`);
  return new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
}

/** Waits until `node` has applied at least `index` (its /v1/cluster view). */
async function caughtUp(node: ClusterNode, index: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const view = await getJson<{ appliedIndex: number }>(node, '/v1/cluster?local').catch(() => undefined);
    if ((view?.body.appliedIndex ?? 0) >= index) return;
    await sleep(50);
  }
  throw new Error(`${node.name} did not apply index ${index}\n${cluster.tailLogs()}`);
}

describe('shoal recover --force-new-cluster on real processes', { timeout: 180_000 }, () => {
  it('rebuilds a one-node cluster from the survivor of three, keeping every acknowledged write', async () => {
    await cluster.init();
    cluster.startAll();
    const leader = await cluster.waitForLeader(60_000);
    const [survivor, other] = cluster.nodes.filter((n) => n !== leader) as [ClusterNode, ClusterNode];
    const oldClusterId = cluster.clusterId;

    const acked = new Map<string, number>();
    let lastRev = 0;
    for (let i = 0; i < documents; i++) {
      const res = await putJson<{ rev: number }>(leader, `/v1/docs/notes/n${i}`, { i });
      if (res.status === 200) {
        acked.set(`n${i}`, i);
        lastRev = res.body.rev;
      }
    }
    expect(acked.size).toBe(documents);
    // The survivor holds every acknowledged write (a write acknowledged by the leader and the
    // other follower alone would be lost with them: that is what losing a majority means).
    await caughtUp(survivor, lastRev);

    const running = await recover(survivor, '--yes');
    expect([running.code, errorCode(running)], running.stderr).toEqual([8, 'data_dir_locked']);

    await cluster.kill(leader);
    expect(await cluster.stop(survivor)).toBe(0);
    const answering = await recover(survivor, '--yes');
    expect([answering.code, errorCode(answering)], answering.stderr).toEqual([1, 'members_reachable']);
    expect(answering.stderr).toContain(other.id);
    expect(loadIdentity(survivor.dir).clusterId).toBe(oldClusterId);
    expect(existsSync(path.join(survivor.dir, 'recovered.json'))).toBe(false);

    await cluster.kill(other);
    const done = await recover(survivor, '--yes');
    expect(done.code, done.stderr).toBe(0);
    const out = JSON.parse(done.stdout) as { clusterId: string; oldClusterId: string; removed: string[] };
    expect(out.oldClusterId).toBe(oldClusterId);
    expect(out.clusterId).not.toBe(oldClusterId);
    expect(out.removed.sort()).toEqual([leader.id, other.id].sort());
    const again = await recover(survivor, '--yes');
    expect([again.code, errorCode(again)], again.stderr).toEqual([1, 'already_recovered']);

    cluster.start(survivor);
    expect((await cluster.waitForLeader(60_000, [survivor])).id).toBe(survivor.id);
    const view = await getJson<{ clusterId: string; members: { id: string }[] }>(survivor, '/v1/cluster');
    expect(view.body.clusterId).toBe(out.clusterId);
    expect(view.body.members.map((m) => m.id)).toEqual([survivor.id]);
    for (const [id, i] of acked) {
      const got = await getJson<{ doc: { i: number } }>(survivor, `/v1/docs/notes/${id}`);
      expect([got.status, got.body.doc.i], id).toEqual([200, i]);
    }
    expect((await putJsonSettled(survivor, '/v1/docs/notes/after', { v: 1 })).status).toBe(200);

    // The old members, started on their old data: the survivor tells each it was removed.
    cluster.start(leader);
    cluster.start(other);
    const exits = await Promise.all([leader, other].map((n) => Promise.race([exitOf(n), sleep(30_000).then(() => 'still running')])));
    if (exits.some((c) => c !== 5)) console.log(cluster.tailLogs(40));
    expect(exits).toEqual([5, 5]);
    expect(leader.logs.join('')).toMatch(/was removed from the cluster/);
    const after = await getJson<{ leader: string; members: { id: string }[] }>(survivor, '/v1/cluster');
    expect(after.body.leader).toBe(survivor.id);
    expect(after.body.members.map((m) => m.id)).toEqual([survivor.id]);
  });

  it('with TLS: the recovered founder keeps its CA and the admin credential, and a wiped machine joins it with a token', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-recover-tls-'));
    const addr = async (): Promise<string> => `127.0.0.1:${await freePort()}`;
    const api = await addr();
    const dir = (name: string): string => path.join(root, name);
    const init = start('init', '--data', dir('n1'), '--name', 'n1', '--api', api, '--peer', await addr(), '--json');
    const printed = await until('init prints the join command', () => {
      const line = init.out().split('\n').find((l) => l.startsWith('{'));
      return line === undefined ? undefined : JSON.parse(line) as { joinCommand: string };
    });
    const token = printed.joinCommand.split(' ')[4] ?? '';
    const joined: ChildProcess[] = [];
    for (const name of ['n2', 'n3']) {
      joined.push(start('join', api, '--token', token, '--name', name, '--data', dir(name), '--api', await addr(), '--peer', await addr()).proc);
      await until(`${name} is a member`, async () => ((await members(api))?.some((m) => m.name === name) ? true : undefined));
    }
    await until('three voters', async () => ((await members(api))?.filter((m) => m.role === 'voter').length === 3 ? true : undefined));
    for (let i = 0; i < 5; i++) expect((await run('doc', 'put', 'notes', `k${i}`, '--data', JSON.stringify({ i }), '--addr', api)).code).toBe(0);

    for (const p of joined) await stopped(p, 'SIGKILL');
    expect(await stopped(init.proc, 'SIGTERM')).toBe(0);
    const done = await run('recover', '--force-new-cluster', '--data', dir('n1'), '--yes');
    expect(done.code, done.stderr).toBe(0);
    start('serve', '--config', path.join(dir('n1'), 'shoal.yaml'));
    // The same admin credential works: the CA did not change.
    await until('n1 alone', async () => ((await members(api))?.length === 1 ? true : undefined));
    for (let i = 0; i < 5; i++) {
      const got = await run('doc', 'get', 'notes', `k${i}`, '--addr', api, '--json');
      expect(got.code, got.stderr).toBe(0);
      expect((JSON.parse(got.stdout) as { doc: { i: number } }).doc.i).toBe(i);
    }

    // n2's machine, wiped (its old directory moved aside), joins with a new token as a new node.
    renameSync(dir('n2'), dir('n2.old'));
    const created = await run('token', 'create', '--role', 'voter', '--addr', api, '--json');
    expect(created.code, created.stderr).toBe(0);
    const fresh = (JSON.parse(created.stdout) as { token: string }).token;
    start('join', api, '--token', fresh, '--name', 'n2', '--data', dir('n2'), '--api', await addr(), '--peer', await addr());
    const final = await until('n1 and the new n2 are voters', async () => {
      const m = await members(api);
      return m?.length === 2 && m.every((x) => x.role === 'voter') ? m : undefined;
    });
    expect(final.map((m) => m.name).sort()).toEqual(['n1', 'n2']);
    expect(loadIdentity(dir('n2')).clusterId).toBe(loadIdentity(dir('n1')).clusterId);
  });
});
