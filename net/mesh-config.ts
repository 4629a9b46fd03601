// The `mesh` section of a node's config (src/server/config.ts): where this node's WireGuard
// listens, what its interface is called, and the range the leader hands mesh addresses out of.

import { z } from 'zod';
import { hostPortSchema } from '../src/base/host-port.ts';
import { ifnamePattern } from './wg.ts';
import { meshCidrDefault, parseCidr } from '../src/resources/mesh-addresses.ts';

export { meshCidrDefault };

/** WireGuard's own port; the one UDP port to forward on a homelab router. */
export const meshPortDefault = 51820;
/** 1500 (Ethernet) - 80 (WireGuard over IPv6: 40 IP + 8 UDP + 32 WireGuard; over IPv4 it is 60). */
export const meshMtuDefault = 1420;

export const meshConfigSchema = z.object({
  /**
   * HOST:PORT, UDP: WireGuard listens on the port, and peers send to this address unless
   * `advertise` names another (a router's public address and forwarded port).
   */
  listen: hostPortSchema,
  advertise: hostPortSchema.optional(),
  /** The interface's name; unique on the machine (several nodes on one machine need one each). */
  interface: z.string().regex(ifnamePattern, 'an interface name (1-15 letters, digits, _ . -)').default('shoal0'),
  /** The mesh addresses' range (IPv4 CIDR, /8 to /30). The leader's value is the one used; keep it the same on every node. */
  cidr: z.string().refine((c) => parseCidr(c) !== null, 'an IPv4 range a.b.c.d/8 to /30, with no host bits set').default(meshCidrDefault),
  mtu: z.number().int().min(1280).max(9000).default(meshMtuDefault),
  /** WireGuard keepalive to each peer, seconds (keeps NAT mappings open and handshakes fresh); 0: off. */
  keepaliveSec: z.number().int().min(0).max(65_535).default(25),
  /** How often the node publishes its peers' handshakes and counters in its record. */
  reportIntervalMs: z.number().int().min(1_000).default(30_000),
  /** How often the node checks its interface against the store even when nothing changed. */
  resyncIntervalMs: z.number().int().min(1_000).default(30_000),
}).strict();

export type MeshConfig = z.infer<typeof meshConfigSchema>;
