// The overlay's pure parts (names, plan, parsers, the Docker create body) and its agent against
// fake Docker and link ports: what it makes, what it adopts, and that it takes nothing away on a
// stale view. The real packets are in overlay.test.ts.

import { describe, expect, it } from 'vitest';
import type { NetworkRecord } from '../../src/resources/network-resources.ts';
import type { NodeRecord } from '../../src/resources/records.ts';
import { OverlayAgent } from '../../net/overlay-agent.ts';
import { networkCreateOptions, toDockerNetworkInfo, type DockerNetworkInfo, type DockerNetworks, type DockerNetworkSpec } from '../../net/overlay-docker.ts';
import { parseFloodDestinations, parseVxlanLinks, VxlanLinks, type VxlanLink } from '../../net/overlay-links.ts';
import { bridgeName, dockerNetworkName, overlayMtu, vniOf, vxlanName } from '../../src/resources/overlay-names.ts';
import { planOverlay } from '../../net/overlay-plan.ts';
import { node } from '../control/fixtures.ts';

const meshNode = (id: string, address: string | null): NodeRecord => node(id, { mesh: { publicKey: `k-${id}`, endpoint: `${id}:51820`, address, peers: [], reportedAt: null } });

function network(name: string, subnet: string, slices: Record<string, number>, internal = false): NetworkRecord {
  return { name, spec: { name, subnet, internal, slicePrefix: 24 }, slices, addresses: {}, createdAt: 0, updatedAt: 0 };
}

describe('overlay names', () => {
  it('derives short, stable device names and a VNI from the subnet', () => {
    expect(bridgeName('back')).toMatch(/^shl-[0-9a-f]{8}$/);
    expect(vxlanName('back')).toBe(`vx-${bridgeName('back').slice(4)}`);
    expect(bridgeName('back')).not.toBe(bridgeName('front'));
    expect(bridgeName('a-network-name-of-sixty-three-characters-is-still-fifteen-bytes').length).toBeLessThanOrEqual(15);
    expect(dockerNetworkName('back')).toBe('shoal-back');
    expect(vniOf('10.62.0.0/16')).toBe((10 << 16) | (62 << 8));
    // Two subnets that do not overlap never share a VNI (each is at least a /24).
    expect(vniOf('10.62.1.0/24')).not.toBe(vniOf('10.62.2.0/24'));
    expect(overlayMtu(1420)).toBe(1370);
    expect(overlayMtu(null)).toBe(1500);
  });
});

describe('planOverlay', () => {
  const nodes = [meshNode('n1', '10.212.0.1'), meshNode('n2', '10.212.0.2'), meshNode('n3', null), node('n4')];

  it('plans the networks this node has a slice of, with its gateway and every other slice holder with a mesh address as a peer', () => {
    const p = planOverlay({ self: 'n1', meshMtu: 1420, nodes, networks: [network('back', '10.62.0.0/16', { n1: 1, n2: 0, n3: 2, n4: 3 }, true), network('other', '10.63.0.0/16', { n2: 0 })] });
    expect(p).toEqual([{
      network: 'back', dockerNetwork: 'shoal-back', bridge: bridgeName('back'), subnet: '10.62.0.0/16', gateway: '10.62.1.1', internal: true, mtu: 1370,
      vxlan: { name: vxlanName('back'), vni: vniOf('10.62.0.0/16'), local: '10.212.0.1', peers: ['10.212.0.2'] }, waitingForMesh: false,
    }]);
  });

  it('without a mesh plans the Docker network only; with a mesh but no address yet, waits for it', () => {
    const nets = [network('back', '10.62.0.0/16', { n1: 0, n3: 1 })];
    expect(planOverlay({ self: 'n1', meshMtu: null, nodes, networks: nets })[0]).toMatchObject({ vxlan: null, waitingForMesh: false, mtu: 1500 });
    expect(planOverlay({ self: 'n3', meshMtu: 1420, nodes, networks: nets })[0]).toMatchObject({ vxlan: null, waitingForMesh: true, gateway: '10.62.1.1' });
  });
});

describe('overlay parsers and the Docker create body', () => {
  it('reads VXLAN devices and flooding entries from iproute2 JSON', () => {
    const links = parseVxlanLinks(JSON.stringify([
      { ifname: 'vx-0123abcd', mtu: 1370, master: 'shl-0123abcd', flags: ['BROADCAST', 'UP'], linkinfo: { info_kind: 'vxlan', info_data: { id: 4242, local: '10.212.0.1', port: 4789, learning: true } } },
      { ifname: 'eth0', mtu: 1500, flags: ['UP'] },
    ]));
    expect(links).toEqual([{ name: 'vx-0123abcd', vni: 4242, local: '10.212.0.1', port: 4789, mtu: 1370, master: 'shl-0123abcd', up: true }]);
    expect(parseFloodDestinations(JSON.stringify([
      { mac: '1e:02:2b:52:59:4b', flags: [], master: 'br0', state: 'permanent' }, { mac: '00:00:00:00:00:00', dst: '10.212.0.3', flags: ['self'] }, { mac: '00:00:00:00:00:00', dst: '10.212.0.2', flags: ['self'] },
    ]))).toEqual(['10.212.0.2', '10.212.0.3']);
    expect(parseVxlanLinks('')).toEqual([]);
    expect(() => parseVxlanLinks('not json')).toThrow(/not JSON/);
    expect(() => parseFloodDestinations('{"mac": 1}')).toThrow(/unexpected shape/);
  });

  it('runs ip and bridge with argument arrays', async () => {
    const calls: string[][] = [];
    const links = new VxlanLinks((cmd, args) => { calls.push([cmd, ...args]); return Promise.resolve('[]'); });
    await links.add('vx-1', 7, '10.212.0.1');
    await links.attach('vx-1', 'shl-1', 1370);
    await links.addFlood('vx-1', '10.212.0.2');
    await links.removeFlood('vx-1', '10.212.0.2');
    expect(calls).toEqual([
      ['ip', 'link', 'add', 'vx-1', 'type', 'vxlan', 'id', '7', 'local', '10.212.0.1', 'dstport', '4789'],
      ['ip', 'link', 'set', 'vx-1', 'master', 'shl-1', 'mtu', '1370', 'up'],
      ['bridge', 'fdb', 'append', '00:00:00:00:00:00', 'dev', 'vx-1', 'dst', '10.212.0.2'],
      ['bridge', 'fdb', 'del', '00:00:00:00:00:00', 'dev', 'vx-1', 'dst', '10.212.0.2'],
    ]);
  });

  it('asks Docker for a labelled bridge network on shoal\'s bridge name, and reads it back', () => {
    const spec: DockerNetworkSpec = { name: 'shoal-back', network: 'back', clusterId: 'c1', bridge: 'shl-0123abcd', subnet: '10.62.0.0/16', gateway: '10.62.1.1', internal: true, mtu: 1370 };
    const o = networkCreateOptions(spec);
    expect(o).toMatchObject({
      Name: 'shoal-back', Driver: 'bridge', Internal: true, IPAM: { Config: [{ Subnet: '10.62.0.0/16', Gateway: '10.62.1.1' }] },
      Options: { 'com.docker.network.bridge.name': 'shl-0123abcd', 'com.docker.network.driver.mtu': '1370' }, Labels: { 'io.shoal.cluster': 'c1', 'io.shoal.network': 'back' },
    });
    expect(toDockerNetworkInfo({ Id: 'x', Name: o.Name, Labels: o.Labels, Options: o.Options, IPAM: o.IPAM })).toEqual({
      id: 'x', name: 'shoal-back', network: 'back', subnet: '10.62.0.0/16', gateway: '10.62.1.1', bridge: 'shl-0123abcd',
    });
    expect(toDockerNetworkInfo({ Id: 'y', Name: 'bridge', Labels: {} })).toBeNull();
  });
});

/** Docker networks and VXLAN devices in memory, as the agent sees them. */
class FakeHost implements DockerNetworks {
  nets = new Map<string, DockerNetworkInfo & { attached: number }>();
  devices = new Map<string, VxlanLink & { floods: string[] }>();
  list(): Promise<DockerNetworkInfo[]> {
    return Promise.resolve([...this.nets.values()].map(({ attached: _a, ...n }) => n));
  }
  create(s: DockerNetworkSpec): Promise<void> {
    this.nets.set(s.name, { id: `id-${s.name}`, name: s.name, network: s.network, subnet: s.subnet, gateway: s.gateway, bridge: s.bridge, attached: 0 });
    return Promise.resolve();
  }
  attachedCount(id: string): Promise<number> {
    return Promise.resolve([...this.nets.values()].find((n) => n.id === id)?.attached ?? 0);
  }
  remove(id: string): Promise<void> {
    for (const [k, n] of this.nets) if (n.id === id) this.nets.delete(k);
    return Promise.resolve();
  }
  links(): VxlanLinks {
    const d = this.devices;
    return Object.assign(Object.create(VxlanLinks.prototype) as VxlanLinks, {
      list: () => Promise.resolve([...d.values()].map(({ floods: _f, ...l }) => l)),
      add: (name: string, vni: number, local: string) => { d.set(name, { name, vni, local, port: 4789, mtu: 1500, master: null, up: false, floods: [] }); return Promise.resolve(); },
      attach: (name: string, master: string, mtu: number) => { Object.assign(d.get(name) ?? {}, { master, mtu, up: true }); return Promise.resolve(); },
      remove: (name: string) => { d.delete(name); return Promise.resolve(); },
      floodDestinations: (name: string) => Promise.resolve([...(d.get(name)?.floods ?? [])]),
      addFlood: (name: string, dst: string) => { d.get(name)?.floods.push(dst); return Promise.resolve(); },
      removeFlood: (name: string, dst: string) => { const l = d.get(name); if (l) l.floods = l.floods.filter((x) => x !== dst); return Promise.resolve(); },
    });
  }
}

function harness(nets: NetworkRecord[], nodes: NodeRecord[]) {
  const host = new FakeHost();
  const state = { nets, nodes, quorum: true };
  let onChange = (): void => undefined;
  const agent = new OverlayAgent({
    self: 'n1', clusterId: 'c1', meshMtu: 1420, docker: host, links: host.links(),
    view: { networks: () => state.nets, nodes: () => state.nodes, subscribe: (f) => { onChange = f; return () => undefined; } },
    caughtUp: () => (state.quorum ? Promise.resolve() : Promise.reject(new Error('no quorum'))),
    log: { info: () => undefined, warn: () => undefined, debug: () => undefined },
  });
  const change = async (): Promise<void> => {
    onChange();
    await agent.idle();
  };
  return { host, state, agent, change };
}

describe('OverlayAgent', () => {
  const nodes = [meshNode('n1', '10.212.0.1'), meshNode('n2', '10.212.0.2'), meshNode('n3', '10.212.0.3')];

  it('makes the Docker network and the VXLAN device with a flooding entry per peer, then says the network is ready', async () => {
    const { host, agent } = harness([network('back', '10.62.0.0/16', { n1: 0, n2: 1, n3: 2 })], nodes);
    const told: boolean[] = [];
    agent.subscribe(() => told.push(agent.isReady('back')));
    agent.start();
    await agent.idle();
    expect(host.nets.get('shoal-back')).toMatchObject({ gateway: '10.62.0.1', bridge: bridgeName('back') });
    expect(host.devices.get(vxlanName('back'))).toMatchObject({ vni: vniOf('10.62.0.0/16'), local: '10.212.0.1', master: bridgeName('back'), mtu: 1370, up: true, floods: ['10.212.0.2', '10.212.0.3'] });
    expect(agent.isReady('back')).toBe(true);
    expect(told).toEqual([true]);
    await agent.close();
  });

  it('adopts what exists on a restart, and takes nothing away without a read barrier', async () => {
    const first = harness([network('back', '10.62.0.0/16', { n1: 0, n2: 1, n3: 2 })], nodes);
    first.agent.start();
    await first.agent.idle();
    await first.agent.close();
    // The same host, a new agent whose store is behind (n3 not in the network yet) and no quorum.
    const second = harness([network('back', '10.62.0.0/16', { n1: 0, n2: 1 })], nodes);
    for (const [k, v] of first.host.nets) second.host.nets.set(k, v);
    for (const [k, v] of first.host.devices) second.host.devices.set(k, v);
    second.state.quorum = false;
    second.agent.start();
    await second.agent.idle();
    expect(second.host.devices.get(vxlanName('back'))?.floods).toEqual(['10.212.0.2', '10.212.0.3']);
    expect(second.agent.isReady('back')).toBe(true);
    // With quorum the stale peer goes.
    second.state.quorum = true;
    await second.change();
    expect(second.host.devices.get(vxlanName('back'))?.floods).toEqual(['10.212.0.2']);
    await second.agent.close();
  });

  it('puts the device back on its bridge when Docker has made the bridge again (a restart of dockerd)', async () => {
    const { host, agent, change } = harness([network('back', '10.62.0.0/16', { n1: 0, n2: 1 })], nodes);
    agent.start();
    await agent.idle();
    Object.assign(host.devices.get(vxlanName('back')) ?? {}, { master: null, up: false });
    await change();
    expect(host.devices.get(vxlanName('back'))).toMatchObject({ master: bridgeName('back'), up: true, floods: ['10.212.0.2'] });
    await agent.close();
  });

  it('tears a removed network down once no container is attached', async () => {
    const { host, state, agent, change } = harness([network('back', '10.62.0.0/16', { n1: 0, n2: 1 })], nodes);
    agent.start();
    await agent.idle();
    const net = host.nets.get('shoal-back');
    if (net === undefined) throw new Error('no network made');
    net.attached = 1;
    state.nets = [];
    await change();
    expect(host.nets.has('shoal-back')).toBe(true);
    expect(host.devices.has(vxlanName('back'))).toBe(true);
    expect(agent.isReady('back')).toBe(false);
    net.attached = 0;
    await change();
    expect(host.nets.size).toBe(0);
    expect(host.devices.size).toBe(0);
    await agent.close();
  });
});

describe('OverlayAgent on a Docker daemon it shares', () => {
  it('keeps a network another node of the daemon made with its own gateway (its containers\' DNS server), and remakes one of an earlier subnet', async () => {
    const nodes = [meshNode('n1', '10.212.0.1'), meshNode('n2', '10.212.0.2')];
    const { host, agent, state, change } = harness([network('back', '10.62.0.0/16', { n1: 1, n2: 0 })], nodes);
    host.nets.set('shoal-back', { id: 'made-by-n2', name: 'shoal-back', network: 'back', subnet: '10.62.0.0/16', gateway: '10.62.0.1', bridge: bridgeName('back'), attached: 1 });
    agent.start();
    await agent.idle();
    expect(host.nets.get('shoal-back')?.id).toBe('made-by-n2');
    expect(agent.isReady('back')).toBe(true);
    // Its containers' DNS server is the gateway on the host (n2's), not n1's own, which no interface has.
    expect(agent.gatewayOn('back')).toBe('10.62.0.1');
    const old = host.nets.get('shoal-back');
    if (old !== undefined) old.attached = 0;
    state.nets = [network('back', '10.70.0.0/16', { n1: 1, n2: 0 })];
    await change();
    expect(host.nets.get('shoal-back')).toMatchObject({ subnet: '10.70.0.0/16', gateway: '10.70.1.1' });
    expect(agent.gatewayOn('back')).toBe('10.70.1.1');
    expect(host.devices.get(vxlanName('back'))?.vni).toBe(vniOf('10.70.0.0/16'));
    await agent.close();
  });
});
