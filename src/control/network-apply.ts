// What an apply's Network and FirewallPolicy documents change in the store, and the checks that
// need the store: a subnet overlapping a stored network's, a subnet changed under a network
// (refused: addresses were handed out from it; remove the network and apply it again), a
// service naming a network that is neither stored nor in the same apply. Pure, like planApply;
// refusals are one bad_request listing every problem with its path, as the parser's are.

import type { Compare } from '../../fsm/index.ts';
import { ShoalError } from '../errors.ts';
import { deleteChange, putChange, type Change, type Plan } from '../resources/changes.ts';
import { cidrOf, cidrsOverlap } from '../resources/address-cidr.ts';
import { firewallPoliciesCollection, networksCollection, type FirewallPolicyRecord, type NetworkRecord, type NetworkState } from '../resources/network-resources.ts';
import { refusal, jsonEqual, type SpecSet } from '../resources/spec/index.ts';
import { keyPath, type Problem } from '../resources/spec/reader.ts';
import { fixedAddressProblem } from '../resources/spec/network-addresses.ts';
import type { ControlState } from '../resources/state.ts';

export interface ResourceOutcome {
  name: string;
  outcome: 'created' | 'updated' | 'unchanged';
}

export interface NetworkApplyPlan {
  changes: Change[];
  /** The stored networks the services name: the write applies only if they are still there, unchanged. */
  compares: Compare[];
  networks: ResourceOutcome[];
  firewallPolicies: ResourceOutcome[];
}

/**
 * Throws bad_request (every problem with its path) when the set does not fit the stored networks
 * (and, given the stored services, when a fixed address is another service's).
 */
export function checkNetworks(nets: NetworkState, set: SpecSet, state?: ControlState): void {
  const problems: Problem[] = [];
  set.networks.forEach((n, i) => {
    const cur = nets.networks.get(n.name)?.value;
    if (cur !== undefined && cur.spec.subnet !== n.subnet) {
      problems.push({ path: `networks[${i}].subnet`, message: `network ${n.name} has subnet ${cur.spec.subnet}, and addresses were handed out from it; a subnet does not change: remove the network (shoal network rm ${n.name}) and apply it again` });
    }
    for (const other of nets.networks.values()) {
      if (other.value.name === n.name || set.networks.some((m) => m.name === other.value.name)) continue;
      if (cidrsOverlap(cidrOf(other.value.spec.subnet), cidrOf(n.subnet))) {
        problems.push({ path: `networks[${i}].subnet`, message: `${n.subnet} overlaps ${other.value.spec.subnet} of network ${other.value.name}; subnets of networks never overlap` });
      }
    }
  });
  const known = new Set([...nets.networks.keys(), ...set.networks.map((n) => n.name)]);
  set.services.forEach((s, i) => {
    s.networks.forEach((name, j) => {
      if (!known.has(name)) problems.push({ path: `services[${i}].networks[${j}]`, message: `no network "${name}": apply a Network of that name first, or in the same apply` });
    });
  });
  problems.push(...addressProblems(nets, set, state));
  if (problems.length > 0) throw refusal(problems);
}

/**
 * Each fixed address (networkAddresses) is a task's address of its network's subnet, and no
 * other service's: not one a stored service fixes (unless this apply replaces that service), nor
 * another service's of this apply.
 */
function addressProblems(nets: NetworkState, set: SpecSet, state: ControlState | undefined): Problem[] {
  const problems: Problem[] = [];
  const applied = new Set(set.services.map((s) => s.name));
  const holder = new Map<string, string>();
  for (const s of state?.services.values() ?? []) {
    if (applied.has(s.value.name)) continue;
    for (const [network, address] of Object.entries(s.value.spec.networkAddresses)) holder.set(`${network} ${address}`, `service ${s.value.name}`);
  }
  set.services.forEach((s, i) => {
    for (const [network, address] of Object.entries(s.networkAddresses)) {
      const path = keyPath(`services[${i}].networkAddresses`, network);
      const spec = set.networks.find((n) => n.name === network) ?? nets.networks.get(network)?.value.spec;
      // A network that does not exist is said above.
      const wrong = spec === undefined ? null : fixedAddressProblem(spec, address);
      if (wrong !== null) problems.push({ path, message: wrong });
      const other = holder.get(`${network} ${address}`);
      if (other !== undefined) problems.push({ path, message: `${address} on network ${network} is already the fixed address of ${other}: pick another, or drop it there first` });
      else holder.set(`${network} ${address}`, `service ${s.name} (services[${i}] of this apply)`);
    }
  });
  return problems;
}

export function planNetworkApply(nets: NetworkState, set: SpecSet, now: number): NetworkApplyPlan {
  const changes: Change[] = [];
  const networks = set.networks.map((spec): ResourceOutcome => {
    const cur = nets.networks.get(spec.name);
    if (cur !== undefined && jsonEqual(cur.value.spec, spec)) return { name: spec.name, outcome: 'unchanged' };
    const record: NetworkRecord = cur === undefined
      ? { name: spec.name, spec, slices: {}, addresses: {}, createdAt: now, updatedAt: now }
      : { ...cur.value, spec, updatedAt: now };
    changes.push(putChange(networksCollection, spec.name, record, cur?.rev ?? null));
    return { name: spec.name, outcome: cur === undefined ? 'created' : 'updated' };
  });
  const firewallPolicies = set.firewallPolicies.map((spec): ResourceOutcome => {
    const cur = nets.policies.get(spec.name);
    if (cur !== undefined && jsonEqual(cur.value.spec, spec)) return { name: spec.name, outcome: 'unchanged' };
    const record: FirewallPolicyRecord = { name: spec.name, spec, createdAt: cur?.value.createdAt ?? now, updatedAt: now };
    changes.push(putChange(firewallPoliciesCollection, spec.name, record, cur?.rev ?? null));
    return { name: spec.name, outcome: cur === undefined ? 'created' : 'updated' };
  });
  const named = new Set(set.services.flatMap((sv) => sv.networks));
  const compares: Compare[] = [...named].sort().flatMap((name): Compare[] => {
    const cur = nets.networks.get(name);
    return cur === undefined || set.networks.some((n) => n.name === name) ? [] : [{ collection: networksCollection, id: name, target: 'rev', cmp: '=', value: cur.rev }];
  });
  return { changes, compares, networks, firewallPolicies };
}

/** The services that attach to a network: while any does, the network stays. */
export function servicesOnNetwork(state: ControlState, name: string): string[] {
  return [...state.services.values()].filter((s) => s.value.spec.networks.includes(name)).map((s) => s.value.name).sort();
}

/** Removing a network: refused (bad_request) while a service names it. */
export function planNetworkRemove(state: ControlState, nets: NetworkState, name: string): Plan | undefined {
  const cur = nets.networks.get(name);
  if (cur === undefined) return undefined;
  const users = servicesOnNetwork(state, name);
  if (users.length > 0) {
    const problem = { path: 'params.name', message: `network ${name} is used by ${users.join(', ')}; remove it from their networks (or remove them) first` };
    throw new ShoalError('bad_request', `network ${name} is not removed: ${problem.message}`, { problems: [problem] });
  }
  return { changes: [deleteChange(networksCollection, name, cur.rev)], compares: [] };
}

export function planPolicyRemove(nets: NetworkState, name: string): Plan | undefined {
  const cur = nets.policies.get(name);
  if (cur === undefined) return undefined;
  return { changes: [deleteChange(firewallPoliciesCollection, name, cur.rev)], compares: [] };
}
