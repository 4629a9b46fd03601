// shoal policy: the firewall policies (ls, inspect, rm). Created and changed by
// `shoal apply -f FILE` (kind: FirewallPolicy); docs/network.md, Firewall, says what they allow.

import { stringify } from 'yaml';
import { z } from 'zod';
import { groupHelp, runGroup } from './group.ts';
import { inspectHelp, lsHelp, resourceGroup, rmHelp } from './network.ts';

const port = z.object({ port: z.number(), protocol: z.string() }).loose();
const selector = z.object({ services: z.array(z.string()), networks: z.array(z.string()) }).loose();
const policyItem = z.object({
  name: z.string(), rev: z.number(),
  record: z.object({
    spec: z.object({
      name: z.string(),
      allow: z.array(z.object({ from: selector, to: selector, ports: z.array(port) }).loose()),
      publish: z.array(z.object({ service: z.string(), ports: z.array(port), nodes: z.array(z.object({ text: z.string() }).loose()) }).loose()),
    }).loose(),
  }).loose(),
}).loose();
type PolicyItem = z.infer<typeof policyItem>;

const portText = (p: z.infer<typeof port>): string => `${p.port}/${p.protocol}`;
const selectorText = (s: z.infer<typeof selector>): Record<string, string[]> => ({ ...(s.services.length > 0 ? { services: s.services } : {}), ...(s.networks.length > 0 ? { networks: s.networks } : {}) });

const common = { command: 'policy', noun: 'firewall policy', path: '/v1/firewall-policies' };
const helps = {
  ls: lsHelp({ ...common, about: 'Lists the firewall policies, sorted by name, with how many allow and publish rules each has.' }),
  inspect: inspectHelp(common),
  rm: rmHelp({ ...common, note: 'What a policy allowed closes on every node, established connections included.' }),
};

export const policyGroup = resourceGroup<PolicyItem>({
  ...common, item: policyItem, key: 'policy',
  head: ['NAME', 'ALLOW', 'PUBLISH'],
  row: (p) => [p.name, String(p.record.spec.allow.length), String(p.record.spec.publish.length)],
  inspect: (p) => {
    const s = p.record.spec;
    return `policy  ${p.name}   rev ${p.rev}\n---\n${stringify({
      apiVersion: 'shoal/v1', kind: 'FirewallPolicy', name: s.name,
      allow: s.allow.map((a) => ({ from: selectorText(a.from), to: selectorText(a.to), ports: a.ports.map(portText) })),
      publish: s.publish.map((r) => ({ service: r.service, ports: r.ports.map(portText), nodes: r.nodes.map((c) => c.text) })),
    })}`;
  },
  removed: 'what it allowed closes on every node',
}, `Firewall policies: which services may reach which ports of which others, and which ports are
published on which nodes; networks are isolated without one. Create and change them with
'shoal apply -f FILE' (kind: FirewallPolicy). docs/network.md (Firewall) describes them.`, helps);

export const policyGroupHelp = groupHelp(policyGroup);

export function policyCommand(argv: string[]): Promise<number> {
  return runGroup(policyGroup, argv);
}
