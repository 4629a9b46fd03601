// The Network and FirewallPolicy kinds: their field tables (the whole authoring vocabulary of
// each) and the checks that span fields. Written in the strict reader of reader.ts, so an
// unknown field, a bad CIDR or a port out of range is reported with its path, all at once.
// Checks across documents (two networks whose subnets overlap) are in documents.ts.

import { formatCidr, parseCidr } from '../address-cidr.ts';
import type { Constraint } from './constraint.ts';
import {
  INVALID, boolean, describe, list, readFields, required, string, struct, withDefault, type Fields, type Problems, type Read, type Reader,
} from './reader.ts';
import { constraint, dnsLabel } from './service-fields.ts';
import type { AllowRule, FirewallPolicySpec, NetworkSpec, PortRule, PublishRule, Selector } from './network-spec.ts';

/** Subnet prefix lengths a network may have: at least 256 addresses, at most a /8. */
export const subnetPrefixMin = 8;
export const subnetPrefixMax = 24;

/** Each node's slice: a /24 of a /16 or larger subnet, else a sixteenth of the subnet (a /28 of a /24). */
export function slicePrefixFor(subnetPrefix: number): number {
  return Math.min(28, Math.max(24, subnetPrefix + 4));
}

const subnet: Reader<string> = (value, at, problems) => {
  const text = string({ nonEmpty: true, maxChars: 18 })(value, at, problems);
  if (text === INVALID) return INVALID;
  const r = parseCidr(text);
  if (!r.ok) {
    problems.add(at, r.message);
    return INVALID;
  }
  if (r.cidr.prefix < subnetPrefixMin || r.cidr.prefix > subnetPrefixMax) {
    problems.add(at, `${formatCidr(r.cidr)} is a /${r.cidr.prefix}; a network's subnet is a /${subnetPrefixMin} to a /${subnetPrefixMax} (each node takes a slice of it)`);
    return INVALID;
  }
  return formatCidr(r.cidr);
};

const networkFields: Fields<{ name: string; subnet: string; internal: boolean }> = {
  name: required(dnsLabel),
  subnet: required(subnet),
  internal: withDefault(boolean, () => false),
};

export const networkFieldNames: readonly string[] = Object.keys(networkFields);

export function readNetwork(value: unknown, at: string, problems: Problems): Read<NetworkSpec> {
  const r = readFields(value, at, problems, networkFields);
  if (r === INVALID || !r.ok) return INVALID;
  const { name, subnet: block, internal } = r.values as { name: string; subnet: string; internal: boolean };
  const prefix = Number(block.split('/')[1]);
  return { name, subnet: block, internal, slicePrefix: slicePrefixFor(prefix) };
}

/** A port: `80` (TCP), `"53/udp"`, `"443/tcp"`. */
export const portRule: Reader<PortRule> = (value, at, problems) => {
  const bad = (): typeof INVALID => {
    problems.add(at, `${typeof value === 'string' ? JSON.stringify(value) : describe(value)} is not a port: write 80 (TCP), "80/tcp" or "53/udp", the port 1..65535`);
    return INVALID;
  };
  if (typeof value === 'number') return Number.isInteger(value) && value >= 1 && value <= 65535 ? { port: value, protocol: 'tcp' } : bad();
  if (typeof value !== 'string') return bad();
  const m = /^([1-9]\d{0,4})(?:\/(tcp|udp))?$/.exec(value);
  if (m === null || Number(m[1]) > 65535) return bad();
  return { port: Number(m[1]), protocol: (m[2] ?? 'tcp') as PortRule['protocol'] };
};

function distinctPorts(ports: PortRule[], at: string, problems: Problems): boolean {
  const seen = new Set<string>();
  let ok = true;
  ports.forEach((p, i) => {
    const key = `${p.port}/${p.protocol}`;
    if (seen.has(key)) {
      problems.add(`${at}[${i}]`, `${key} is named twice`);
      ok = false;
    }
    seen.add(key);
  });
  return ok;
}

const selector = struct<Selector, Selector>({
  services: withDefault(list(dnsLabel), () => []),
  networks: withDefault(list(dnsLabel), () => []),
}, (s, at, problems) => {
  if (s.services.length + s.networks.length === 0) {
    problems.add(at, 'selects nothing; name services (services: [web]) or networks (networks: [backend])');
    return INVALID;
  }
  return { services: [...new Set(s.services)].sort(), networks: [...new Set(s.networks)].sort() };
});

const allowRule = struct<AllowRule, AllowRule>({
  from: required(selector),
  to: required(selector),
  ports: required(list(portRule)),
}, (s, at, problems) => {
  if (s.ports.length === 0) {
    problems.add(`${at}.ports`, 'must name at least one port: a policy allows exactly the ports it names');
    return INVALID;
  }
  return distinctPorts(s.ports, `${at}.ports`, problems) ? s : INVALID;
});

const publishRule = struct<{ service: string; ports: PortRule[]; nodes: Constraint[] }, PublishRule>({
  service: required(dnsLabel),
  ports: withDefault(list(portRule), () => []),
  nodes: withDefault(list(constraint), () => []),
}, (s, at, problems) => {
  // Each node's firewall decides from its own record, which does not say its raft role.
  const role = s.nodes.findIndex((c) => c.attribute === 'role');
  if (role >= 0) {
    problems.add(`${at}.nodes[${role}]`, 'node.role is not taken in publish rules (a node\'s firewall knows its record, not the raft roles); give the nodes a label and name it');
    return INVALID;
  }
  return distinctPorts(s.ports, `${at}.ports`, problems) ? s : INVALID;
});

const policyFields: Fields<FirewallPolicySpec> = {
  name: required(dnsLabel),
  allow: withDefault(list(allowRule), () => []),
  publish: withDefault(list(publishRule), () => []),
};

export const firewallPolicyFieldNames: readonly string[] = Object.keys(policyFields);

export function readFirewallPolicy(value: unknown, at: string, problems: Problems): Read<FirewallPolicySpec> {
  const r = readFields(value, at, problems, policyFields);
  if (r === INVALID || !r.ok) return INVALID;
  const s = r.values as FirewallPolicySpec;
  if (s.allow.length + s.publish.length === 0) {
    problems.add(at, 'allows nothing; give allow rules, publish rules, or both (networks are isolated without a policy)');
    return INVALID;
  }
  return s;
}
