// The per-node routing mesh loop (docs/network.md, "Ingress"): whenever the committed state it
// depends on changes (services, tasks and their reports, networks, policies, nodes), render the
// node's `ip shoal-ingress` table from its applied store (ingress-render.ts) and apply it
// (ingress.ts). Every node runs it, leader or not, as the firewall loop.
//
// Fenced as the firewall loop is: the store holds only committed entries, the table records the
// term and revision it was rendered from, and the loop never replaces a table with one rendered
// from an older revision (a restarted node still catching up waits). With no quorum nothing new
// commits, so the table in force keeps forwarding as last configured. And by the node epoch: a
// task counts as a backend only when its node's agent reported it running (and healthy, when its
// service has a health check) under the node's current epoch and it is on a node not declared
// down, so the tasks of a node declared down leave every node's table once that commits. The
// tasks of a node held suspect take no new connections while their service has others (their
// open ones are kept until the node is down: a machine that dies loses only what was on it and
// what was sent to it before the leader noticed).
// Closing the loop leaves the table in place: a restart of shoal never drops a connection.
//
// What is owed (applied-table.ts): an apply whose new table went in but which failed after it
// (iptables, a conntrack delete) leaves the flows of the backends it removed; the loop keeps those
// backends and the next pass deletes their flows, unless its table has that backend again.

import type { DocumentStore } from '../fsm/index.ts';
import { gatewayOf } from '../src/resources/address-allocator.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../src/resources/collections.ts';
import { firewallPoliciesCollection, networksCollection, readNetworkState, type NetworkState } from '../src/resources/network-resources.ts';
import { matchesConstraint } from '../src/resources/spec/constraint.ts';
import { ingressNetworkName } from '../src/resources/spec/ingress.ts';
import { isIngressPort } from '../src/resources/spec/service-spec.ts';
import { ControlStateReader, type ControlState } from '../src/resources/state.ts';
import { IngressApplyUnfinishedError, type Ingress } from './ingress.ts';
import { ingressAppliedComment, renderIngress, type IngressBackend, type IngressRenderInput, type IngressServiceInput } from './ingress-render.ts';
import { AppliedTable, setsKey, withoutStamp } from './applied-table.ts';
import { PassLoop } from './pass-loop.ts';

export interface IngressLoopPorts {
  store: DocumentStore;
  nodeId: string;
  /** The newest term this node has seen (recorded in the table). */
  term(): number;
  /** Whether the node's firewall is on (config firewall.enabled): publish rules then choose which ingress ports this node opens. */
  firewallEnabled: boolean;
  /** Config ingress.preferLocal: a port with a task on this node goes to this node's tasks only, the source kept. */
  preferLocal?: boolean;
  ingress: Pick<Ingress, 'apply' | 'inForce' | 'ensureDockerRule'>;
  /** Monotonic ms (tests); default performance.now. */
  now?: () => number;
  log: { info(msg: string): void; warn(msg: string): void };
}

export const coalesceMs = 50;
export const retryMsMin = 500;
export const retryMsMax = 30_000;

const watched: ReadonlySet<string> = new Set([servicesCollection, tasksCollection, taskStatusCollection, nodesCollection, networksCollection, firewallPoliciesCollection]);

/** The ingress-network addresses of a service's tasks that may take connections, with their nodes and whether those are suspect. */
function backendsOf(state: ControlState, service: string, healthChecked: boolean, addresses: Readonly<Record<string, string>>): { address: string; nodeId: string; suspect: boolean }[] {
  const out: { address: string; nodeId: string; suspect: boolean }[] = [];
  for (const { value: t } of state.tasks.values()) {
    if (t.service !== service || t.desired !== 'running' || t.nodeId === null) continue;
    const address = addresses[t.id];
    const status = state.statuses.get(t.id)?.value;
    const node = state.nodes.get(t.nodeId)?.value;
    if (address === undefined || status === undefined || node === undefined || node.state === 'down') continue;
    if (status.nodeId !== t.nodeId || status.nodeEpoch !== node.epoch || status.state !== 'running') continue;
    if (healthChecked && status.health !== 'healthy') continue;
    out.push({ address, nodeId: t.nodeId, suspect: node.state === 'suspect' });
  }
  return out;
}

/** The ingress ports a publish rule opens on this node (the firewall's publish rules, by published port). */
function publishedHere(state: ControlState, nets: NetworkState, nodeId: string): { protocol: 'tcp' | 'udp'; port: number }[] {
  const self = state.nodes.get(nodeId)?.value;
  const subject = { id: nodeId, name: self?.name ?? nodeId, labels: self?.labels ?? {}, ...(self?.platform !== undefined ? { platform: self.platform } : {}) };
  const out = new Map<string, { protocol: 'tcp' | 'udp'; port: number }>();
  for (const { value: policy } of nets.policies.values()) {
    for (const rule of policy.spec.publish) {
      if (!rule.nodes.every((c) => matchesConstraint(c, subject))) continue;
      const svc = state.services.get(rule.service)?.value;
      if (svc === undefined) continue;
      for (const p of svc.spec.ports.filter(isIngressPort)) {
        if (rule.ports.length > 0 && !rule.ports.some((r) => r.port === p.published && r.protocol === p.protocol)) continue;
        out.set(`${p.protocol}/${p.published}`, { protocol: p.protocol, port: p.published });
      }
    }
  }
  return [...out.values()];
}

/** What this node's mesh table is rendered from: the applied store, read now. */
export function ingressRenderInput(store: DocumentStore, nodeId: string, term: number, firewallEnabled: boolean, preferLocal = false, reader = new ControlStateReader(store)): IngressRenderInput {
  const state = reader.read();
  const nets = readNetworkState(store);
  const network = nets.networks.get(ingressNetworkName)?.value;
  const slice = network?.slices[nodeId];
  const services: IngressServiceInput[] = [];
  for (const { value: s } of state.services.values()) {
    const ports = s.spec.ports.filter(isIngressPort).map((p) => ({ published: p.published, target: p.target, protocol: p.protocol }));
    if (ports.length === 0) continue;
    const backends = backendsOf(state, s.name, s.spec.healthCheck !== null, network?.addresses ?? {});
    services.push({ name: s.name, createdAt: s.createdAt, ports, backends: backends.map((b) => b.address), local: backends.filter((b) => b.nodeId === nodeId).map((b) => b.address), suspect: backends.filter((b) => b.suspect).map((b) => b.address) });
  }
  return {
    nodeId, term, revision: store.revision,
    address: network === undefined || slice === undefined ? null : gatewayOf(network.spec, slice),
    services,
    published: firewallEnabled ? publishedHere(state, nets, nodeId) : null,
    subnets: [...nets.networks.values()].map((n) => n.value.spec.subnet).sort(),
    preferLocal,
  };
}

/** `unchanged`: the table this loop applied last is in force and the new rendering differs only in its stamp. */
export type IngressOutcome = 'applied' | 'behind' | 'idle' | 'unchanged';

const backendsKey = (bs: readonly IngressBackend[]): string => setsKey(bs.map((b) => `${b.address}/${b.protocol}/${b.port}`));

/** What a failed pass says when its new table went in: what is still to end, and when. */
function unfinished(owed: readonly IngressBackend[] | null): string {
  return owed === null ? 'the new table is in force' : `the new table is in force; the flows of ${owed.length} removed backends are ended on the next pass`;
}

export class IngressLoop {
  private unsubscribe: (() => void) | null = null;
  private readonly loop: PassLoop;
  private told = new Set<string>();
  /** What this loop applied last, and the removed backends an unfinished apply left; a pass whose rendering matches it, with it still in force and nothing owed, applies nothing (applied-table.ts). */
  private readonly applied: AppliedTable<IngressBackend[]>;
  /** Reads only what changed since the previous pass (state.ts). */
  private readonly reader: ControlStateReader;

  constructor(private readonly ports: IngressLoopPorts) {
    this.reader = new ControlStateReader(ports.store);
    this.applied = new AppliedTable(ports.now);
    this.loop = new PassLoop({ name: 'ingress', pass: () => this.pass(), retryMs: retryMsMin, retryMsMax, coalesceMs, log: ports.log });
  }

  start(): void {
    this.unsubscribe = this.ports.store.subscribe((ev) => {
      if (watched.has(ev.collection)) this.loop.mark();
    });
    this.loop.mark(true);
  }

  /** Stops the loop and waits for an apply under way; the table stays in force. Idempotent. */
  async close(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    await this.loop.close();
  }

  /** The revision of the table this loop last applied (null: none yet in this process). */
  get appliedRevision(): number | null {
    return this.applied.revision;
  }

  /** Waits until no pass runs (tests). */
  async idle(): Promise<void> {
    await this.loop.idle();
  }

  /** Renders and applies once, now. */
  async converge(): Promise<IngressOutcome> {
    const input = ingressRenderInput(this.ports.store, this.ports.nodeId, this.ports.term(), this.ports.firewallEnabled, this.ports.preferLocal === true, this.reader);
    const inForce = await this.ports.ingress.inForce();
    // Nothing published through the mesh, no table and no flows owed: nothing to change on this host.
    if (inForce === null && input.services.length === 0 && this.applied.owed === null) return 'idle';
    if (inForce !== null && inForce.revision > input.revision) return 'behind';
    const rendered = renderIngress(input);
    for (const c of rendered.conflicts) this.tellOnce(`ingress: ${c.protocol}/${c.port} is published by services ${c.kept} and ${c.dropped} (two applies raced); ${c.kept}, the older, keeps it: change or remove ${c.dropped}'s port`);
    for (const name of rendered.truncated) this.tellOnce(`ingress: service ${name} has more running tasks than one port spreads over; the mesh uses the first ${rendered.backends.length}`);
    const body = withoutStamp(rendered.text, ingressAppliedComment(input.nodeId, input.term, input.revision));
    // The body holds the backends set, so an equal body is equal backends; the kernel's set is compared too (someone may have flushed it).
    const kernel = inForce === null ? null : { term: inForce.term, revision: inForce.revision, sets: backendsKey(inForce.backends) };
    if (this.applied.decide(body, kernel) === 'unchanged') {
      // Most store changes (a report's heartbeat, a node's address) change nothing here: no nft -f, iptables or conntrack to spawn.
      if (rendered.backends.length > 0) await this.applied.maybeCheckDockerRule(() => this.ports.ingress.ensureDockerRule());
      return 'unchanged';
    }
    const report = await this.applied.applyOwing((owed) => this.ports.ingress.apply(rendered, inForce, owed), IngressApplyUnfinishedError);
    // The applier checks the DOCKER-USER rule only when the table has backends.
    this.applied.recordApplied({ body, term: input.term, revision: input.revision, sets: backendsKey(rendered.backends) }, rendered.backends.length > 0);
    const ended = report.removed.length > 0 ? `; ${report.removed.length} backends removed, ${report.flowsEnded} of their connections ended` : '';
    this.ports.log.info(`ingress: applied term ${input.term} revision ${input.revision}, ${rendered.backends.length} backends${ended}`);
    return 'applied';
  }

  private tellOnce(line: string): void {
    if (this.told.has(line)) return;
    this.told.add(line);
    this.ports.log.warn(line);
  }

  private async pass(): Promise<void> {
    let outcome: IngressOutcome;
    try {
      outcome = await this.converge();
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${err instanceof IngressApplyUnfinishedError ? unfinished(err.owed) : 'the table in force is kept'}`);
    }
    if (outcome === 'behind') this.ports.log.info('ingress: the table in force is newer than this node\'s store; waiting to catch up');
  }
}
