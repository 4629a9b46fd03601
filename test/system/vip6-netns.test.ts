// An IPv6 virtual IP with real packets (docs/network.md, "IPv6 VIPs"): two VIP agents
// (net/vip-agent.ts), each running its commands in its own network namespace of a NetLab
// (test/faults/netns.ts), over one store, and a third namespace as a LAN client that has the VIP's
// old holder in its neighbour cache.
//   1. the record names A: A's agent sets the interface's sysctls and adds VIP/128; once DAD is
//      done the client reaches it at A's MAC;
//   2. the record names B: A's agent takes it off, B's adds it; the kernel's unsolicited neighbour
//      advertisement (override flag, to ff02::1) is seen on the client's link, and the client's
//      neighbour entry has B's MAC before it sends anything;
//   3. the record names A again while B still has it (B's agent not run): A's DAD fails, so A never
//      answers for it, the client keeps B, and A's agent says so at its next pass.
// Needs root, iproute2, nftables and tcpdump. No shoal process: the agents run in this process,
// so the file takes a few seconds.

import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand, type CommandResult, type JsonObject } from '../../fsm/index.ts';
import { commandRunner } from '../../net/firewall-command.ts';
import { VipAgent } from '../../net/vip-agent.ts';
import { nodesCollection } from '../../src/resources/collections.ts';
import { vipsCollection, type VipRecord } from '../../src/resources/vips.ts';
import { node } from '../control/fixtures.ts';
import { sleep } from '../faults/http.ts';
import { NetLab, prerequisiteProblems } from '../faults/netns.ts';
import { exec } from './vip-lab.ts';

const vip = 'fd00:38::100';
const hostIp = (slot: number): string => `fd00:38::${slot}`;

describe('an IPv6 virtual IP, in network namespaces', () => {
  let lab: NetLab;
  const store = new DocumentStore();
  const agents = new Map<string, VipAgent>();
  const warns: string[] = [];
  const slotOf = { a: 1, b: 2 } as const;
  const client = 3;

  function put(collection: string, id: string, doc: object): void {
    const index = store.revision + 1;
    store.apply({ index, term: 1, featureLevel: 6, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: index }) });
  }

  const record = (holder: 'a' | 'b'): VipRecord => ({ spec: { address: vip, subnet: 'fd00:38::/64' }, holder: { nodeId: holder, epoch: 1 }, since: 1, previous: null, retired: false });

  function agent(id: 'a' | 'b'): VipAgent {
    const a = new VipAgent({
      store, nodeId: id, bootNow: () => performance.now(),
      // A lease that always holds: this test is about the address and its announcement, not the lease.
      lease: { want: () => {}, heldUntil: () => performance.now() + 8_000 },
      run: commandRunner({ prefix: ['ip', 'netns', 'exec', lab.ns(slotOf[id])] }),
      propose: async (cmd) => {
        const index = store.revision + 1;
        return store.apply({ index, term: 1, featureLevel: 6, data: encodeCommand({ cmd, ts: index }) }) as CommandResult;
      },
      log: { info: () => {}, warn: (m) => warns.push(`${id}: ${m}`) },
      // No pass of its own: each step runs the agents it means to (converge).
      passEveryMs: 3_600_000,
    });
    agents.set(id, a);
    return a;
  }

  /** The VIP's entry on node `slot`'s eth0 (with its flags: tentative while DAD runs), if any. */
  async function vipOn(slot: number): Promise<{ tentative?: boolean } | undefined> {
    const r = await exec(['ip', '-n', lab.ns(slot), '-j', '-6', 'addr', 'show', 'dev', 'eth0']);
    const info = (JSON.parse(r.out || '[]') as { addr_info?: { local?: string; tentative?: boolean }[] }[])[0]?.addr_info ?? [];
    return info.find((a) => a.local === vip);
  }

  async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 5_000): Promise<T> {
    for (const until = Date.now() + timeoutMs; Date.now() < until;) {
      const v = await probe();
      if (v !== undefined) return v;
      await sleep(50);
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  async function macOf(slot: number): Promise<string> {
    const r = await exec(['ip', '-n', lab.ns(slot), '-j', 'link', 'show', 'eth0']);
    return (JSON.parse(r.out) as { address: string }[])[0]?.address ?? '';
  }

  /** The MAC the client's neighbour cache has for the VIP (without sending anything). */
  async function clientEntry(): Promise<string | undefined> {
    const r = await exec(['ip', '-n', lab.ns(client), '-j', '-6', 'neigh', 'show', vip]);
    return (JSON.parse(r.out || '[]') as { lladdr?: string }[])[0]?.lladdr;
  }

  async function clientPings(): Promise<boolean> {
    return (await exec(['ip', 'netns', 'exec', lab.ns(client), 'ping', '-6', '-c', '1', '-W', '1', vip])).code === 0;
  }

  /** Starts tcpdump on the client's link for unsolicited neighbour advertisements of the VIP; resolves with the first, as tcpdump prints it with -e -v. */
  async function watchAdvertisement(): Promise<{ seen: Promise<string>; stop(): void }> {
    const p = spawn('ip', ['netns', 'exec', lab.ns(client), 'tcpdump', '-l', '-n', '-e', '-v', '-c', '1', '-i', 'eth0', `icmp6 and ip6[40] == 136 and ip6 dst ff02::1 and ip6 src ${vip}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    const listening = new Promise<void>((resolve) => p.stderr.on('data', (b: Buffer) => { if (b.toString().includes('listening on')) resolve(); }));
    const seen = new Promise<string>((resolve) => p.once('close', () => resolve(out)));
    await Promise.race([listening, sleep(3_000)]);
    return { seen, stop: () => p.kill() };
  }

  beforeAll(async () => {
    const problems = prerequisiteProblems();
    if ((await exec(['sh', '-c', 'command -v tcpdump'])).code !== 0) problems.push('tcpdump is missing (apt-get install -y tcpdump)');
    if (problems.length > 0) throw new Error(`the IPv6 VIP test cannot run on this machine:\n  ${problems.join('\n  ')}`);
    lab = await NetLab.create(3);
    for (const slot of [1, 2, 3]) {
      // nodad: the hosts' own addresses are there at once; only the VIP goes through DAD.
      const r = await exec(['ip', '-n', lab.ns(slot), 'addr', 'add', `${hostIp(slot)}/64`, 'dev', 'eth0', 'nodad']);
      if (r.code !== 0) throw new Error(`cannot add ${hostIp(slot)} in ${lab.ns(slot)}`);
    }
    put(nodesCollection, 'a', node('a', { epoch: 1 }));
    put(nodesCollection, 'b', node('b', { epoch: 1 }));
    agent('a');
    agent('b');
  }, 30_000);

  afterAll(async () => {
    for (const a of agents.values()) await a.close();
    await lab?.destroy();
  });

  it('is put on the holder as /128 with its lifetime and the interface\'s sysctls, and the client reaches it there after DAD', async () => {
    put(vipsCollection, vip, record('a'));
    await agents.get('a')?.converge();
    await agents.get('b')?.converge();
    const sysctl = await exec(['ip', 'netns', 'exec', lab.ns(1), 'sysctl', '-n', 'net.ipv6.conf.eth0.ndisc_notify', 'net.ipv6.conf.eth0.router_solicitation_delay']);
    expect(sysctl.out.split('\n').slice(0, 2)).toEqual(['1', '0']);
    const show = await exec(['ip', '-n', lab.ns(1), '-6', 'addr', 'show', 'dev', 'eth0']);
    expect(show.out).toMatch(new RegExp(`inet6 ${vip}/128 scope global (tentative )?dynamic`));
    await waitFor('DAD to finish on A', async () => ((await vipOn(1))?.tentative === true ? undefined : true));
    expect(await clientPings()).toBe(true);
    expect(await clientEntry()).toBe(await macOf(1));
  }, 15_000);

  it('moves to B: the kernel sends an unsolicited neighbour advertisement, and the client\'s entry follows before it sends anything', async () => {
    const watch = await watchAdvertisement();
    put(vipsCollection, vip, record('b'));
    const movedAt = performance.now();
    await agents.get('a')?.converge();
    expect(await vipOn(1)).toBeUndefined();
    await agents.get('b')?.converge();
    const na = await Promise.race([watch.seen, sleep(5_000).then(() => '')]);
    watch.stop();
    const naMs = performance.now() - movedAt;
    const macB = await macOf(2);
    // From B's MAC to all nodes, target the VIP, override set, with B's MAC as the target link-layer address.
    expect(na).toContain(`${macB} > 33:33:00:00:00:01`);
    expect(na).toMatch(new RegExp(`tgt is ${vip}, Flags \\[override\\]`));
    expect(na).toContain(`destination link-address option (2), length 8 (1): ${macB}`);
    expect(naMs).toBeLessThan(3_000); // DAD: about a second (router_solicitation_delay 0, one probe)
    expect(await clientEntry()).toBe(macB);
    expect(await clientPings()).toBe(true);
  }, 15_000);

  it('is refused by DAD on A while B still has it: A never answers for it, the client keeps B, and A\'s agent says so', async () => {
    const macB = await macOf(2);
    put(vipsCollection, vip, record('a')); // B's agent is not run: B keeps its address for now
    await agents.get('a')?.converge();
    expect(agents.get('a')?.heldAddresses()).toEqual([vip]); // A's agent added it...
    // ...and B's kernel answered A's DAD probe at once: the kernel took it off A (within a millisecond here).
    await waitFor('DAD to fail on A (the kernel removes the address)', async () => ((await vipOn(1)) === undefined ? true : undefined), 4_000);
    expect(await vipOn(2)).toBeDefined();
    expect(await clientEntry()).toBe(macB);
    await agents.get('a')?.converge();
    expect(warns.some((w) => /^a: vip: fd00:38::100 went off this node \d+ ms before its lifetime ran out: another host answered its duplicate address detection/.test(w)), warns.join('; ')).toBe(true);
    // B's agent lets go now; A gets it at a later pass.
    await agents.get('b')?.converge();
    expect(await vipOn(2)).toBeUndefined();
  }, 15_000);
});
