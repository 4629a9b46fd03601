// What the service DNS responder answers from: for each network, this node's gateway on it and
// the addresses of each attached service's tasks that count, read from the node's applied
// (committed) store. A pure function of the state, so the answers are tested from hand-built
// records (test/net/service-dns-answers.test.ts).
//
// A task counts when the leader still wants it running and it runs (healthy, when its service
// has a health check): a task being stopped leaves the name before it stops, so new
// connections go elsewhere while it drains; a task that starts is named once it runs. Every
// task with an address also tells which networks an asker from that address sees (members).

import { gatewayOf } from '../src/resources/address-allocator.ts';
import { parseAddress } from '../src/resources/address-cidr.ts';
import type { NetworkState } from '../src/resources/network-resources.ts';
import type { ControlState } from '../src/resources/state.ts';
import { viewOf } from '../src/resources/task-view.ts';

export interface DnsNetwork {
  name: string;
  internal: boolean;
  subnet: string;
  /** This node's gateway on the network (the address its responder listens on); null without a slice. */
  gateway: string | null;
  /** Service name to the addresses on this network of its tasks that count, sorted; a service attached with none has []. */
  services: ReadonlyMap<string, readonly string[]>;
  /** A task's address on this network to every network the task has an address on (sorted): what an asker from there may see. */
  members: ReadonlyMap<string, readonly string[]>;
}

export interface DnsView {
  /** The store revision it was read at. */
  revision: number;
  networks: ReadonlyMap<string, DnsNetwork>;
  /** Every service of the cluster, on whatever network: a name of one is never sent to the upstream resolvers. */
  services: ReadonlySet<string>;
}

export function dnsView(control: ControlState, nets: NetworkState, nodeId: string): DnsView {
  // Every task that holds an address, whatever its state: a task still draining asks too.
  const networksOfTask = new Map<string, string[]>();
  for (const { value: n } of nets.networks.values()) {
    for (const taskId of Object.keys(n.addresses)) networksOfTask.set(taskId, [...(networksOfTask.get(taskId) ?? []), n.name].sort());
  }
  const networks = new Map<string, DnsNetwork>();
  const aliases = new Set<string>();
  for (const { value: n } of nets.networks.values()) {
    const services = new Map<string, string[]>();
    for (const s of control.services.values()) if (s.value.spec.networks.includes(n.name)) services.set(s.value.name, []);
    for (const [taskId, address] of Object.entries(n.addresses)) {
      const t = control.tasks.get(taskId);
      if (t === undefined || t.value.desired !== 'running' || !viewOf(control, t).healthy) continue;
      // A task of a previous spec still attached here (during an update) is named too.
      const list = services.get(t.value.service) ?? [];
      list.push(address);
      services.set(t.value.service, list);
    }
    for (const list of services.values()) list.sort((a, b) => (parseAddress(a) ?? 0) - (parseAddress(b) ?? 0));
    for (const alias of addStackNames(control, services)) aliases.add(alias);
    for (const alias of addNetworkAliases(control, n.name, services)) aliases.add(alias);
    const members = new Map(Object.entries(n.addresses).map(([taskId, address]) => [address, networksOfTask.get(taskId) ?? [n.name]]));
    const slice = n.slices[nodeId];
    networks.set(n.name, { name: n.name, internal: n.spec.internal, subnet: n.spec.subnet, gateway: slice === undefined ? null : gatewayOf(n.spec, slice), services, members });
  }
  return { revision: control.revision, networks, services: new Set([...control.services.values()].map((s) => s.value.name).concat([...aliases])) };
}

/**
 * A compose stack's service STACK-db (its apply source `stack:STACK`) also answers as `db` on the
 * networks it is on, as in Compose (docs/compose.md). A short name that is a service's own
 * name, or that two stacks on one network share, is not added: the answer is never a guess.
 */
function addStackNames(control: ControlState, services: Map<string, string[]>): string[] {
  const short = new Map<string, string[] | null>();
  for (const name of services.keys()) {
    const source = control.services.get(name)?.value.source ?? null;
    if (source === null || !source.startsWith('stack:')) continue;
    const prefix = `${source.slice('stack:'.length)}-`;
    if (!name.startsWith(prefix) || name.length === prefix.length) continue;
    const alias = name.slice(prefix.length);
    short.set(alias, short.has(alias) ? null : services.get(name) ?? []);
  }
  const added: string[] = [];
  for (const [alias, addresses] of short) {
    if (addresses === null || services.has(alias)) continue;
    services.set(alias, addresses);
    added.push(alias);
  }
  return added;
}

/**
 * A service's network aliases on this network (its spec's networkAliases) name its tasks here
 * too. Two services giving one alias on one network are both answered (their addresses merged,
 * sorted), as Docker does; so is an alias that is also a stack service's short name. A name that
 * is a service's own name on the network stays that service's: an alias never hides one.
 */
function addNetworkAliases(control: ControlState, network: string, services: Map<string, string[]>): string[] {
  const claimed = new Map<string, string[]>();
  for (const { value: s } of control.services.values()) {
    for (const alias of s.spec.networkAliases[network] ?? []) {
      if (!s.spec.networks.includes(network) || (control.services.has(alias) && services.has(alias))) continue;
      claimed.set(alias, [...(claimed.get(alias) ?? []), ...(services.get(s.name) ?? [])]);
    }
  }
  for (const [alias, addresses] of claimed) {
    const merged = [...new Set([...(services.get(alias) ?? []), ...addresses])];
    services.set(alias, merged.sort((a, b) => (parseAddress(a) ?? 0) - (parseAddress(b) ?? 0)));
  }
  return [...claimed.keys()];
}
