// What an apply must hold for the routing mesh (docs/network.md, "Ingress"), checked against the
// store before anything is written; pure, like planApply.
//
// - An ingress port is open on every node, so one (protocol, port) belongs to one service in the
//   whole cluster: a second service publishing it, in ingress or in host mode (a host-mode port
//   would be taken by the mesh's DNAT on every node), is refused with both named.
// - Every task with an ingress port joins the network `ingress` (the service reader adds it to
//   the spec's networks). The first apply that needs it makes it, with ingressSubnetDefault,
//   unless a Network of that name is stored or in the same apply; a default subnet that would
//   overlap a stored network is refused, saying how to choose another.
// - An ingress port is open only on the nodes that run the mesh (config ingress.enabled, with the
//   docker runtime; a node's record says so in `ingress`). When every node says it does not (`shoal
//   dev`, a cluster of memory or no runtime, the mesh turned off), the apply is accepted, since a node
//   that runs it may join later, but answers a warning naming the services and ports that are
//   open nowhere (ingressWarnings).
// - A rollback (POST /v1/services/{name}/rollback) brings back the previous spec's ports: they
//   are checked as an apply's are (rollbackIngressPlan), so a port another service took since is
//   refused with both named, and the port records are claimed in the same transaction. The
//   orchestrator's automatic rollback (update.failureAction: rollback) checks the same way
//   (rollbackPortClash): with a port taken since, the update pauses instead, naming the port
//   and the service that has it; otherwise it claims the records it brings back.
//
// Two applies running at once would each pass the check (each reads a store without the other's
// service), so the check holds under concurrency through the port records
// (src/resources/ingress-ports.ts): portClaims() adds to the apply's transaction a
// compare-and-set write of the record of every port a service gains, so of two racing applies of
// one port the second's write fails, and its write path decides again, seeing the first. The
// mesh's renderer still gives a port claimed twice to the older service and says so in its log
// (net/ingress-render.ts): records written before this check, or by hand, stay unambiguous.

import { cidrOf, cidrsOverlap } from '../resources/address-cidr.ts';
import type { NetworkState } from '../resources/network-resources.ts';
import { refusal, type SpecSet } from '../resources/spec/index.ts';
import { ingressNetworkName, ingressSubnetDefault } from '../resources/spec/ingress.ts';
import { slicePrefixFor } from '../resources/spec/network-reader.ts';
import type { NetworkSpec } from '../resources/spec/network-spec.ts';
import type { Problem } from '../resources/spec/reader.ts';
import { isIngressPort, type PortSpec, type ServiceSpec } from '../resources/spec/service-spec.ts';
import type { ControlState } from '../resources/state.ts';
import { putChange, type Plan } from '../resources/changes.ts';
import { ingressPortId, ingressPortsCollection, type IngressPortRecord } from '../resources/ingress-ports.ts';

interface Claim {
  service: string;
  /** Where it was written: `services[i].ports[j]` in this apply, null for a stored service. */
  path: string | null;
  ingress: boolean;
}

const portKey = (p: PortSpec): string => `${p.published}/${p.protocol}`;

function claimsOf(state: ControlState, set: SpecSet): Map<string, Claim[]> {
  const applied = new Set(set.services.map((s) => s.name));
  const claims = new Map<string, Claim[]>();
  const add = (key: string, c: Claim): void => { claims.set(key, [...(claims.get(key) ?? []), c]); };
  // Stored services the apply leaves as they are, then the apply's own (which replace their stored specs).
  for (const [name, svc] of state.services) {
    if (applied.has(name)) continue;
    for (const p of svc.value.spec.ports) add(portKey(p), { service: name, path: null, ingress: isIngressPort(p) });
  }
  set.services.forEach((s, i) => {
    s.ports.forEach((p, j) => add(portKey(p), { service: s.name, path: `services[${i}].ports[${j}].published`, ingress: isIngressPort(p) }));
  });
  return claims;
}

/** Problems of ingress ports claimed twice: each written claim that meets another service's port, with both named. */
export function ingressPortProblems(state: ControlState, set: SpecSet): Problem[] {
  const problems: Problem[] = [];
  for (const [key, claims] of claimsOf(state, set)) {
    if (!claims.some((c) => c.ingress)) continue;
    for (const c of claims) {
      if (c.path === null) continue;
      const other = claims.find((o) => o.service !== c.service && (o.ingress || c.ingress));
      if (other === undefined) continue;
      const mine = c.ingress ? 'ingress' : 'host';
      const theirs = other.ingress ? 'in ingress mode (open on every node)' : 'in host mode';
      problems.push({
        path: c.path,
        message: `service ${c.service} publishes ${key} (${mine}), and service ${other.service} publishes it ${theirs}${other.path === null ? '' : ' in this apply'}; an ingress port is open on every node, so it belongs to one service: choose another published port for one of them`,
      });
    }
  }
  return problems;
}

/** The implicit `ingress` network, when a service of the set needs it and none is stored or applied. */
export function implicitIngressNetwork(nets: NetworkState, set: SpecSet): NetworkSpec | null {
  const needed = set.services.some((s) => s.networks.includes(ingressNetworkName));
  if (!needed || nets.networks.has(ingressNetworkName) || set.networks.some((n) => n.name === ingressNetworkName)) return null;
  const prefix = cidrOf(ingressSubnetDefault).prefix;
  return { name: ingressNetworkName, subnet: ingressSubnetDefault, internal: false, slicePrefix: slicePrefixFor(prefix) };
}

/**
 * Throws bad_request (every problem with its path) when the set's ingress ports clash or the
 * implicit network cannot be made; otherwise returns the set with that network added when needed.
 */
export function prepareIngress(state: ControlState, nets: NetworkState, set: SpecSet): SpecSet {
  const problems = ingressPortProblems(state, set);
  const implicit = implicitIngressNetwork(nets, set);
  if (implicit !== null) {
    const taken = [...nets.networks.values()].map((n) => n.value.spec).concat(set.networks)
      .find((n) => cidrsOverlap(cidrOf(n.subnet), cidrOf(implicit.subnet)));
    if (taken !== undefined) {
      const at = set.services.findIndex((s) => s.networks.includes(ingressNetworkName));
      problems.push({
        path: `services[${at}].ports`,
        message: `its ingress ports need the network ${ingressNetworkName}, which shoal makes with subnet ${implicit.subnet}; that overlaps ${taken.subnet} of network ${taken.name}: apply a Network named ${ingressNetworkName} with a free subnet first, or in the same apply`,
      });
    }
  }
  if (problems.length > 0) throw refusal(problems);
  return implicit === null ? set : { ...set, networks: [...set.networks, implicit] };
}

/**
 * Warnings for ingress ports no node opens: the set's services that publish one, when every node
 * record says it does not run the mesh (records that say nothing, of an older release, count as
 * maybe: no warning). Empty when the set publishes none or a node runs the mesh.
 */
export function ingressWarnings(state: ControlState, set: Pick<SpecSet, 'services'>): string[] {
  const publishing = set.services.filter((s) => s.ports.some(isIngressPort));
  if (publishing.length === 0) return [];
  const nodes = [...state.nodes.values()].map((n) => n.value);
  if (nodes.some((n) => n.ingress !== false)) return [];
  const where = nodes.length === 0 ? 'the cluster has no node yet' : `no node runs the routing mesh (${nodes.map((n) => n.name).sort().join(', ')}: ingress disabled in their config, or a runtime other than docker)`;
  return publishing.map((s) => {
    const ports = s.ports.filter(isIngressPort).map(portKey);
    const [them, ss] = ports.length === 1 ? ['it', ''] : ['them', 's'];
    return `service ${s.name}: ingress port${ss} ${ports.join(', ')} open on no node: ${where}; publish with mode: host to open ${them} on the node that runs each task, or run a node with the mesh`;
  });
}

/**
 * What a rollback to `spec` (the service's previous spec) must hold for the routing mesh: its
 * ports checked against the other stored services as an apply's are (refused with both named,
 * bad_request), and the records of the ports it gains back claimed in the same transaction.
 */
export function rollbackIngressPlan(state: ControlState, spec: ServiceSpec, read: PortRecordReader, now: number): Plan {
  const set: SpecSet = { services: [spec], networks: [], firewallPolicies: [], jobs: [] };
  const problems = ingressPortProblems(state, set).map((p) => ({ ...p, path: p.path.replace(/^services\[0\]/, 'previousSpec') }));
  if (problems.length > 0) throw refusal(problems);
  return portClaims(state, set, read, now);
}

/**
 * Why the orchestrator's automatic rollback (an update's failureAction: rollback) may not bring
 * back `spec`'s ports: another service publishes one of them now (null: it may). Such a rollback
 * pauses instead, saying so, as a rollback by hand is refused (rollbackIngressPlan).
 */
export function rollbackPortClash(state: ControlState, spec: ServiceSpec): string | null {
  const problems = ingressPortProblems(state, { services: [spec], networks: [], firewallPolicies: [], jobs: [] });
  return problems.length === 0 ? null : problems.map((p) => p.message).join('; ');
}

/** The port records an automatic rollback to `spec` claims (portClaims), in the same transaction as the service's record. */
export function rollbackPortClaims(state: ControlState, spec: ServiceSpec, read: PortRecordReader, now: number): Plan {
  return portClaims(state, { services: [spec], networks: [], firewallPolicies: [], jobs: [] }, read, now);
}

/** A port record's revision as stored now (undefined: none). */
export type PortRecordReader = (id: string) => { rev: number } | undefined;

/**
 * The port records an apply writes with its services: one per (protocol, port) that a service of
 * the set publishes and did not publish in the same mode in its stored spec, each a put that
 * expects the revision read now. The check above read `state`; a record changed after that read
 * (rev above state.revision) would be expected as it is now while the check saw an older store,
 * so each record is also compared to be no newer than `state`: a write raced in between fails the
 * transaction, and the write path reads again and decides again.
 */
export function portClaims(state: ControlState, set: SpecSet, read: PortRecordReader, now: number): Plan {
  const plan: Plan = { changes: [], compares: [] };
  const seen = new Set<string>();
  for (const s of set.services) {
    const stored = state.services.get(s.name)?.value.spec.ports ?? [];
    for (const p of s.ports) {
      const mode = isIngressPort(p) ? 'ingress' : 'host';
      if (stored.some((o) => o.published === p.published && o.protocol === p.protocol && isIngressPort(o) === isIngressPort(p))) continue;
      const id = ingressPortId(p.protocol, p.published);
      if (seen.has(id)) continue;
      seen.add(id);
      const record: IngressPortRecord = { protocol: p.protocol, port: p.published, service: s.name, mode, at: now };
      const cur = read(id);
      plan.changes.push(putChange(ingressPortsCollection, id, record, cur?.rev ?? null));
      if (cur !== undefined) plan.compares.push({ collection: ingressPortsCollection, id, target: 'rev', cmp: '<=', value: state.revision });
    }
  }
  return plan;
}
