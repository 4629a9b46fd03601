// The routing mesh on one node, as the text `nft -f` takes: one table, `ip shoal-ingress`,
// replaced in one transaction as the firewall's is (its first lines create the table if missing
// and delete it, then define it whole), so a change of backends is atomic (docs/network.md,
// "Ingress").
//
// A pure function of what the node's applied store says: the services with ingress ports and
// the ingress-network addresses of their tasks that run and pass their health check, this
// node's own address on the ingress network (its slice's gateway), and the publish rules.
//
// For each ingress port (protocol, published port) that has backends:
// - nat prerouting (connections arriving at any local address of the node, from the LAN or from
//   its own containers: hairpin) and nat output (the node's host itself): mark the connection
//   (ingressCtMark) and DNAT it to one of the backends, chosen by `numgen random mod N`, at the
//   service's target port. 127.0.0.0/8 is left alone (DNAT from loopback would need
//   route_localnet).
// - nat postrouting: SNAT every marked connection to this node's ingress address, so the task's
//   replies come back over the overlay to the node that translated them (the task's own default
//   route leads to its own node). The client's address is hidden from the task (documented).
// - filter forward: clamp the MSS of marked TCP SYNs to the route's MTU (the overlay's, below
//   the LAN's), and set the firewall's packet mark so Docker's DOCKER-USER rule lets them
//   through Docker's FORWARD policy DROP.
// - publish rules (when the firewall is on): a port no rule opens on this node is dropped before
//   the DNAT (so before the SNAT) for sources outside the cluster's networks.
// - preferLocal (config ingress.preferLocal): a port whose service has a running, healthy task on
//   this node is DNATed to this node's tasks only, and those connections are not SNATed (the
//   task's default route leads to this node, so its replies come back through the DNAT without
//   it): the task sees the client's address. Connections from the cluster's networks are still
//   SNATed (a container on the ingress network would get the task's reply straight over the L2
//   segment, past the DNAT). Nodes without a task of the service spread as before.
// A port with no running, healthy backend is refused (TCP reset, ICMP port unreachable) rather
// than left to whatever listens on the host. A backend on a node the leader holds suspect takes no
// new connection while the port has another, but stays in the `backends` set (below), so its open
// connections are ended only once it leaves for good (its node declared down, its task gone): a
// node that was only slow keeps them.
//
// What the table holds is also read back: the `applied` chain's comment (term and revision) and
// the `backends` set (address, protocol, target port), from which the applier learns which
// backends a new table removes, to delete their conntrack entries (net/ingress.ts).

import { acceptMark } from './firewall-render.ts';
import { ingressCtMark } from './ingress-marks.ts';
import { compareText } from '../src/base/order.ts';

export const ingressTableFamily = 'ip';
export const ingressTableName = 'shoal-ingress';

/** Backends of one port at most (the numgen map's size); more are left out, lowest addresses kept, and said. */
export const ingressBackendsMax = 1024;

export interface IngressPortInput {
  published: number;
  target: number;
  protocol: 'tcp' | 'udp';
}

export interface IngressServiceInput {
  name: string;
  /** Log time of the record's creation: of two services claiming one port (a race of applies), the older keeps it. */
  createdAt: number;
  ports: readonly IngressPortInput[];
  /** Ingress-network addresses of its tasks that run and pass their health check (any node). */
  backends: readonly string[];
  /** Those of them on this node (a subset of backends): with preferLocal, the only ones used when there are any. */
  local?: readonly string[];
  /**
   * Those of them on a node the leader holds suspect (a subset of backends): no new connection
   * is sent to them while the port has another backend, but they stay in the `backends` set, so
   * their open connections are not ended until they leave it (their node down, their task gone).
   */
  suspect?: readonly string[];
}

export interface IngressRenderInput {
  nodeId: string;
  term: number;
  revision: number;
  /** This node's address on the ingress network (its slice's gateway); null: the network has no slice here yet. */
  address: string | null;
  services: readonly IngressServiceInput[];
  /**
   * The ingress ports a publish rule opens on this node (`FirewallPolicy.publish`); null when the
   * firewall is off (every ingress port open, as host ports are without it).
   */
  published: readonly { protocol: 'tcp' | 'udp'; port: number }[] | null;
  /** The subnets of the cluster's networks: sources inside them are not filtered by publish rules. */
  subnets: readonly string[];
  /** Config ingress.preferLocal: a port with tasks on this node goes to them only, without SNAT (the source is kept). */
  preferLocal?: boolean;
}

/** One backend of one port: what the `backends` set holds and what conntrack entries are ended by. */
export interface IngressBackend {
  address: string;
  protocol: 'tcp' | 'udp';
  port: number;
}

export interface RenderedIngress {
  text: string;
  backends: IngressBackend[];
  /** Ports claimed by more than one service (refused at apply; a race can still write it), and who keeps each. */
  conflicts: { protocol: string; port: number; kept: string; dropped: string }[];
  /** Services whose port had more backends than ingressBackendsMax. */
  truncated: string[];
}

interface Route {
  service: string;
  protocol: 'tcp' | 'udp';
  published: number;
  target: number;
  /** Where new connections go. */
  backends: string[];
  /** What the `backends` set holds for it: those, and the ones on suspect nodes left out of them. */
  held: string[];
  /** The backends are this node's own tasks (preferLocal): not SNATed. */
  local: boolean;
}

export function ingressAppliedComment(nodeId: string, term: number, revision: number): string {
  return `shoal-ingress node=${nodeId.replace(/[^A-Za-z0-9._:-]/g, '_')} term=${term} revision=${revision}`;
}

export function parseIngressAppliedComment(comment: string): { nodeId: string; term: number; revision: number } | null {
  const m = /^shoal-ingress node=(\S+) term=(\d+) revision=(\d+)$/.exec(comment);
  return m === null ? null : { nodeId: m[1] ?? '', term: Number(m[2]), revision: Number(m[3]) };
}

function addressValue(a: string): number {
  return a.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
}

const byAddress = (a: string, b: string): number => addressValue(a) - addressValue(b);

/** One route per (protocol, published port): the older service keeps a port claimed twice. */
function routesOf(input: IngressRenderInput): { routes: Route[]; conflicts: RenderedIngress['conflicts']; truncated: string[] } {
  const services = [...input.services].sort((a, b) => a.createdAt - b.createdAt || compareText(a.name, b.name));
  const routes = new Map<string, Route>();
  const conflicts: RenderedIngress['conflicts'] = [];
  const truncated = new Set<string>();
  for (const s of services) {
    const all = [...new Set(s.backends)].sort(byAddress);
    const suspect = new Set(s.suspect ?? []);
    const usable = all.filter((a) => !suspect.has(a));
    // When every backend's node is suspect they may all still be alive: better than a refusal.
    const pool = usable.length > 0 ? usable : all;
    const mine = input.preferLocal === true ? [...new Set(s.local ?? [])].filter((a) => pool.includes(a)).sort(byAddress) : [];
    const local = mine.length > 0;
    const backends = local ? mine : pool;
    const held = local ? mine : all;
    if (backends.length > ingressBackendsMax) truncated.add(s.name);
    for (const p of s.ports) {
      const key = `${p.protocol}/${p.published}`;
      const kept = routes.get(key);
      if (kept !== undefined) {
        if (kept.service !== s.name) conflicts.push({ protocol: p.protocol, port: p.published, kept: kept.service, dropped: s.name });
        continue;
      }
      routes.set(key, { service: s.name, protocol: p.protocol, published: p.published, target: p.target, backends: backends.slice(0, ingressBackendsMax), held: held.slice(0, ingressBackendsMax), local });
    }
  }
  const sorted = [...routes.values()].sort((a, b) => compareText(a.protocol, b.protocol) || a.published - b.published);
  return { routes: sorted, conflicts, truncated: [...truncated] };
}

function dnatRule(r: Route): string {
  const map = r.backends.map((a, i) => `${i} : ${a}`).join(', ');
  const to = r.backends.length === 1 ? `${r.backends[0] ?? ''}` : `numgen random mod ${r.backends.length} map { ${map} }`;
  return `    ${r.protocol} dport ${r.published} ct mark set ct mark | ${hex(ingressCtMark)} dnat to ${to} : ${r.target} comment "service ${r.service}${r.local ? ', its tasks on this node (preferLocal)' : ''}"`;
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}

function portList(ports: readonly number[]): string {
  return ports.length === 1 ? String(ports[0]) : `{ ${ports.join(', ')} }`;
}

/** Filtering by publish rules and refusing ports without backends: the `filter` chains' rules. */
function filterRules(input: IngressRenderInput, routes: readonly Route[]): { prerouting: string[]; input: string[] } {
  const prerouting: string[] = [];
  const refused: string[] = [];
  for (const protocol of ['tcp', 'udp'] as const) {
    const mine = routes.filter((r) => r.protocol === protocol);
    if (input.published !== null) {
      const open = new Set(input.published.filter((p) => p.protocol === protocol).map((p) => p.port));
      const closed = mine.filter((r) => !open.has(r.published)).map((r) => r.published);
      const from = input.subnets.length === 0 ? '' : `ip saddr != { ${input.subnets.join(', ')} } `;
      if (closed.length > 0) prerouting.push(`    ${from}fib daddr type local ${protocol} dport ${portList(closed)} drop comment "no publish rule opens it on this node"`);
    }
    const empty = mine.filter((r) => r.backends.length === 0).map((r) => r.published);
    if (empty.length > 0) refused.push(`    ${protocol} dport ${portList(empty)} ct mark & ${hex(ingressCtMark)} == 0 ${protocol === 'tcp' ? 'reject with tcp reset' : 'reject'} comment "no running, healthy task"`);
  }
  return { prerouting, input: refused };
}

export function renderIngress(input: IngressRenderInput): RenderedIngress {
  const { routes, conflicts, truncated } = routesOf(input);
  // Without an address on the ingress network there is nowhere to SNAT from: no DNAT either.
  const live = input.address === null ? [] : routes.filter((r) => r.backends.length > 0);
  const local = 'ip daddr != 127.0.0.0/8 fib daddr type local';
  const filters = filterRules(input, input.address === null ? routes.map((r) => ({ ...r, backends: [] })) : routes);
  const comment = ingressAppliedComment(input.nodeId, input.term, input.revision);
  const backends = live.flatMap((r) => r.held.map((address) => ({ address, protocol: r.protocol, port: r.target })));
  const uniq = [...new Map(backends.map((b) => [`${b.address} ${b.protocol} ${b.port}`, b])).values()]
    .sort((a, b) => byAddress(a.address, b.address) || compareText(a.protocol, b.protocol) || a.port - b.port);
  const localBackends = [...new Map(live.filter((r) => r.local).flatMap((r) => r.backends.map((address) => ({ address, protocol: r.protocol, port: r.target })))
    .map((b) => [`${b.address} ${b.protocol} ${b.port}`, b])).values()]
    .sort((a, b) => byAddress(a.address, b.address) || compareText(a.protocol, b.protocol) || a.port - b.port);
  const fromOutside = input.subnets.length === 0 ? '' : `ip saddr != { ${input.subnets.join(', ')} } `;
  const lines = [
    `table ${ingressTableFamily} ${ingressTableName}`,
    `delete table ${ingressTableFamily} ${ingressTableName}`,
    `table ${ingressTableFamily} ${ingressTableName} {`,
    `  comment "${comment}"`,
    '  set backends {',
    '    type ipv4_addr . inet_proto . inet_service',
    ...(uniq.length > 0 ? [`    elements = {\n${uniq.map((b) => `      ${b.address} . ${b.protocol} . ${b.port}`).join(',\n')}\n    }`] : []),
    '  }',
    '  set local_backends {',
    '    type ipv4_addr . inet_proto . inet_service',
    ...(localBackends.length > 0 ? [`    elements = {\n${localBackends.map((b) => `      ${b.address} . ${b.protocol} . ${b.port}`).join(',\n')}\n    }`] : []),
    '  }',
    '  chain applied {',
    `    counter comment "${comment}"`,
    '  }',
    '  chain publish_filter {',
    '    type filter hook prerouting priority -110; policy accept; comment "before the DNAT (dstnat is -100)"',
    ...filters.prerouting,
    '  }',
    '  chain no_backend {',
    '    type filter hook input priority filter - 10; policy accept;',
    ...filters.input,
    '  }',
    '  chain prerouting {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    ...(live.length > 0 ? [`    ${local} jump mesh`] : []),
    '  }',
    '  chain output {',
    '    type nat hook output priority -100; policy accept;',
    ...(live.length > 0 ? [`    ${local} jump mesh`] : []),
    '  }',
    '  chain mesh {',
    ...live.map(dnatRule),
    '  }',
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    ...(localBackends.length > 0 ? [`    ct mark & ${hex(ingressCtMark)} == ${hex(ingressCtMark)} ${fromOutside}ip daddr . meta l4proto . th dport @local_backends accept comment "preferLocal: a task of this node, the source kept"`] : []),
    ...(input.address !== null ? [`    ct mark & ${hex(ingressCtMark)} == ${hex(ingressCtMark)} snat to ${input.address} comment "replies come back through this node"`] : []),
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter - 20; policy accept;',
    `    ct mark & ${hex(ingressCtMark)} == ${hex(ingressCtMark)} tcp flags syn / syn,rst tcp option maxseg size set rt mtu comment "the overlay's MTU"`,
    `    ct mark & ${hex(ingressCtMark)} == ${hex(ingressCtMark)} meta mark set meta mark | ${hex(acceptMark)} comment "Docker's DOCKER-USER accepts it"`,
    '  }',
    '}',
  ];
  return { text: `${lines.join('\n')}\n`, backends: uniq, conflicts, truncated };
}
