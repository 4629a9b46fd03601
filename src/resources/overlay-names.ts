// The names and numbers of one overlay network on a node: the Docker network shoal creates, the
// Linux bridge under it, the VXLAN device on that bridge, its VNI and its MTU. Pure functions of
// the network's name and subnet, so every node (and every restart of one) derives the same ones
// and finds what an earlier run made (docs/network.md, Overlay).

import { createHash } from 'node:crypto';
import { cidrOf } from './address-cidr.ts';

/** VXLAN's IANA port; the encapsulated UDP only ever travels between mesh addresses, inside WireGuard. */
export const vxlanPort = 4789;
/** VXLAN over IPv4: outer IP 20 + UDP 8 + VXLAN 8 + the inner Ethernet header 14. */
export const vxlanOverheadBytes = 50;
/** Without a mesh a network is one node's bridge only: nothing is encapsulated, so Ethernet's MTU. */
export const overlayMtuWithoutMeshBytes = 1500;
/** Linux interface names are at most 15 bytes. */
export const ifnameBytesMax = 15;

/** Eight hex digits of the name's SHA-256: the part of the device names that tells networks apart. */
function nameHash(network: string): string {
  return createHash('sha256').update(network).digest('hex').slice(0, 8);
}

/** The Docker network shoal creates for `network` (what `docker network ls` and `docker inspect` show). */
export function dockerNetworkName(network: string): string {
  return `shoal-${network}`;
}

/** The Linux bridge Docker makes for that network (`com.docker.network.bridge.name`): `shl-<8 hex>`, 12 bytes. */
export function bridgeName(network: string): string {
  return `shl-${nameHash(network)}`;
}

/** The VXLAN device on that bridge: `vx-<8 hex>`, the same hash as the bridge's. */
export function vxlanName(network: string): string {
  return `vx-${nameHash(network)}`;
}

/**
 * The VXLAN network identifier of a network: its subnet's first address shifted right by 8, so
 * the top 24 bits. Subnets are /8 to /24 and never overlap (spec/documents.ts), so two networks
 * never share a VNI; a subnet never changes, so neither does its VNI. No allocation, no record:
 * every node derives it alone. (A hash of the name could collide; the kernel then refuses the
 * second device.)
 */
export function vniOf(subnet: string): number {
  const { base, prefix } = cidrOf(subnet);
  if (prefix > 24) throw new Error(`assertion: subnet ${subnet} is smaller than a /24 (the spec reader refuses it)`);
  return base >>> 8;
}

/** The MTU of a network's bridge, VXLAN device and containers: the mesh's less VXLAN's overhead (1370 by default). */
export function overlayMtu(meshMtu: number | null): number {
  return meshMtu === null ? overlayMtuWithoutMeshBytes : meshMtu - vxlanOverheadBytes;
}
