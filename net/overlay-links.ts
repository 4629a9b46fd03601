// The VXLAN devices of the overlay and their flooding entries, through `ip` and `bridge`
// (iproute2) and the one tool wrapper (wg-command.ts): arguments as arrays, a timeout, JSON
// output (`ip -j`, `bridge -j`) parsed strictly here, and `net_tool_failed` on any failure.
//
// A device is `ip link add vx-… type vxlan id VNI local <mesh address> dstport 4789`, a port of
// the network's bridge. Its only static forwarding entries are the all-zeros MAC to each peer's
// mesh address (head-end replication: broadcasts, ARP and unknown unicast go to every peer; no
// multicast). Learning stays on: a reply teaches the device which peer holds which MAC, so
// unicast then goes to that peer alone. What it learns comes only from packets that arrived
// through WireGuard (the mesh checks each peer's source address), so only members can teach it.

import { z } from 'zod';
import { ShoalError } from '../src/errors.ts';
import { vxlanPort } from '../src/resources/overlay-names.ts';
import { runTool, type ToolRunner } from './wg-command.ts';

/** The all-zeros MAC: a VXLAN forwarding entry for it floods to its destination. */
export const floodMac = '00:00:00:00:00:00';

export interface VxlanLink {
  name: string;
  vni: number;
  /** The source address of its UDP; null when the device has none. */
  local: string | null;
  port: number;
  mtu: number;
  /** The bridge it is a port of; null when none. */
  master: string | null;
  up: boolean;
}

const linkSchema = z.object({
  ifname: z.string(),
  mtu: z.number().int(),
  master: z.string().optional(),
  flags: z.array(z.string()).default([]),
  linkinfo: z.object({
    info_kind: z.string(),
    info_data: z.object({ id: z.number().int(), local: z.string().optional(), port: z.number().int().optional() }).passthrough().optional(),
  }).passthrough().optional(),
}).passthrough();

const fdbSchema = z.object({ mac: z.string(), dst: z.string().optional() }).passthrough();

/** Parses `ip -j -d link show type vxlan`: the VXLAN devices, whatever their names. */
export function parseVxlanLinks(json: string): VxlanLink[] {
  const rows = parseJson(json, 'ip -j -d link show type vxlan', z.array(linkSchema));
  const out: VxlanLink[] = [];
  for (const r of rows) {
    const data = r.linkinfo?.info_data;
    if (r.linkinfo?.info_kind !== 'vxlan' || data === undefined) continue;
    out.push({
      name: r.ifname, vni: data.id, local: data.local ?? null, port: data.port ?? vxlanPort, mtu: r.mtu, master: r.master ?? null, up: r.flags.includes('UP'),
    });
  }
  return out;
}

/** Parses `bridge -j fdb show dev X`: the destinations of its flooding (all-zeros MAC) entries, sorted. */
export function parseFloodDestinations(json: string): string[] {
  const rows = parseJson(json, 'bridge -j fdb show', z.array(fdbSchema));
  return [...new Set(rows.filter((r) => r.mac === floodMac && r.dst !== undefined).map((r) => r.dst as string))].sort();
}

function parseJson<T>(text: string, what: string, schema: z.ZodType<T>): T {
  let raw: unknown;
  try {
    raw = JSON.parse(text.trim() === '' ? '[]' : text);
  } catch (err) {
    throw new ShoalError('net_tool_failed', `${what} printed something that is not JSON: ${(err as Error).message}`);
  }
  const r = schema.safeParse(raw);
  if (!r.success) throw new ShoalError('net_tool_failed', `${what} printed JSON of an unexpected shape: ${r.error.issues[0]?.message ?? ''}`);
  return r.data;
}

/** The VXLAN devices of a node, through `ip` and `bridge`. */
export class VxlanLinks {
  constructor(private readonly run: ToolRunner = runTool) {}

  async list(): Promise<VxlanLink[]> {
    return parseVxlanLinks(await this.run('ip', ['-j', '-d', 'link', 'show', 'type', 'vxlan']));
  }

  /** Creates the device (down, on no bridge). */
  async add(name: string, vni: number, local: string): Promise<void> {
    await this.run('ip', ['link', 'add', name, 'type', 'vxlan', 'id', String(vni), 'local', local, 'dstport', String(vxlanPort)]);
  }

  /** Makes it a port of `bridge` with `mtu`, and up. Idempotent. */
  async attach(name: string, bridge: string, mtu: number): Promise<void> {
    await this.run('ip', ['link', 'set', name, 'master', bridge, 'mtu', String(mtu), 'up']);
  }

  async remove(name: string): Promise<void> {
    await this.run('ip', ['link', 'del', name]);
  }

  async floodDestinations(name: string): Promise<string[]> {
    return parseFloodDestinations(await this.run('bridge', ['-j', 'fdb', 'show', 'dev', name]));
  }

  async addFlood(name: string, dst: string): Promise<void> {
    await this.run('bridge', ['fdb', 'append', floodMac, 'dev', name, 'dst', dst]);
  }

  async removeFlood(name: string, dst: string): Promise<void> {
    await this.run('bridge', ['fdb', 'del', floodMac, 'dev', name, 'dst', dst]);
  }
}
