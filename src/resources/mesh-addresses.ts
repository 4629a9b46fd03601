// Mesh addresses: IPv4 arithmetic on the mesh range, and the leader's allocation of one address
// per node that published a WireGuard key. Pure: the leader's node pass (src/control/leader-run.ts)
// proposes what this decides as compare-and-sets fenced by its term, so two allocations of one
// address cannot both commit (each reads every address in use from the same applied state, and
// only the leader of the term allocates).

import { putChange, type Change } from './changes.ts';
import { nodesCollection } from './collections.ts';
import type { ControlState } from './state.ts';

/** The range mesh addresses come from unless the config says otherwise: 65,534 nodes. */
export const meshCidrDefault = '10.212.0.0/16';

export interface Cidr {
  /** The network address as an unsigned 32-bit number. */
  base: number;
  prefix: number;
}

export function parseIpv4(s: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (m === null) return null;
  const parts = m.slice(1).map(Number);
  if (parts.some((p, i) => p > 255 || (m[i + 1] as string).length > 1 && (m[i + 1] as string).startsWith('0'))) return null;
  return parts.reduce((acc, p) => acc * 256 + p, 0);
}

export function formatIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** a.b.c.d/p with p in 8..30 and no host bits set; null otherwise. */
export function parseCidr(s: string): Cidr | null {
  const [ip, p, ...rest] = s.split('/');
  if (ip === undefined || p === undefined || rest.length > 0 || !/^\d{1,2}$/.test(p)) return null;
  const base = parseIpv4(ip);
  const prefix = Number(p);
  if (base === null || prefix < 8 || prefix > 30) return null;
  if (base % 2 ** (32 - prefix) !== 0) return null;
  return { base, prefix };
}

export function cidrContains(c: Cidr, ip: number): boolean {
  return ip >= c.base && ip < c.base + 2 ** (32 - c.prefix);
}

/**
 * Addresses for the nodes that published a key and have none: the lowest free host address of the
 * range each, in node-id order (so the same state always gives the same answer). The network and
 * broadcast addresses are never handed out. When the range is full, the rest wait (`unplaced`).
 */
export function allocateMeshAddresses(state: ControlState, cidrText: string): { changes: Change[]; unplaced: string[] } {
  const cidr = parseCidr(cidrText);
  if (cidr === null) return { changes: [], unplaced: [] };
  const used = new Set<number>();
  for (const { value } of state.nodes.values()) {
    const a = value.mesh?.address;
    const n = a === undefined || a === null ? null : parseIpv4(a);
    if (n !== null) used.add(n);
  }
  const waiting = [...state.nodes.values()].filter((n) => n.value.mesh !== null && n.value.mesh.address === null)
    .sort((a, b) => (a.value.id < b.value.id ? -1 : a.value.id > b.value.id ? 1 : 0));
  const changes: Change[] = [];
  const unplaced: string[] = [];
  let next = cidr.base + 1;
  const last = cidr.base + 2 ** (32 - cidr.prefix) - 2;
  for (const { value: node, rev } of waiting) {
    while (next <= last && used.has(next)) next++;
    const mesh = node.mesh;
    if (mesh === null) continue;
    if (next > last) {
      unplaced.push(node.id);
      continue;
    }
    used.add(next);
    changes.push(putChange(nodesCollection, node.id, { ...node, mesh: { ...mesh, address: formatIpv4(next) } }, rev));
  }
  return { changes, unplaced };
}
