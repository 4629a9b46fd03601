// A real disk stall (npm run test:stall): the leader's data directory on a loop-mounted ext4 file
// system that the test freezes with fsfreeze, so every write and fdatasync of the leader blocks in
// the kernel, as on a dying disk or a hung NFS mount. The cluster must elect another leader and
// keep serving; the stalled node must say so; thawed, it must recover by itself.
//
// Root only. A frozen file system leaves the blocked process unkillable until it is thawed, so the
// test always thaws (in finally, and in afterAll), whatever fails. Not in `npm test`: it needs a
// loop device and mkfs.ext4, and it is slow; docs/operations.md has its result.

import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ProcessCluster, getJson, putJson, sleep, type ClusterNode } from '../cluster/process-cluster.ts';

let cluster: ProcessCluster | undefined;
let mount: { dir: string; loop: string; image: string } | undefined;
let frozen = false;

function thaw(): void {
  if (mount !== undefined && frozen) {
    execFileSync('fsfreeze', ['-u', mount.dir]);
    frozen = false;
  }
}

afterAll(async () => {
  thaw();
  for (const n of cluster?.nodes ?? []) await cluster?.kill(n);
  if (mount !== undefined) {
    execFileSync('umount', ['-l', mount.dir]);
    execFileSync('losetup', ['-d', mount.loop]);
    rmSync(mount.image, { force: true });
  }
  await cluster?.destroy();
});

/** Moves a node's data directory onto a fresh ext4 file system on a loop device. */
function onLoopDevice(node: ClusterNode): void {
  const image = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-stall-')), 'disk.img');
  execFileSync('truncate', ['-s', '256M', image]);
  const loop = execFileSync('losetup', ['-f', '--show', image], { encoding: 'utf8' }).trim();
  execFileSync('mkfs.ext4', ['-q', loop]);
  const saved = `${node.dir}.saved`;
  cpSync(node.dir, saved, { recursive: true });
  rmSync(node.dir, { recursive: true });
  mkdirSync(node.dir);
  execFileSync('mount', [loop, node.dir]);
  mount = { dir: node.dir, loop, image };
  cpSync(saved, node.dir, { recursive: true });
}

describe('a leader whose disk stalls', { timeout: 180_000 }, () => {
  it('is replaced within an election timeout, takes no request meanwhile, and recovers when the disk thaws', async () => {
    cluster = new ProcessCluster();
    await cluster.init();
    const victim = cluster.nodes[0] as ClusterNode;
    onLoopDevice(victim);
    cluster.startAll();
    let leader = await cluster.waitForLeader();
    if (leader !== victim) {
      const res = await fetch(`http://${leader.apiAddress}/v1/cluster/leader`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ to: victim.id }) });
      expect(res.status).toBe(200);
      leader = await cluster.waitForLeader();
    }
    expect(leader).toBe(victim);
    expect((await putJson(victim, '/v1/docs/t/before', { v: 1 })).status).toBe(200);
    const others = cluster.nodes.filter((n) => n !== victim);
    try {
      execFileSync('fsfreeze', ['-f', (mount as { dir: string }).dir]);
      frozen = true;
      const frozenAt = Date.now();
      // A write now blocks in the leader's disk; the others must elect a leader without it.
      void putJson(victim, '/v1/docs/t/during', { v: 2 }, 30_000).catch(() => undefined);
      let next = victim;
      while (next === victim && Date.now() - frozenAt < 30_000) {
        next = await cluster.waitForLeader(30_000, others);
        if (next === victim) await sleep(50);
      }
      const electedAfterMs = Date.now() - frozenAt;
      expect(next).not.toBe(victim);
      expect((await putJson(next, '/v1/docs/t/elsewhere', { v: 3 })).status).toBe(200);
      // The stalled node either answers disk_stalled (its sync waits on the thread pool, its event
      // loop is free) or does not answer at all (the frozen file system blocks even the write(2)
      // the log makes from the event loop): either way it takes no request and no vote.
      const health = await getJson<{ code?: string }>(victim, '/healthz', 3_000).catch(() => undefined);
      expect(health === undefined || (health.status === 503 && health.body.code === 'disk_stalled')).toBe(true);
      console.log(`stall: a new leader ${electedAfterMs} ms after the freeze; the stalled node ${health === undefined ? 'does not answer (its event loop waits in write(2))' : 'answers disk_stalled'}`);
    } finally {
      thaw();
    }
    let ok = false;
    for (let i = 0; i < 150 && !ok; i++) {
      const h = await getJson<{ ok?: boolean }>(victim, '/healthz', 2_000).catch(() => undefined);
      ok = h?.status === 200;
      if (!ok) await sleep(200);
    }
    expect(ok).toBe(true);
    const read = await getJson<{ doc: { v: number } }>(victim, '/v1/docs/t/elsewhere', 5_000);
    expect(read.body.doc.v).toBe(3);
  });
});
