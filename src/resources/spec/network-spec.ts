// The normalized Network and FirewallPolicy specs: what `parseSpecs` returns for those kinds and
// what their records store. As for services (service-spec.ts), every field is present with its
// default filled in, and a zod schema validates the stored form; a compile-time check keeps the
// schema and the interface identical. The authoring vocabulary is in network-reader.ts and
// docs/resources.md.

import { z } from 'zod';
import { constraintSchema, type Assert, type Same } from './service-spec.ts';
import type { Constraint } from './constraint.ts';

export interface NetworkSpec {
  /** A DNS label, unique among networks; services name it in `networks`. */
  name: string;
  /** An IPv4 block, `a.b.c.d/p`, p in 8..24, no host bits set; never overlapping another network's. */
  subnet: string;
  /** No traffic leaves the network for the outside (or the host) and none comes in from outside. */
  internal: boolean;
  /**
   * The prefix length of each node's slice of the subnet (address-allocator.ts): /24 slices of a
   * /16, 16 slices of a smaller subnet. Derived from the subnet, stored so it never changes under
   * addresses already handed out.
   */
  slicePrefix: number;
}

export interface PortRule {
  port: number;
  protocol: 'tcp' | 'udp';
}

/** Tasks chosen by the services they belong to, or by the networks they are attached to (either matches). */
export interface Selector {
  services: string[];
  networks: string[];
}

export interface AllowRule {
  from: Selector;
  to: Selector;
  /** The destination ports `from` may open to `to`; only these. */
  ports: PortRule[];
}

export interface PublishRule {
  /** The service whose published ports (spec `ports[].published`) are opened to the outside. */
  service: string;
  /** Which of its published ports; empty: all of them. */
  ports: PortRule[];
  /** On which nodes (the constraint vocabulary of services); empty: every node. */
  nodes: Constraint[];
}

export interface FirewallPolicySpec {
  name: string;
  allow: AllowRule[];
  publish: PublishRule[];
}

const dnsLabel = z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/);
const portRuleSchema = z.object({ port: z.number().int().min(1).max(65535), protocol: z.enum(['tcp', 'udp']) }).strict();
const selectorSchema = z.object({ services: z.array(dnsLabel), networks: z.array(dnsLabel) }).strict();

export const networkSpecSchema = z.object({
  name: dnsLabel,
  subnet: z.string().regex(/^\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}$/),
  internal: z.boolean(),
  slicePrefix: z.number().int().min(9).max(30),
}).strict();

export const firewallPolicySpecSchema = z.object({
  name: dnsLabel,
  allow: z.array(z.object({ from: selectorSchema, to: selectorSchema, ports: z.array(portRuleSchema).min(1) }).strict()),
  publish: z.array(z.object({ service: dnsLabel, ports: z.array(portRuleSchema), nodes: z.array(constraintSchema) }).strict()),
}).strict();

export type _NetworkSpecMatchesSchema = Assert<Same<z.infer<typeof networkSpecSchema>, NetworkSpec>>;
export type _PolicySpecMatchesSchema = Assert<Same<z.infer<typeof firewallPolicySpecSchema>, FirewallPolicySpec>>;
