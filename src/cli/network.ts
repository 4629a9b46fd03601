// shoal network: the overlay networks (ls, inspect, rm), and the shared shape of the commands of
// the network resources (shoal policy, policy.ts). Networks are created and changed by
// `shoal apply -f FILE` (kind: Network); docs/network.md describes them.

import { stringify } from 'yaml';
import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr, retryNotice } from './client.ts';
import { read } from './control-api.ts';
import { tableText } from './control-format.ts';
import { oneName } from './control-args.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, commonFlagsText, groupHelp, runGroup, type Group } from './group.ts';
import { compareText } from '../base/order.ts';

const enc = encodeURIComponent;
const readFlags = { ...commonFlags, stale: { type: 'boolean', default: false } } as const;
const removedSchema = z.object({ name: z.string(), removed: z.boolean(), rev: z.number().nullable() }).loose();

/** What differs between `shoal network` and `shoal policy`. */
export interface ResourceCommands<Item> {
  /** `network`, `policy`: the command's name. */
  command: string;
  /** `network`, `firewall policy`: in messages. */
  noun: string;
  path: string;
  item: z.ZodType<Item>;
  /** The key of the one item in GET path/NAME (`network`, `policy`). */
  key: string;
  head: string[];
  row: (item: Item) => string[];
  /** The lines `inspect` prints. */
  inspect: (item: Item) => string;
  removed: string;
}

export function lsHelp(r: { command: string; noun: string; path: string; about: string }): string {
  return `Usage: shoal ${r.command} ls [--stale] [--addr HOST:PORT] [--json]

${r.about}

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints {items, rev} (GET ${r.path}).
${clientExitCodes}`;
}

export function inspectHelp(r: { command: string; noun: string; path: string }): string {
  return `Usage: shoal ${r.command} inspect NAME [--stale] [--addr HOST:PORT] [--json]

Shows a ${r.noun}: its spec in the form 'shoal apply' reads back, and what the cluster made of it.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
${commonFlagsHelp}

With --json prints the answer of GET ${r.path}/NAME.
${clientExitCodes} An unknown ${r.noun} exits 1 (not_found).`;
}

export function rmHelp(r: { command: string; noun: string; note: string }): string {
  return `Usage: shoal ${r.command} rm NAME... [--addr HOST:PORT] [--json]

Removes ${r.noun}s. ${r.note}

Options:
${commonFlagsText()}

With --json prints one {name, removed, rev} per ${r.noun}, as a list.
${clientExitCodes} An unknown ${r.noun} exits 1 (not_found); the ones before it are removed.`;
}

export function resourceGroup<Item>(r: ResourceCommands<Item>, about: string, helps: { ls: string; inspect: string; rm: string }): Group {
  const listSchema = z.object({ items: z.array(r.item), rev: z.number() }).loose();
  const oneSchema = z.object({ [r.key]: r.item, rev: z.number() }).loose();
  return {
    name: r.command,
    about,
    subcommands: {
      ls: {
        summary: `list ${r.noun}s`, help: helps.ls,
        run: async (argv) => {
          const { values, positionals } = parse(argv, readFlags, helps.ls);
          if (values.help) return help(helps.ls);
          if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
          const body = await read(resolveAddr(values.addr), r.path, listSchema, `${r.command} ls`, values.stale);
          if (values.json) console.log(JSON.stringify(body, null, 2));
          else console.log(body.items.length === 0 ? `no ${r.noun}s; create one with: shoal apply -f FILE` : tableText(r.head, body.items.map(r.row)));
          return exitCodes.ok;
        },
      },
      inspect: {
        summary: `show a ${r.noun} and its spec`, help: helps.inspect,
        run: async (argv) => {
          const { values, positionals } = parse(argv, readFlags, helps.inspect);
          if (values.help) return help(helps.inspect);
          const name = oneName(positionals);
          const body = await read(resolveAddr(values.addr), `${r.path}/${enc(name)}`, oneSchema, `${r.command} inspect`, values.stale);
          if (values.json) console.log(JSON.stringify(body, null, 2));
          else process.stdout.write(r.inspect(body[r.key] as Item));
          return exitCodes.ok;
        },
      },
      rm: {
        summary: `remove ${r.noun}s`, help: helps.rm,
        run: async (argv) => {
          const { values, positionals } = parse(argv, commonFlags, helps.rm);
          if (values.help) return help(helps.rm);
          if (positionals.length === 0) throw new UsageError(`expected NAME... (the ${r.noun}s to remove)`);
          const addr = resolveAddr(values.addr);
          const out: unknown[] = [];
          for (const name of positionals) {
            const { body } = await request(addr, 'DELETE', `${r.path}/${enc(name)}`, removedSchema, { retry: 'not-applied', onRetry: retryNotice(`${r.command} rm`) });
            out.push(body);
            if (!values.json) console.log(`removed ${name}; ${r.removed}`);
          }
          if (values.json) console.log(JSON.stringify(out, null, 2));
          return exitCodes.ok;
        },
      },
    },
  };
}

const networkItem = z.object({
  name: z.string(), rev: z.number(), slices: z.record(z.string(), z.string()), addresses: z.number(), services: z.array(z.string()),
  record: z.object({ spec: z.object({ name: z.string(), subnet: z.string(), internal: z.boolean(), slicePrefix: z.number() }).loose() }).loose(),
}).loose();
type NetworkItem = z.infer<typeof networkItem>;

const common = { command: 'network', noun: 'network', path: '/v1/networks' };
const helps = {
  ls: lsHelp({ ...common, about: 'Lists the overlay networks, sorted by name: subnet, internal or not, the slice each node\ntakes, the tasks holding an address, and the services attached.' }),
  inspect: inspectHelp(common),
  rm: rmHelp({ ...common, note: 'Refused while a service names the network in its networks: change or remove those\nservices first.' }),
};

export const networkGroup = resourceGroup<NetworkItem>({
  ...common, item: networkItem, key: 'network',
  head: ['NAME', 'SUBNET', 'INTERNAL', 'NODES', 'ADDRESSES', 'SERVICES'],
  row: (n) => [n.name, n.record.spec.subnet, n.record.spec.internal ? 'yes' : 'no', String(Object.keys(n.slices).length), String(n.addresses), n.services.join(',') || '-'],
  inspect: (n) => {
    const s = n.record.spec;
    const slices = Object.entries(n.slices).sort(([a], [b]) => compareText(a, b)).map(([node, cidr]) => `  ${node}: ${cidr}`);
    return `network  ${n.name}   rev ${n.rev}\nservices ${n.services.join(', ') || '(none)'}\nslices (each node's /${s.slicePrefix}):\n${slices.join('\n') || '  (none yet)'}\naddresses ${n.addresses}\n---\n${stringify({ apiVersion: 'shoal/v1', kind: 'Network', name: s.name, subnet: s.subnet, internal: s.internal })}`;
  },
  removed: 'its bridges and addresses go on every node',
}, `Overlay networks: services attach to them by name (networks: [NAME] in a Service spec). Create
and change them with 'shoal apply -f FILE' (kind: Network). docs/network.md describes them.`, helps);

export const networkGroupHelp = groupHelp(networkGroup);

export function networkCommand(argv: string[]): Promise<number> {
  return runGroup(networkGroup, argv);
}
