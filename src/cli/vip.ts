// shoal vip ls: the virtual IPs (docs/network.md, "Virtual IP"), each with its holder, since when,
// and how much of the holder's lease is left as the answering node sees it.

import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { resolveAddr } from './client.ts';
import { read } from './control-api.ts';
import { tableText } from './control-format.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { compareNatural } from '../base/order.ts';

const vipViewSchema = z.object({
  address: z.string(),
  interface: z.string().nullable(),
  subnet: z.string().nullable(),
  holder: z.object({ id: z.string(), name: z.string().nullable(), epoch: z.number() }).loose().nullable(),
  since: z.number(),
  previous: z.string().nullable(),
  released: z.boolean(),
  retired: z.boolean(),
  leaseLeftMs: z.number().nullable(),
  rev: z.number(),
}).loose();
const listSchema = z.object({ items: z.array(vipViewSchema), rev: z.number() }).loose();

export const vipLsHelp = `Usage: shoal vip ls [--stale] [--addr HOST:PORT] [--json]

Lists the virtual IPs (the config's 'vips', docs/network.md "Virtual IP"), sorted by address:
where nodes put it (interface or subnet), the node that holds it, since when, and the lease
left: what remains of the holder's VIP lease as the answering node sees it (the holder keeps
the address only while its lease holds, and the kernel drops it by itself when it runs out).
HOLDER '-' means nobody holds it now (no node may, or the old holder's lease is running out).
'(released)' marks a holder that let go (a planned stop, a drain): the leader moves it at once.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {items: [{address, interface, subnet, holder: {id, name, epoch} | null, since,
previous, released, retired, leaseLeftMs, rev}], rev} (GET /v1/vips).
${clientExitCodes}`;

export const vipGroup: Group = {
  name: 'vip',
  about: `Virtual IPs: LAN addresses that one healthy node holds at a time and that move when it
goes away. They are set in the nodes' config ('vips'); docs/network.md ("Virtual IP") describes them.`,
  subcommands: {
    ls: { summary: 'list the virtual IPs: address, holder, since, lease left', help: vipLsHelp, run: vipLsCommand },
  },
};

export const vipGroupHelp = groupHelp(vipGroup);

export function vipCommand(argv: string[]): Promise<number> {
  return runGroup(vipGroup, argv);
}

const readFlags = { ...commonFlags, stale: { type: 'boolean', default: false } } as const;

/** The table `vip ls` prints (exported for its test). */
export function vipTable(items: z.infer<typeof vipViewSchema>[], nowMs: number): string {
  const rows = [...items].sort((a, b) => compareNatural(a.address, b.address)).map((v) => {
    const holder = v.holder === null ? '-' : `${v.holder.name ?? v.holder.id}${v.released ? ' (released)' : ''}`;
    const since = `${new Date(v.since).toISOString()} (${Math.max(0, Math.round((nowMs - v.since) / 1000))}s ago)`;
    const left = v.holder === null || v.leaseLeftMs === null ? '-' : `${(v.leaseLeftMs / 1000).toFixed(1)}s`;
    return [v.address, v.interface ?? v.subnet ?? '-', holder, since, left];
  });
  return tableText(['ADDRESS', 'ON', 'HOLDER', 'SINCE', 'LEASE LEFT'], rows);
}

async function vipLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, readFlags, vipLsHelp);
  if (values.help) return help(vipLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const body = await read(resolveAddr(values.addr), '/v1/vips', listSchema, 'vip ls', values.stale);
  if (values.json) console.log(JSON.stringify(body, null, 2));
  else if (body.items.length === 0) console.log("no virtual IPs; name them in the nodes' config under 'vips' (docs/network.md, \"Virtual IP\")");
  else console.log(vipTable(body.items, Date.now()));
  return exitCodes.ok;
}
