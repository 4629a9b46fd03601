// The cluster view of GET /v1/cluster as the CLI reads it (validated), and how members are
// named to people: by name first, sorted by name, with the id alongside.

import { z } from 'zod';
import type { ClusterView } from '../api/cluster-routes.ts';
import { request } from './client.ts';
import { compareText } from '../base/order.ts';

const memberSchema = z.object({
  id: z.string(), name: z.string(), peerAddress: z.string(), apiAddress: z.string(), role: z.enum(['voter', 'learner']),
  matchIndex: z.number().nullable(), lag: z.number().nullable(), rttMs: z.number().nullable(), softwareVersion: z.string().nullable(),
  // Absent from older nodes' views, like softwareVersion below.
  featureLevelMax: z.number().nullable().optional(),
  health: z.enum(['healthy', 'lagging', 'unreachable', 'unknown']),
}).loose();

export const clusterViewSchema = z.object({
  clusterId: z.string(), view: z.enum(['leader', 'local']), node: z.string(),
  // Absent from nodes older than the field: the view of a cluster being upgraded still reads.
  softwareVersion: z.string().optional(),
  leader: z.string().nullable(), term: z.number(), commitIndex: z.number(), appliedIndex: z.number(), lastIndex: z.number(),
  featureLevel: z.number().optional(),
  members: z.array(memberSchema),
}).loose();

export type View = z.infer<typeof clusterViewSchema>;
export type MemberInfo = View['members'][number];

// The schema and the API's type must describe the same thing (softwareVersion and the feature
// levels aside, which the schema lets older nodes leave out).
type Full = View & { softwareVersion: string; featureLevel: number; members: (MemberInfo & { featureLevelMax: number | null })[] };
const _sameShape: Full extends ClusterView ? true : never = true;
void _sameShape;

export async function getView(addr: string): Promise<View> {
  return (await request(addr, 'GET', '/v1/cluster', clusterViewSchema, { timeoutMs: 5000 })).body;
}

/** "n3 (7cd79e0a3b1f2c4d)": the name people know, and the id that is unique for ever. */
export function label(m: { id: string; name: string }): string {
  return m.name === m.id ? m.id : `${m.name} (${m.id})`;
}

export function byName<T extends { id: string; name: string }>(members: readonly T[]): T[] {
  return [...members].sort((a, b) => compareText(a.name, b.name) || compareText(a.id, b.id));
}

/** The members' versions when they differ (a rolling upgrade in progress), else undefined. */
export function mixedVersions(v: View): string | undefined {
  const by = new Map<string, string[]>();
  for (const m of byName(v.members)) {
    const key = m.softwareVersion ?? 'unknown';
    by.set(key, [...(by.get(key) ?? []), m.name]);
  }
  if (by.size < 2) return undefined;
  return [...by.entries()].map(([version, names]) => `${version} (${names.join(', ')})`).join(', ');
}

export function table(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}
