// What a node's firewall lets through, as data: the policy's allow rules and published ports
// resolved to the addresses of the tasks they name. A pure function of the committed state
// (networks, policies, services, tasks with their addresses) and of this node.
//
// Permits are tuples (source address, destination address, protocol, destination port), the
// elements of the table's `permits` set: the renderer writes them, and the applier reads the
// set back from the kernel to know which permissions a new table removes, so it can end the
// connections they allowed (firewall.ts). Only tuples with a task of this node at one end are
// kept: a node filters what its own tasks send and receive.

import { matchesConstraint, type ConstraintSubject } from '../src/resources/spec/constraint.ts';
import type { FirewallPolicySpec, PortRule, Selector } from '../src/resources/spec/network-spec.ts';
import type { PortSpec } from '../src/resources/spec/service-spec.ts';
import { compareText } from '../src/base/order.ts';

export interface FirewallNetwork {
  name: string;
  subnet: string;
  internal: boolean;
}

export interface FirewallTask {
  id: string;
  service: string;
  nodeId: string;
  /** Network name to the task's address on it. */
  addresses: Readonly<Record<string, string>>;
}

export interface FirewallService {
  name: string;
  ports: readonly PortSpec[];
}

export interface Permit {
  from: string;
  to: string;
  protocol: 'tcp' | 'udp';
  port: number;
}

/** A task's container port opened to the outside (a published port, after Docker's DNAT to the task). */
export interface Published {
  address: string;
  protocol: 'tcp' | 'udp';
  port: number;
}

export interface PermitInput {
  /** This node: its id, name and labels (publish rules choose nodes by constraint). */
  node: ConstraintSubject;
  networks: readonly FirewallNetwork[];
  policies: readonly FirewallPolicySpec[];
  services: readonly FirewallService[];
  /** Live tasks (desired running) with their addresses. */
  tasks: readonly FirewallTask[];
}

/** Tuples in the permits set at most: beyond it the render refuses (and the node keeps its table). */
export const permitsMax = 65_536;

export class FirewallTooLargeError extends Error {
  constructor(readonly permits: number) {
    super(`the firewall policy resolves to ${permits} permitted (source, destination, port) tuples on this node; at most ${permitsMax}. Select fewer services or ports, or use networks`);
  }
}

function selected(s: Selector, t: FirewallTask): boolean {
  return s.services.includes(t.service) || s.networks.some((n) => t.addresses[n] !== undefined);
}

const permitKey = (p: Permit): string => `${p.from} ${p.to} ${p.protocol} ${p.port}`;

export function firewallPermits(input: PermitInput): { permits: Permit[]; published: Published[] } {
  const local = (t: FirewallTask): boolean => t.nodeId === input.node.id;
  const permits = new Map<string, Permit>();
  for (const policy of input.policies) {
    for (const rule of policy.allow) {
      const from = input.tasks.filter((t) => selected(rule.from, t));
      const to = input.tasks.filter((t) => selected(rule.to, t));
      for (const f of from) {
        for (const t of to) {
          if (f.id === t.id || (!local(f) && !local(t))) continue;
          addPairs(permits, f, t, rule.ports);
        }
      }
    }
  }
  return { permits: [...permits.values()].sort(comparePermits), published: publishedOf(input) };
}

function addPairs(permits: Map<string, Permit>, f: FirewallTask, t: FirewallTask, ports: readonly PortRule[]): void {
  for (const fromAddress of Object.values(f.addresses)) {
    for (const toAddress of Object.values(t.addresses)) {
      for (const p of ports) {
        const permit: Permit = { from: fromAddress, to: toAddress, protocol: p.protocol, port: p.port };
        permits.set(permitKey(permit), permit);
        if (permits.size > permitsMax) throw new FirewallTooLargeError(permits.size);
      }
    }
  }
}

function publishedOf(input: PermitInput): Published[] {
  const out = new Map<string, Published>();
  for (const policy of input.policies) {
    for (const rule of policy.publish) {
      if (!rule.nodes.every((c) => matchesConstraint(c, input.node))) continue;
      const service = input.services.find((s) => s.name === rule.service);
      if (service === undefined) continue;
      const ports = service.ports.filter((p) => rule.ports.length === 0 || rule.ports.some((r) => r.port === p.published && r.protocol === p.protocol));
      for (const t of input.tasks) {
        if (t.service !== service.name || t.nodeId !== input.node.id) continue;
        for (const address of Object.values(t.addresses)) {
          for (const p of ports) out.set(`${address} ${p.protocol} ${p.target}`, { address, protocol: p.protocol, port: p.target });
        }
      }
    }
  }
  return [...out.values()].sort((a, b) => compareAddress(a.address, b.address) || compareText(a.protocol, b.protocol) || a.port - b.port);
}

function compareAddress(a: string, b: string): number {
  const n = (s: string): number => s.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  return n(a) - n(b);
}

export function comparePermits(a: Permit, b: Permit): number {
  return compareAddress(a.from, b.from) || compareAddress(a.to, b.to) || compareText(a.protocol, b.protocol) || a.port - b.port;
}

/** The permits in `before` that `after` no longer has: the connections they allowed must end. */
export function removedPermits(before: readonly Permit[], after: readonly Permit[]): Permit[] {
  const kept = new Set(after.map(permitKey));
  return before.filter((p) => !kept.has(permitKey(p)));
}

export function removedPublished(before: readonly Published[], after: readonly Published[]): Published[] {
  const key = (p: Published): string => `${p.address} ${p.protocol} ${p.port}`;
  const kept = new Set(after.map(key));
  return before.filter((p) => !kept.has(key(p)));
}
