// What this node's WireGuard interface should be, from its applied store: a pure function of the
// node records, the cluster's membership and the node's own key and config. A peer is every other
// member that published a key and has a mesh address; a node removed from the cluster is no
// peer, whatever its record still says.

import type { NodeRecord } from '../src/resources/records.ts';
import { splitHostPort } from '../src/base/host-port.ts';
import { parseCidr } from '../src/resources/mesh-addresses.ts';
import type { MeshConfig } from './mesh-config.ts';
import type { WgConfig, WgPeerConfig } from './wg.ts';
import type { WgInterfaceDump } from './wg-dump.ts';

export interface MeshPlan {
  /** This node's address with the range's prefix (`10.212.0.3/16`), or null before it has one. */
  address: string | null;
  config: WgConfig;
  /** The peers' node ids, by public key (to name the peers of `wg show`). */
  nodeByKey: Map<string, string>;
}

export function planMesh(nodes: Iterable<NodeRecord>, members: ReadonlySet<string>, self: string, privateKey: string, config: MeshConfig): MeshPlan {
  const peers: WgPeerConfig[] = [];
  const nodeByKey = new Map<string, string>();
  let address: string | null = null;
  const prefix = parseCidr(config.cidr)?.prefix ?? 16;
  for (const n of nodes) {
    const m = n.mesh;
    if (m === null || m.address === null) continue;
    if (n.id === self) {
      address = `${m.address}/${prefix}`;
      continue;
    }
    if (!members.has(n.id) || nodeByKey.has(m.publicKey)) continue;
    nodeByKey.set(m.publicKey, n.id);
    peers.push({ publicKey: m.publicKey, endpoint: m.endpoint, allowedIps: [`${m.address}/32`], persistentKeepaliveSec: config.keepaliveSec === 0 ? null : config.keepaliveSec });
  }
  peers.sort((a, b) => (a.publicKey < b.publicKey ? -1 : a.publicKey > b.publicKey ? 1 : 0));
  return { address, config: { privateKey, listenPort: splitHostPort(config.listen).port, peers }, nodeByKey };
}

export interface MeshDiff {
  /** Peers to add (their key is not on the interface). */
  added: WgPeerConfig[];
  /** Keys of peers on the interface that the plan does not have. */
  removed: string[];
  /** Peers whose endpoint, allowed IPs or keepalive differ. */
  changed: WgPeerConfig[];
  /** The interface's own key or port differ from the plan. */
  interfaceChanged: boolean;
}

export function diffMesh(plan: WgConfig, ownPublicKey: string, current: WgInterfaceDump): MeshDiff {
  const have = new Map(current.peers.map((p) => [p.publicKey, p]));
  const want = new Set(plan.peers.map((p) => p.publicKey));
  const added: WgPeerConfig[] = [];
  const changed: WgPeerConfig[] = [];
  for (const p of plan.peers) {
    const h = have.get(p.publicKey);
    if (h === undefined) added.push(p);
    else if (!samePeer(p, h)) changed.push(p);
  }
  return {
    added, changed, removed: current.peers.filter((p) => !want.has(p.publicKey)).map((p) => p.publicKey),
    interfaceChanged: current.publicKey !== ownPublicKey || current.listenPort !== plan.listenPort,
  };
}

const ipv4Endpoint = /^\d{1,3}(\.\d{1,3}){3}:\d{1,5}$/;

function samePeer(want: WgPeerConfig, have: WgInterfaceDump['peers'][number]): boolean {
  // A host name is resolved by wg: the dump shows the address, which a name never equals.
  if (want.endpoint !== null && ipv4Endpoint.test(want.endpoint) && have.endpoint !== want.endpoint) return false;
  if ([...want.allowedIps].sort().join(',') !== [...have.allowedIps].sort().join(',')) return false;
  return want.persistentKeepaliveSec === have.persistentKeepaliveSec;
}

/**
 * The plan held back to additions: the interface's peers stay as they are (from the dump), and
 * only peers it lacks are added. Used when this node cannot confirm that its applied store is
 * current (no quorum, or just restarted): it never removes or rewrites a peer on a stale view.
 */
export function additionsOnly(plan: WgConfig, current: WgInterfaceDump): WgConfig {
  const kept: WgPeerConfig[] = current.peers.map((p) => ({
    publicKey: p.publicKey, endpoint: p.endpoint, allowedIps: p.allowedIps, persistentKeepaliveSec: p.persistentKeepaliveSec,
  }));
  const have = new Set(current.peers.map((p) => p.publicKey));
  return { ...plan, peers: [...kept, ...plan.peers.filter((p) => !have.has(p.publicKey))] };
}
