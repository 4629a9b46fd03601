// How `shoal node ls` and `node inspect` show the WireGuard mesh: per node its mesh address, and per
// peer the latest handshake's age and the bytes received and sent, as the node last reported them
// (its record's mesh.peers, written every mesh.reportIntervalMs). A peer with no handshake for
// longer than handshakeStaleMs is flagged: with a keepalive, WireGuard renews a session's keys
// every 2 minutes, so a handshake older than that means the peer cannot be reached.

import { z } from 'zod';
import { formatMemory } from '../resources/spec/quantity.ts';
import type { NodeView } from './control-api.ts';
import { tableText } from './control-format.ts';
import { compareText } from '../base/order.ts';

/** A peer whose latest handshake is older than this (or who never had one) is reported. */
export const handshakeStaleMs = 5 * 60_000;

const meshSchema = z.object({
  address: z.string().nullable(),
  endpoint: z.string(),
  peers: z.array(z.object({ nodeId: z.string(), latestHandshakeAt: z.number().nullable(), rxBytes: z.number(), txBytes: z.number() }).loose()),
  reportedAt: z.number().nullable(),
}).loose();

export type MeshView = z.infer<typeof meshSchema>;

/** The node's mesh fields, or null when it takes no part (or the record is from before the mesh). */
export function meshOf(n: NodeView): MeshView | null {
  const parsed = meshSchema.safeParse((n.record as { mesh?: unknown }).mesh);
  return parsed.success ? parsed.data : null;
}

export const meshHead = ['NODE', 'MESH ADDRESS', 'ENDPOINT', 'PEER', 'HANDSHAKE', 'RECEIVED', 'SENT'];

export function ageText(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}

function stale(latest: number | null, nowMs: number): boolean {
  return latest === null || nowMs - latest > handshakeStaleMs;
}

/** One row per node and peer (a node without peers gets one row); nodes without mesh are left out. */
export function meshRows(items: readonly NodeView[], nowMs: number): string[][] {
  const names = new Map(items.map((n) => [n.id, n.name]));
  const rows: string[][] = [];
  for (const n of [...items].sort((a, b) => compareText(a.name, b.name))) {
    const m = meshOf(n);
    if (m === null) continue;
    const head = [n.name, m.address ?? 'pending', m.endpoint];
    if (m.peers.length === 0) rows.push([...head, '-', '-', '-', '-']);
    m.peers.forEach((p, i) => {
      const hs = p.latestHandshakeAt === null ? 'never' : ageText(nowMs - p.latestHandshakeAt);
      rows.push([...(i === 0 ? head : ['', '', '']), names.get(p.nodeId) ?? p.nodeId, stale(p.latestHandshakeAt, nowMs) ? `${hs} (!)` : hs, formatMemory(p.rxBytes), formatMemory(p.txBytes)]);
    });
  }
  return rows;
}

/** One line per peer without a recent handshake: what an operator should look at. */
export function meshWarnings(items: readonly NodeView[], nowMs: number): string[] {
  const names = new Map(items.map((n) => [n.id, n.name]));
  const out: string[] = [];
  for (const n of items) {
    const m = meshOf(n);
    for (const p of m?.peers ?? []) {
      if (!stale(p.latestHandshakeAt, nowMs)) continue;
      const peer = names.get(p.nodeId) ?? p.nodeId;
      const since = p.latestHandshakeAt === null ? 'never had a handshake' : `has had no handshake for ${ageText(nowMs - p.latestHandshakeAt).replace(' ago', '')}`;
      out.push(`mesh: ${n.name} ${since} with ${peer} (bound ${handshakeStaleMs / 60_000}m): check that UDP to ${endpointOf(items, p.nodeId)} gets through`);
    }
  }
  return out;
}

function endpointOf(items: readonly NodeView[], id: string): string {
  const m = items.find((n) => n.id === id);
  return (m !== undefined ? meshOf(m)?.endpoint : undefined) ?? 'its endpoint';
}

/** The mesh part of `node ls`: a table and the warnings, or '' when no node has mesh. */
export function meshText(items: readonly NodeView[], nowMs: number): string {
  const rows = meshRows(items, nowMs);
  if (rows.length === 0) return '';
  const table = tableText(meshHead, rows);
  return ['', table, ...meshWarnings(items, nowMs)].join('\n');
}
