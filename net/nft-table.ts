// What the firewall's and the routing mesh's appliers (net/firewall.ts, net/ingress.ts) do alike
// with their nftables tables: read one back (`nft -j list table`) into the comment of its
// `applied` chain and the elements of its named sets, and delete one; a table that is not there
// is no error for either.

import { z } from 'zod';
import { runChecked, type CommandRunner } from './firewall-command.ts';

const elemSchema = z.union([z.string(), z.number(), z.object({ concat: z.array(z.union([z.string(), z.number()])) }).passthrough()]);
const listingSchema = z.object({ nftables: z.array(z.unknown()) });
const setItemSchema = z.object({ set: z.object({ name: z.string(), elem: z.array(elemSchema).optional() }).passthrough() }).passthrough();
const ruleItemSchema = z.object({ rule: z.object({ chain: z.string(), comment: z.string().optional() }).passthrough() }).passthrough();

/** A table as `nft -j list table` shows it: the comment on its `applied` chain's rule, and each set's elements (a concatenation as its parts). */
export interface TableListing {
  appliedComment: string | null;
  sets: Map<string, (string | number)[][]>;
}

/** Reads `nft -j list table ...` output; throws on output that is not nft's JSON listing. */
export function readTableListing(json: string): TableListing {
  const listing = listingSchema.parse(JSON.parse(json));
  let appliedComment: string | null = null;
  const sets = new Map<string, (string | number)[][]>();
  for (const item of listing.nftables) {
    const rule = ruleItemSchema.safeParse(item);
    if (rule.success && rule.data.rule.chain === 'applied') appliedComment = rule.data.rule.comment ?? '';
    const set = setItemSchema.safeParse(item);
    if (set.success) sets.set(set.data.set.name, (set.data.set.elem ?? []).map((e) => (typeof e === 'object' ? e.concat : [e])));
  }
  return { appliedComment, sets };
}

/** nft's protocol of a set element, by name or number; null for any other. */
export function protocolOf(v: string | number | undefined): 'tcp' | 'udp' | null {
  if (v === 'tcp' || v === 6) return 'tcp';
  if (v === 'udp' || v === 17) return 'udp';
  return null;
}

/** One element of a set of address . protocol . port. */
export interface AddressPort { address: string; protocol: 'tcp' | 'udp'; port: number }

/** The elements of a set of address . protocol . port (the firewall's published ports, the mesh's backends); any other protocol is left out. */
export function addressPorts(elems: readonly (string | number)[][] | undefined): AddressPort[] {
  const out: AddressPort[] = [];
  for (const [address, proto, port] of elems ?? []) {
    const protocol = protocolOf(proto);
    if (protocol !== null) out.push({ address: String(address), protocol, port: Number(port) });
  }
  return out;
}

const absent = (stderr: string): boolean => /No such file or directory/.test(stderr);

/** The table's listing (JSON), or null when the table is not there. */
export async function listTable(run: CommandRunner, family: string, name: string): Promise<string | null> {
  const args = ['-j', 'list', 'table', family, name];
  const r = await run('nft', args);
  if (r.code !== 0) {
    if (absent(r.stderr)) return null;
    await runChecked(run, 'nft', args);
  }
  return r.stdout;
}

/** Deletes the table; one that is not there is already gone. */
export async function deleteTable(run: CommandRunner, family: string, name: string): Promise<void> {
  const args = ['delete', 'table', family, name];
  const r = await run('nft', args);
  if (r.code !== 0 && !absent(r.stderr)) await runChecked(run, 'nft', args);
}
