// What one node's overlay should be, from its applied store: a pure function (no I/O, no clock)
// of the network records, the node records and who this node is.
//
// A node hosts a network when it has a slice of it (the leader gives every node in the store
// one, address-allocator.ts): it gets the Docker network, on the bridge that holds this node's
// gateway of its slice, and, with a mesh, a VXLAN device whose flooding entries name every other
// node with a slice and a mesh address. Without a mesh on this node there is no VXLAN: the
// network is this node's bridge only (a single machine, `shoal dev`).

import { gatewayOf } from '../src/resources/address-allocator.ts';
import type { NetworkRecord } from '../src/resources/network-resources.ts';
import type { NodeRecord } from '../src/resources/records.ts';
import { bridgeName, dockerNetworkName, overlayMtu, vniOf, vxlanName } from '../src/resources/overlay-names.ts';

export interface OverlayVxlanPlan {
  name: string;
  vni: number;
  /** This node's mesh address: the source of the encapsulated UDP. */
  local: string;
  /** The other hosting nodes' mesh addresses, sorted. */
  peers: string[];
}

export interface OverlayNetworkPlan {
  network: string;
  dockerNetwork: string;
  bridge: string;
  subnet: string;
  /** This node's gateway: the bridge's address, the containers' default route and DNS server. */
  gateway: string;
  internal: boolean;
  mtu: number;
  /** Null without a mesh on this node; also null, with `waitingForMesh`, while its mesh address is not allocated yet. */
  vxlan: OverlayVxlanPlan | null;
  /** This node has a mesh but no mesh address yet: the VXLAN device cannot be made, so the network is not ready. */
  waitingForMesh: boolean;
}

export interface OverlayPlanInput {
  self: string;
  networks: Iterable<NetworkRecord>;
  nodes: Iterable<NodeRecord>;
  /** The mesh's MTU on this node; null when it has no mesh (config without `mesh`). */
  meshMtu: number | null;
}

export function planOverlay(input: OverlayPlanInput): OverlayNetworkPlan[] {
  const meshAddress = new Map<string, string>();
  for (const n of input.nodes) if (n.mesh?.address != null) meshAddress.set(n.id, n.mesh.address);
  const local = meshAddress.get(input.self) ?? null;
  const out: OverlayNetworkPlan[] = [];
  for (const record of input.networks) {
    const slice = record.slices[input.self];
    if (slice === undefined) continue;
    const peers = Object.keys(record.slices).filter((id) => id !== input.self).map((id) => meshAddress.get(id))
      .filter((a): a is string => a !== undefined && a !== local);
    const meshed = input.meshMtu !== null;
    out.push({
      network: record.name,
      dockerNetwork: dockerNetworkName(record.name),
      bridge: bridgeName(record.name),
      subnet: record.spec.subnet,
      gateway: gatewayOf(record.spec, slice),
      internal: record.spec.internal,
      mtu: overlayMtu(input.meshMtu),
      vxlan: meshed && local !== null ? { name: vxlanName(record.name), vni: vniOf(record.spec.subnet), local, peers: [...new Set(peers)].sort() } : null,
      waitingForMesh: meshed && local === null,
    });
  }
  return out.sort((a, b) => (a.network < b.network ? -1 : a.network > b.network ? 1 : 0));
}
