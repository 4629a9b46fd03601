// The firewall with real packets: a node and three workloads in network namespaces (firewall-lab.ts),
// addresses from the allocator, the table rendered from a policy and applied by the Firewall
// class through `ip netns exec`. Needs root, ip, nft, conntrack and iptables (.ci/run installs
// them); without them the test fails and says what is missing. Run under the machine-wide lock.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allocate, gatewayOf, type NetworkAllocation } from '../../src/resources/address-allocator.ts';
import { slicePrefixFor } from '../../src/resources/spec/network-reader.ts';
import type { FirewallPolicySpec, NetworkSpec } from '../../src/resources/spec/network-spec.ts';
import { commandRunner } from '../../net/firewall-command.ts';
import { Firewall, dockerRuleComment } from '../../net/firewall.ts';
import { acceptMark, renderFirewall } from '../../net/firewall-render.ts';
import type { FirewallTask } from '../../net/firewall-permits.ts';
import { FirewallLab, labPrerequisites, type LabNetwork, type Workload } from './firewall-lab.ts';

const node = { id: 'n1', name: 'n1', labels: {} };
const ports = { api: 7101, peer: 7001 };
const spec = (name: string, subnet: string, internal: boolean): NetworkSpec => ({ name, subnet, internal, slicePrefix: slicePrefixFor(16) });
const front = spec('front', '10.231.0.0/16', false);
const back = spec('back', '10.232.0.0/16', true);

/** A policy: web may open db's 5432/tcp and 5433/udp (and whatever `extra` adds). */
const webToDb = (extra: FirewallPolicySpec['allow'] = []): FirewallPolicySpec => ({
  name: 'web-db',
  allow: [{ from: { services: ['web'], networks: [] }, to: { services: ['db'], networks: [] }, ports: [{ port: 5432, protocol: 'tcp' }, { port: 5433, protocol: 'udp' }] }, ...extra],
  publish: [],
});

describe('the node firewall, with real packets in network namespaces', () => {
  let lab: FirewallLab;
  let firewall: Firewall;
  let tasks: FirewallTask[];
  let web: Workload;
  let db: Workload;
  let cache: Workload;
  let host: Workload;
  let gatewayBack: string;
  let revision = 10;

  const apply = async (policies: FirewallPolicySpec[]): Promise<Awaited<ReturnType<Firewall['apply']>>> => {
    revision += 1;
    const rendered = renderFirewall({
      node, term: 3, revision, managementPorts: [ports.api, ports.peer], networks: [front, back], policies, services: [], tasks,
    });
    return firewall.apply(rendered);
  };

  beforeAll(async () => {
    const missing = labPrerequisites();
    if (missing.length > 0) throw new Error(`the firewall tests cannot run on this machine:\n  ${missing.join('\n  ')}`);
    lab = new FirewallLab();
    lab.dockerLookAlike();
    // Addresses as the leader would give them: node n1's slice of each network, tasks from it.
    const alloc = (n: NetworkSpec, ids: string[]): NetworkAllocation => allocate(n, { slices: {}, addresses: {} }, ['n1'], ids.map((id) => ({ id, nodeId: 'n1', live: true }))).allocation;
    const a = alloc(front, ['web-1']);
    const b = alloc(back, ['db-1', 'cache-1']);
    tasks = [
      { id: 'web-1', service: 'web', nodeId: 'n1', addresses: { front: a.addresses['web-1'] as string } },
      { id: 'db-1', service: 'db', nodeId: 'n1', addresses: { back: b.addresses['db-1'] as string } },
      { id: 'cache-1', service: 'cache', nodeId: 'n1', addresses: { back: b.addresses['cache-1'] as string } },
    ];
    const bra: LabNetwork = { name: 'front', bridge: 'bra', gateway: gatewayOf(front, a.slices.n1 as number), prefix: 16 };
    const brb: LabNetwork = { name: 'back', bridge: 'brb', gateway: gatewayOf(back, b.slices.n1 as number), prefix: 16 };
    gatewayBack = brb.gateway;
    lab.addNetwork(bra);
    lab.addNetwork(brb);
    web = await lab.addWorkload('web', bra, tasks[0]?.addresses.front as string, [5432]);
    db = await lab.addWorkload('db', brb, tasks[1]?.addresses.back as string, [5432, 5433, 6379, 6380]);
    cache = await lab.addWorkload('cache', brb, tasks[2]?.addresses.back as string, [5432]);
    host = await lab.hostListeners([22, ports.api, ports.peer, 9999]);
    firewall = new Firewall(commandRunner({ prefix: ['ip', 'netns', 'exec', lab.host] }));
  });

  afterAll(() => lab?.destroy());

  it('isolates networks by default, and records the term and revision it applied', async () => {
    const report = await apply([]);
    expect(report.before).toBeNull();
    expect(report.docker).toBe(true);
    expect(lab.iptablesHas(['DOCKER-USER', '-m', 'mark', '--mark', `0x${acceptMark.toString(16)}/0x${acceptMark.toString(16)}`, '-m', 'comment', '--comment', dockerRuleComment, '-j', 'ACCEPT'])).toBe(true);
    expect(await web.reaches(db.address, 5432)).toBe(false);
    expect(await db.reaches(web.address, 5432)).toBe(false);
    // Inside one network everything passes (the bridge; routed only between networks).
    expect(await db.reaches(cache.address, 5432)).toBe(true);
    expect(await firewall.inForce()).toMatchObject({ nodeId: 'n1', term: 3, revision, permits: [] });
    expect(lab.nftList()).toContain(`comment "shoal node=n1 term=3 revision=${revision}"`);
  });

  it('never filters SSH, the API or the peer port on the host, even from an internal network', async () => {
    for (const port of [22, ports.api, ports.peer]) expect(await db.reaches(gatewayBack, port), `port ${port}`).toBe(true);
    // The internal network reaches nothing else on the host: the accepts above come first.
    expect(await db.reaches(gatewayBack, 9999)).toBe(false);
    expect(host.name).toBe('host');
  });

  it('lets exactly the ports a policy names through, one way', async () => {
    const report = await apply([webToDb()]);
    expect(report.before?.revision).toBe(revision - 1);
    expect(await web.reaches(db.address, 5432)).toBe(true);
    expect(await web.reaches(db.address, 6379)).toBe(false);
    expect(await web.reaches(cache.address, 5432)).toBe(false);
    expect(await db.reaches(web.address, 5432)).toBe(false);
    expect((await firewall.inForce())?.permits).toEqual([
      { from: web.address, to: db.address, protocol: 'tcp', port: 5432 },
      { from: web.address, to: db.address, protocol: 'udp', port: 5433 },
    ]);
  });

  it('replaces the table atomically: traffic it allows never stops, traffic it refuses never passes', async () => {
    expect((await web.ask({ op: 'open', id: 'steady', host: db.address, port: 5432, timeoutMs: 1500 })).ok).toBe(true);
    const before = { allowed: (await db.ask({ op: 'received', port: 5433 })).count as number, refused: (await db.ask({ op: 'received', port: 6380 })).count as number };
    const count = 300;
    const streams = Promise.all([
      web.ask({ op: 'udp', host: db.address, port: 5433, count, gapMs: 3 }),
      web.ask({ op: 'udp', host: db.address, port: 6380, count, gapMs: 3 }),
    ]);
    // Unrelated changes, applied again and again while both streams run.
    for (let i = 0; i < 20; i++) {
      const unrelated = i % 2 === 0 ? [{ from: { services: ['cache'], networks: [] }, to: { services: ['web'], networks: [] }, ports: [{ port: 8000 + i, protocol: 'tcp' as const }] }] : [];
      await apply([webToDb(unrelated)]);
    }
    await streams;
    // Let the last datagrams arrive (a receive count, not a timing assertion).
    await new Promise((r) => setTimeout(r, 300));
    expect((await db.ask({ op: 'received', port: 5433 })).count as number - before.allowed).toBe(count);
    expect((await db.ask({ op: 'received', port: 6380 })).count as number - before.refused).toBe(0);
    expect((await web.ask({ op: 'echo', id: 'steady', timeoutMs: 1500 })).ok).toBe(true);
  });

  it('closes the port again when the policy goes, and ends the connection it allowed (conntrack)', async () => {
    expect((await web.ask({ op: 'open', id: 'held', host: db.address, port: 5432, timeoutMs: 1500 })).ok).toBe(true);
    expect((await web.ask({ op: 'echo', id: 'held', timeoutMs: 1500 })).ok).toBe(true);
    const report = await apply([]);
    expect(report.revoked).toBe(2);
    expect((await web.ask({ op: 'echo', id: 'held', timeoutMs: 1500 })).ok).toBe(false);
    expect(await web.reaches(db.address, 5432)).toBe(false);
    for (const port of [22, ports.api, ports.peer]) expect(await db.reaches(gatewayBack, port), `port ${port}`).toBe(true);
  });
});
