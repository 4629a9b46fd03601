import { describe, expect, it } from 'vitest';
import type { NodeRecord } from '../../src/resources/records.ts';
import { meshConfigSchema } from '../../net/mesh-config.ts';
import { MeshAgent } from '../../net/mesh-agent.ts';
import { additionsOnly, diffMesh, planMesh } from '../../net/mesh-plan.ts';
import type { WgConfig, WgInterface } from '../../net/wg.ts';
import type { WgInterfaceDump } from '../../net/wg-dump.ts';
import { generateKeyPair } from '../../net/wg-keys.ts';
import { node } from '../control/fixtures.ts';

const config = meshConfigSchema.parse({ listen: '10.0.0.1:51820' });
const me = generateKeyPair();
const k2 = generateKeyPair().publicKey;
const k3 = generateKeyPair().publicKey;

const meshNode = (id: string, publicKey: string, address: string | null, endpoint = `${id}.lan:51820`): NodeRecord =>
  node(id, { mesh: { publicKey, endpoint, address, peers: [], reportedAt: null } });

const nodes = [meshNode('n1', me.publicKey, '10.212.0.1'), meshNode('n2', k2, '10.212.0.2', '10.0.0.2:51820'), meshNode('n3', k3, '10.212.0.3', '10.0.0.3:51820'), meshNode('n4', generateKeyPair().publicKey, null), node('n5')];

function dumpOf(c: WgConfig, publicKey: string | null = me.publicKey): WgInterfaceDump {
  return {
    publicKey, listenPort: c.listenPort, fwmark: null,
    peers: c.peers.map((p) => ({ publicKey: p.publicKey, hasPresharedKey: false, endpoint: p.endpoint, allowedIps: p.allowedIps, latestHandshakeSec: null, rxBytes: 0, txBytes: 0, persistentKeepaliveSec: p.persistentKeepaliveSec })),
  };
}

describe('planMesh', () => {
  it('makes every other member with a key and an address a peer, and gives this node its address with the range\'s prefix', () => {
    const p = planMesh(nodes, new Set(['n1', 'n2', 'n3', 'n4', 'n5']), 'n1', me.privateKey, config);
    expect(p.address).toBe('10.212.0.1/16');
    expect(p.config.listenPort).toBe(51820);
    expect(p.config.peers.map((x) => x.allowedIps[0]).sort()).toEqual(['10.212.0.2/32', '10.212.0.3/32']);
    expect(p.config.peers.every((x) => x.persistentKeepaliveSec === 25)).toBe(true);
    expect(p.nodeByKey.get(k3)).toBe('n3');
  });

  it('leaves out a node that is no longer a member, whatever its record says', () => {
    const p = planMesh(nodes, new Set(['n1', 'n2']), 'n1', me.privateKey, config);
    expect(p.config.peers.map((x) => x.publicKey)).toEqual([k2]);
  });
});

describe('diffMesh and additionsOnly', () => {
  const all = planMesh(nodes, new Set(['n1', 'n2', 'n3']), 'n1', me.privateKey, config).config;
  const without3 = planMesh(nodes, new Set(['n1', 'n2']), 'n1', me.privateKey, config).config;

  it('sees nothing to do on an interface that matches', () => {
    expect(diffMesh(all, me.publicKey, dumpOf(all))).toEqual({ added: [], removed: [], changed: [], interfaceChanged: false });
  });

  it('sees removals, additions, changed endpoints and a changed key', () => {
    expect(diffMesh(without3, me.publicKey, dumpOf(all)).removed).toEqual([k3]);
    expect(diffMesh(all, me.publicKey, dumpOf(without3)).added.map((p) => p.publicKey)).toEqual([k3]);
    const moved = { ...all, peers: all.peers.map((p) => (p.publicKey === k2 ? { ...p, endpoint: '10.0.0.9:51820' } : p)) };
    expect(diffMesh(moved, me.publicKey, dumpOf(all)).changed.map((p) => p.publicKey)).toEqual([k2]);
    expect(diffMesh(all, me.publicKey, dumpOf(all, null)).interfaceChanged).toBe(true);
  });

  it('held back to additions, keeps every peer the interface has', () => {
    const held = additionsOnly(without3, dumpOf(all));
    expect(held.peers.map((p) => p.publicKey).sort()).toEqual([k2, k3].sort());
    expect(additionsOnly(all, dumpOf(without3)).peers.map((p) => p.publicKey).sort()).toEqual([k2, k3].sort());
  });
});

/** An interface in memory: what sync wrote is what show reads. */
function fakeInterface(initial: WgConfig | null, addresses: string[]): { wg: WgInterface; syncs: WgConfig[]; addresses: string[] } {
  let state = initial;
  const syncs: WgConfig[] = [];
  const wg = {
    name: 'wgt', ensure: async () => 'adopted', up: async () => {},
    show: async () => (state === null ? { publicKey: null, listenPort: 0, fwmark: null, peers: [] } : dumpOf(state)),
    sync: async (c: WgConfig) => { syncs.push(c); state = c; },
    addresses: async () => [...addresses],
    addAddress: async (a: string) => { addresses.push(a); },
    removeAddress: async (a: string) => { addresses.splice(addresses.indexOf(a), 1); },
  } as unknown as WgInterface;
  return { wg, syncs, addresses };
}

describe('MeshAgent', () => {
  const quiet = { info: () => {}, warn: () => {}, debug: () => {} };
  const all = planMesh(nodes, new Set(['n1', 'n2', 'n3']), 'n1', me.privateKey, config).config;

  async function runOnce(members: string[], barrier: boolean, iface: ReturnType<typeof fakeInterface>): Promise<MeshAgent> {
    const agent = new MeshAgent({
      self: 'n1', config: { ...config, resyncIntervalMs: 3_600_000, reportIntervalMs: 3_600_000 }, keys: me, wg: iface.wg,
      view: { nodes: () => nodes, members: () => new Set(members), subscribe: () => () => {} },
      writer: { updateMesh: async () => {} },
      caughtUp: barrier ? async () => {} : async () => { throw new Error('no quorum'); },
      log: quiet,
    });
    agent.start();
    await agent.idle();
    await agent.close();
    return agent;
  }

  it('removes a peer that left the cluster once the read barrier holds', async () => {
    const iface = fakeInterface(all, ['10.212.0.1/16']);
    await runOnce(['n1', 'n2'], true, iface);
    expect(iface.syncs.at(-1)?.peers.map((p) => p.publicKey)).toEqual([k2]);
  });

  it('without a read barrier removes nothing (no peer, no address) and adds what is missing', async () => {
    const iface = fakeInterface({ ...all, peers: all.peers.filter((p) => p.publicKey === k3) }, ['10.212.0.1/16', '10.212.9.9/16']);
    await runOnce(['n1', 'n2'], false, iface);
    expect(iface.syncs.at(-1)?.peers.map((p) => p.publicKey).sort()).toEqual([k2, k3].sort());
    expect(iface.addresses.sort()).toEqual(['10.212.0.1/16', '10.212.9.9/16']);
  });

  it('rotates the key: commits the new public key first, then stores the pair, then the interface takes it; a refused commit changes nothing', async () => {
    const iface = fakeInterface(all, ['10.212.0.1/16']);
    const written: (string | undefined)[] = [];
    let refuse = true;
    const agent = new MeshAgent({
      self: 'n1', config: { ...config, resyncIntervalMs: 3_600_000, reportIntervalMs: 3_600_000 }, keys: me, wg: iface.wg,
      view: { nodes: () => nodes, members: () => new Set(['n1', 'n2', 'n3']), subscribe: () => () => {} },
      writer: {
        updateMesh: async (change) => {
          if (refuse) throw new Error('no_leader: the cluster has no leader right now');
          written.push(change(nodes[0]?.mesh ?? null)?.publicKey);
        },
      },
      caughtUp: async () => {}, log: quiet,
    });
    agent.start();
    await agent.idle();
    const next = generateKeyPair();
    const stored: string[] = [];
    await expect(agent.rotateKey(next, (p) => stored.push(p.privateKey))).rejects.toThrow(/no_leader/);
    await agent.idle();
    expect(stored).toEqual([]);
    expect(agent.publicKey).toBe(me.publicKey);
    expect(iface.syncs.at(-1)?.privateKey ?? me.privateKey).toBe(me.privateKey);
    refuse = false;
    await agent.rotateKey(next, (p) => stored.push(p.privateKey));
    await agent.idle();
    expect(written[0]).toBe(next.publicKey);
    expect(stored).toEqual([next.privateKey]);
    expect(agent.publicKey).toBe(next.publicKey);
    expect(iface.syncs.at(-1)?.privateKey).toBe(next.privateKey);
    // Nothing published the old key after the new one.
    expect(written.filter((k) => k === me.publicKey)).toEqual([]);
    await agent.close();
    await expect(agent.rotateKey(generateKeyPair(), () => {})).rejects.toThrow(/stopping/);
  });

  it('changes nothing on an interface that already matches (an adopted one after a restart)', async () => {
    const iface = fakeInterface(all, ['10.212.0.1/16']);
    await runOnce(['n1', 'n2', 'n3'], false, iface);
    expect(iface.syncs).toEqual([]);
  });
});
