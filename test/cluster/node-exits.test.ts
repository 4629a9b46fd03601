// `shoal serve` exits with the code of its cause (docs/operations.md, "Exit codes"), on real
// processes: a storage failure (a full disk) exits 1 after closing its API; a removed node exits 5;
// a taken port 8; a locked data directory 8; a join nobody answers 9.

import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { initNode } from '../../src/node/identity.ts';
import { ProcessCluster, putJson, putJsonSettled, sleep, type ClusterNode } from './process-cluster.ts';

const binPath = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
let cluster: ProcessCluster | undefined;
const mounts: string[] = [];

afterEach(async () => {
  for (const n of cluster?.nodes ?? []) await cluster?.kill(n);
  for (const m of mounts.splice(0)) execFileSync('umount', ['-l', m]);
  await cluster?.destroy();
  cluster = undefined;
});

function exitOf(node: ClusterNode): Promise<number | null> {
  const proc = node.proc;
  if (proc === undefined) throw new Error(`${node.name} is not running`);
  return new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
}

/** Runs `shoal serve` on a config and resolves with its exit code and output. */
function serve(config: string, timeoutMs = 30_000): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [binPath, 'serve', '--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    p.stderr.on('data', (b: Buffer) => { out += b.toString(); });
    const t = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`serve did not exit within ${timeoutMs} ms:\n${out}`)); }, timeoutMs);
    p.once('exit', (code) => { clearTimeout(t); resolve({ code, out }); });
  });
}

async function oneNode(over: Record<string, unknown> = {}): Promise<string> {
  const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-exit-')), 'n1');
  await initNode({ dataDir: dir, name: 'n1' });
  const config = { dataDir: '.', api: { listen: `127.0.0.1:${await freePort()}`, insecureLoopback: true }, peer: { listen: `127.0.0.1:${await freePort()}` }, runtime: { kind: 'none' }, ...over };
  writeFileSync(path.join(dir, 'shoal.yaml'), stringify(config));
  return path.join(dir, 'shoal.yaml');
}

describe('shoal serve exit codes', { timeout: 120_000 }, () => {
  it('a node whose disk fills up stops with node_failed and exits 1; the others keep serving', async () => {
    cluster = new ProcessCluster();
    await cluster.init();
    const victim = cluster.nodes[2] as ClusterNode;
    // Its data directory on a small tmpfs, so its writes can fail for real.
    const saved = `${victim.dir}.saved`;
    cpSync(victim.dir, saved, { recursive: true });
    rmSync(victim.dir, { recursive: true });
    mkdirSync(victim.dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', victim.dir]);
    mounts.push(victim.dir);
    cpSync(saved, victim.dir, { recursive: true });
    cluster.startAll();
    const leader = await cluster.waitForLeader();
    expect((await putJsonSettled(leader, '/v1/docs/t/a', { v: 1 })).status).toBe(200);
    const exited = exitOf(victim);
    // Fill the disk, then write until the victim's log write fails.
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${path.join(victim.dir, 'filler')}`, 'bs=1M', 'count=64'], { stdio: 'ignore' });
    } catch {
      // dd fails once the tmpfs is full: that is the point.
    }
    for (let i = 0; i < 400 && victim.proc !== undefined; i++) {
      await putJson(leader, `/v1/docs/t/k${i}`, { v: 'x'.repeat(2000) }).catch(() => undefined);
    }
    expect(await exited).toBe(1);
    const logs = victim.logs.join('');
    expect(logs).toMatch(/fatal/);
    expect(logs).toMatch(/exiting with code 1 \(node_failed\)/);
    // The victim may have been the leader: the survivors elect one among them.
    const survivor = await cluster.waitForLeader(20_000, cluster.nodes.filter((n) => n !== victim));
    expect((await putJsonSettled(survivor, '/v1/docs/t/after', { v: 2 })).status).toBe(200);
  });

  it('a removed node learns it and exits 5', async () => {
    cluster = new ProcessCluster();
    await cluster.init();
    cluster.startAll();
    const leader = await cluster.waitForLeader();
    const victim = cluster.nodes.find((n) => n !== leader) as ClusterNode;
    const exited = exitOf(victim);
    const res = await fetch(`http://${leader.apiAddress}/v1/cluster/members/${victim.id}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    const code = await Promise.race([exited, sleep(15_000).then(() => 'timeout')]);
    if (code !== 5) console.log(cluster.tailLogs(40));
    expect(code).toBe(5);
    expect(victim.logs.join('')).toMatch(/was removed from the cluster/);
  });

  it('a taken API port exits 8, a locked data directory 8, and a join nobody answers 9, each saying what to do', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const taken = await serve(await oneNode({ api: { listen: `127.0.0.1:${port}`, insecureLoopback: true } }));
      expect(taken.code).toBe(8);
      expect(taken.out).toMatch(/cannot listen on 127\.0\.0\.1:\d+ \(api\.listen\): it is in use/);
    } finally {
      server.close();
    }
    const config = await oneNode();
    const first = spawn(process.execPath, [binPath, 'serve', '--config', config], { stdio: 'ignore' });
    try {
      await sleep(1500);
      const second = await serve(config);
      expect(second.code).toBe(8);
      expect(second.out).toMatch(/is in use by another process/);
    } finally {
      first.kill('SIGKILL');
    }
    const join = await oneNode({ join: { api: `127.0.0.1:${await freePort()}`, timeoutMs: 1_000 } });
    const raw = parseYaml(readFileSync(join, 'utf8')) as Record<string, unknown>;
    expect(raw.join).toBeDefined();
    const joined = await serve(join);
    expect(joined.code).toBe(9);
    expect(joined.out).toMatch(/could not learn the members/);
  });
});
