// Virtual IPs with real packets (docs/network.md, "Virtual IP"): three `shoal serve` nodes, each in
// its own network namespace on one "LAN" bridge (test/faults/netns.ts), and a fourth namespace as
// a LAN client. The nodes' config names one VIP of the LAN's subnet.
//   1. one node holds it (not the leader), and the client reaches it (ping, its ARP entry);
//   2. the holder's shoal is killed: the kernel takes the address off that node by its lifetime
//      (nothing else runs there), and only then does another node take it; the client reaches it;
//   3. the new holder is cut off from the other nodes alone (the client still sees it): its
//      address goes before a third node takes it.
// A watcher reads the three nodes' addresses every 100 ms through the whole run: never two.
// Needs root, iproute2, nftables and arping (Debian's). The old holder's drop before the new
// holder's take is the rule under test; no duration is asserted (bench/ measures failover).

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, sleep } from '../faults/http.ts';
import { cutsBetween, NetLab, prerequisiteProblems } from '../faults/netns.ts';
import { startShoalIn } from '../faults/shoal-in-ns.ts';
import { exec, vipHolders, vipNodes, type VipNode } from './vip-lab.ts';


describe('a virtual IP, in network namespaces', () => {
  let lab: NetLab;
  let runDir: string;
  let vip: string;
  const nodes: VipNode[] = [];
  const client = 4;
  /** Every 100 ms: which nodes had the VIP on their interface. */
  const timeline: { at: number; holders: string[] }[] = [];
  let watching = true;
  let watcher: Promise<void> = Promise.resolve();

  async function holdersNow(): Promise<string[]> {
    return (await vipHolders(lab, nodes.map((n) => n.slot), vip)).map((slot) => `n${slot}`);
  }

  async function start(n: VipNode): Promise<void> {
    await startShoalIn(lab, n, { config: path.join(n.dir, 'shoal.yaml'), log: path.join(runDir, `${n.name}.log`), detached: true, serveWithinMs: 30_000 });
  }

  async function kill(n: VipNode): Promise<void> {
    const proc = n.proc;
    if (proc?.pid === undefined) return;
    const exited = new Promise((r) => proc.once('exit', r));
    try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ }
    await exited;
  }

  async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 40_000): Promise<T> {
    for (const until = Date.now() + timeoutMs; Date.now() < until;) {
      const v = await probe();
      if (v !== undefined) return v;
      await sleep(200);
    }
    throw new Error(`timed out waiting for ${what}; logs in ${runDir}`);
  }

  /** The one holder named by the watcher's latest reading, once it is `wanted` (or any when undefined). */
  function holderIn(from: number): string | undefined {
    const last = timeline.at(-1);
    return last !== undefined && last.at >= from && last.holders.length === 1 ? last.holders[0] : undefined;
  }

  async function vipsAnswer(n: VipNode): Promise<{ items: { address: string; holder: { id: string; name: string | null } | null; leaseLeftMs: number | null }[] } | undefined> {
    const r = await call(n.api, '/v1/vips?consistency=stale', { timeoutMs: 3_000 });
    return r.kind === 'answer' && r.status === 200 ? r.body as never : undefined;
  }

  async function leaderName(): Promise<string | undefined> {
    for (const n of nodes.filter((x) => x.proc !== undefined)) {
      const r = await call(n.api, '/v1/cluster?consistency=stale', { timeoutMs: 3_000 });
      if (r.kind !== 'answer' || r.status !== 200) continue;
      const body = r.body as { leader?: string | null; members?: { id: string; name: string }[] };
      const leader = body.members?.find((m) => m.id === body.leader);
      if (leader !== undefined) return leader.name;
    }
    return undefined;
  }

  /** The client pings the VIP; on an answer, the MAC its ARP table has for it. */
  async function clientReaches(): Promise<string | undefined> {
    const ping = await exec(['ip', 'netns', 'exec', lab.ns(client), 'ping', '-c', '1', '-W', '1', vip]);
    if (ping.code !== 0) return undefined;
    const neigh = await exec(['ip', '-n', lab.ns(client), '-j', 'neigh', 'show', vip]);
    const entry = (JSON.parse(neigh.out || '[]') as { lladdr?: string }[])[0];
    return entry?.lladdr;
  }

  async function macOf(n: VipNode): Promise<string> {
    const r = await exec(['ip', '-n', lab.ns(n.slot), '-j', 'link', 'show', 'eth0']);
    return (JSON.parse(r.out) as { address: string }[])[0]?.address ?? '';
  }

  const byName = (name: string): VipNode => {
    const n = nodes.find((x) => x.name === name);
    if (n === undefined) throw new Error(`no node ${name}`);
    return n;
  };

  beforeAll(async () => {
    const problems = prerequisiteProblems();
    if ((await exec(['sh', '-c', 'command -v arping'])).code !== 0) problems.push('arping is missing (apt-get install -y arping)');
    if (problems.length > 0) throw new Error(`the VIP test cannot run on this machine:\n  ${problems.join('\n  ')}`);
    lab = await NetLab.create(4);
    runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-vip-'));
    const made = await vipNodes(lab, runDir, 'vip-test', { control: { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 } });
    nodes.push(...made.nodes);
    vip = made.vip;
    await Promise.all(nodes.map((n) => start(n)));
    watcher = (async () => {
      while (watching) {
        timeline.push({ at: Date.now(), holders: await holdersNow() });
        await sleep(100);
      }
    })();
  }, 90_000);

  afterAll(async () => {
    watching = false;
    await watcher;
    for (const n of nodes) await kill(n);
    await lab?.destroy();
  });

  let first: VipNode;
  let second: VipNode;

  it('is held by one node, not the leader, and the LAN client reaches it there', async () => {
    const name = await waitFor('a node to hold the VIP', async () => holderIn(0));
    first = byName(name);
    expect(await leaderName()).not.toBe(first.name);
    const mac = await waitFor('the client to reach the VIP', clientReaches);
    expect(mac).toBe(await macOf(first));
    const view = await waitFor('GET /v1/vips to name the holder', async () => {
      const a = await vipsAnswer(first);
      const item = a?.items.find((i) => i.address === vip);
      return item?.holder?.id === first.id && item.leaseLeftMs !== null ? item : undefined;
    });
    expect(view.leaseLeftMs).toBeGreaterThan(0);
  }, 60_000);

  it('moves when the holder\'s shoal is killed, only after the kernel took it off the old holder', async () => {
    const killedAt = Date.now();
    await kill(first);
    const name = await waitFor('another node to hold the VIP', async () => {
      const h = holderIn(killedAt);
      return h !== undefined && h !== first.name ? h : undefined;
    });
    second = byName(name);
    const after = timeline.filter((t) => t.at >= killedAt);
    const droppedAt = after.find((t) => !t.holders.includes(first.name))?.at;
    const takenAt = after.find((t) => t.holders.includes(second.name))?.at;
    expect(droppedAt).toBeDefined();
    expect(takenAt).toBeDefined();
    // The dead node's kernel dropped it (nothing of shoal ran there), before the new holder took it.
    expect(droppedAt as number).toBeLessThan(takenAt as number);
    const mac = await waitFor('the client to reach the VIP on the new holder', async () => {
      const m = await clientReaches();
      return m === (await macOf(second)) ? m : undefined;
    });
    expect(mac).toBe(await macOf(second));
    await start(first);
  }, 60_000);

  it('leaves a holder cut off from the other nodes before any other node takes it', async () => {
    const cutAt = Date.now();
    await lab.setCuts(cutsBetween([second.slot], nodes.filter((n) => n !== second).map((n) => n.slot)));
    const name = await waitFor('a third holder', async () => {
      const h = holderIn(cutAt);
      return h !== undefined && h !== second.name ? h : undefined;
    });
    const after = timeline.filter((t) => t.at >= cutAt);
    const droppedAt = after.find((t) => !t.holders.includes(second.name))?.at as number;
    const takenAt = after.find((t) => t.holders.includes(name))?.at as number;
    expect(droppedAt).toBeLessThan(takenAt);
    await lab.heal();
  }, 60_000);

  it('is handed over on a graceful stop (released, not waited out), and each move is a vip.moved event', async () => {
    const name = await waitFor('one holder after the heal', async () => holderIn(Date.now() - 100));
    const holder = byName(name);
    const stopAt = Date.now();
    const proc = holder.proc;
    const exited = new Promise((r) => proc?.once('exit', r));
    proc?.kill('SIGTERM');
    await waitFor('another holder after the graceful stop', async () => {
      const h = holderIn(stopAt);
      return h !== undefined && h !== holder.name ? h : undefined;
    });
    await exited;
    const other = nodes.find((n) => n.proc !== undefined);
    const events = await waitFor('the vip.moved events', async () => {
      const r = await call(other?.api ?? '', '/v1/docs/shoal.events?limit=1000&consistency=stale', { timeoutMs: 3_000 });
      if (r.kind !== 'answer' || r.status !== 200) return undefined;
      const moved = (r.body as { items: { doc: { type: string; subject: string; details: { from: string | null; to: string | null; reason: string } } }[] }).items
        .map((i) => i.doc).filter((d) => d.type === 'vip.moved');
      return moved.some((d) => d.details.from === holder.id && d.details.reason === 'released') ? moved : undefined;
    });
    expect(events.every((e) => e.subject === vip)).toBe(true);
    expect(events.map((e) => e.details.reason)).toEqual(expect.arrayContaining(['assigned', 'lease_expired', 'released']));
  }, 60_000);

  it('was never on two nodes at once, through the whole run', () => {
    const overlaps = timeline.filter((t) => t.holders.length > 1);
    expect(timeline.length).toBeGreaterThan(50);
    expect(overlaps).toEqual([]);
  });
});
