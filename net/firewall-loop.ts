// The per-node firewall loop: whenever the committed state it depends on changes (networks,
// policies, services, tasks, nodes), render this node's table from the node's applied store and
// apply it (firewall.ts). Every node runs it, leader or not.
//
// Fenced: the store a node applies holds only committed entries, and the table records the term
// and revision it was rendered from. The loop never replaces a table with one rendered from an
// older revision (a node restarted with a store still catching up waits until it has applied at
// least what the table in force came from). With no quorum nothing new commits, so the table in
// force stays, and the data plane keeps working as last configured. Closing the loop (shoal
// stopping or restarting) leaves the table in place: a restart never opens a gap.
//
// Quiet passes (applied-table.ts): tasks and nodes change often, and most of their changes leave
// this table as it is but for its stamp; with the table this loop applied last still in force,
// such a pass reads the table once (`nft -j list`) and applies nothing.
//
// What is owed (applied-table.ts): an apply whose new table went in but which failed after it
// (iptables, conntrack) leaves the connections of the permissions it revoked open; the loop keeps
// those permissions and the next pass ends them, unless its table permits them again.

import type { DocumentStore } from '../fsm/index.ts';
import { readNetworkState } from '../src/resources/network-resources.ts';
import { firewallPoliciesCollection, networksCollection } from '../src/resources/network-resources.ts';
import { nodesCollection, servicesCollection, tasksCollection } from '../src/resources/collections.ts';
import { ControlStateReader } from '../src/resources/state.ts';
import { AppliedTable, setsKey, withoutStamp } from './applied-table.ts';
import { FirewallApplyUnfinishedError, type Firewall, type Revoked } from './firewall.ts';
import { PassLoop } from './pass-loop.ts';
import type { FirewallTask, Permit, Published } from './firewall-permits.ts';
import { appliedComment, renderFirewall, type FirewallRenderInput } from './firewall-render.ts';

export interface FirewallLoopPorts {
  store: DocumentStore;
  nodeId: string;
  /** The newest term this node has seen (recorded in the table). */
  term(): number;
  /** The host's TCP ports never filtered besides SSH: the client API and the peer transport. */
  managementPorts: readonly number[];
  firewall: Pick<Firewall, 'apply' | 'inForce' | 'ensureDockerRule'>;
  /** Monotonic ms (tests); default performance.now. */
  now?: () => number;
  log: { info(msg: string): void; warn(msg: string): void };
}

/** Changes arriving within this window are rendered once. */
export const coalesceMs = 50;
/** Retry after a failed apply, doubling up to the cap. */
export const retryMsMin = 500;
export const retryMsMax = 30_000;

const watched: ReadonlySet<string> = new Set([networksCollection, firewallPoliciesCollection, servicesCollection, tasksCollection, nodesCollection]);

/** `unchanged`: the table this loop applied last is in force and the new rendering differs only in its stamp. */
export type Outcome = 'applied' | 'behind' | 'unchanged';

/** The `permits` and `published` sets as one key, for the rendering and for the kernel's reading alike. */
function firewallSetsKey(permits: readonly Permit[], published: readonly Published[]): string {
  return setsKey(permits.map((p) => `${p.from}/${p.to}/${p.protocol}/${p.port}`), published.map((p) => `${p.address}/${p.protocol}/${p.port}`));
}

/** What this node's table is rendered from: the applied store, read now (`reader`: the loop's, which reads only what changed). */
export function renderInput(store: DocumentStore, nodeId: string, term: number, managementPorts: readonly number[], reader = new ControlStateReader(store)): FirewallRenderInput {
  const state = reader.read();
  const nets = readNetworkState(store);
  const tasks = new Map<string, FirewallTask>();
  for (const n of nets.networks.values()) {
    for (const [taskId, address] of Object.entries(n.value.addresses)) {
      const t = state.tasks.get(taskId)?.value;
      if (t === undefined || t.nodeId === null) continue;
      const cur = tasks.get(taskId) ?? { id: taskId, service: t.service, nodeId: t.nodeId, addresses: {} };
      tasks.set(taskId, { ...cur, addresses: { ...cur.addresses, [n.value.name]: address } });
    }
  }
  const self = state.nodes.get(nodeId)?.value;
  return {
    node: { id: nodeId, name: self?.name ?? nodeId, labels: self?.labels ?? {}, ...(self?.platform !== undefined ? { platform: self.platform } : {}) },
    term, revision: store.revision, managementPorts,
    networks: [...nets.networks.values()].map((n) => ({ name: n.value.name, subnet: n.value.spec.subnet, internal: n.value.spec.internal })),
    policies: [...nets.policies.values()].map((p) => p.value.spec),
    services: [...state.services.values()].map((s) => ({ name: s.value.name, ports: s.value.spec.ports })),
    tasks: [...tasks.values()],
  };
}

/** What a failed pass says when its new table went in: what is still to revoke, and when. */
function unfinished(owed: Revoked | null): string {
  const n = owed === null ? 0 : owed.permits.length + owed.published.length;
  return n === 0 ? 'the new table is in force' : `the new table is in force; the connections of ${n} removed permissions are ended on the next pass`;
}

export class FirewallLoop {
  private unsubscribe: (() => void) | null = null;
  private readonly loop: PassLoop;
  /** What this loop applied last, and what an unfinished apply left to revoke; a pass whose rendering matches it, with it still in force and nothing owed, applies nothing. */
  private readonly applied: AppliedTable<Revoked>;
  /** Reads only what changed since the previous pass (state.ts). */
  private readonly reader: ControlStateReader;

  constructor(private readonly ports: FirewallLoopPorts) {
    this.reader = new ControlStateReader(ports.store);
    this.applied = new AppliedTable(ports.now);
    this.loop = new PassLoop({ name: 'firewall', pass: () => this.pass(), retryMs: retryMsMin, retryMsMax, coalesceMs, log: ports.log });
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

  /** Renders and applies once, now. */
  async converge(): Promise<Outcome> {
    const input = renderInput(this.ports.store, this.ports.nodeId, this.ports.term(), this.ports.managementPorts, this.reader);
    const inForce = await this.ports.firewall.inForce();
    if (inForce !== null && inForce.revision > input.revision) return 'behind';
    const rendered = renderFirewall(input);
    const body = withoutStamp(rendered.text, appliedComment(input.node.id, input.term, input.revision));
    // The body holds both sets, so an equal body is equal sets; the kernel's are compared too (someone may have flushed one).
    const kernel = inForce === null ? null : { term: inForce.term, revision: inForce.revision, sets: firewallSetsKey(inForce.permits, inForce.published) };
    if (this.applied.decide(body, kernel) === 'unchanged') {
      await this.applied.maybeCheckDockerRule(() => this.ports.firewall.ensureDockerRule());
      return 'unchanged';
    }
    const report = await this.applied.applyOwing((owed) => this.ports.firewall.apply(rendered, inForce, owed), FirewallApplyUnfinishedError);
    this.applied.recordApplied({ body, term: input.term, revision: input.revision, sets: firewallSetsKey(rendered.permits, rendered.published) }, true);
    const revoked = report.revoked > 0 ? `; ended the connections of ${report.revoked} removed permissions` : '';
    this.ports.log.info(`firewall: applied term ${input.term} revision ${input.revision}${revoked}`);
    return 'applied';
  }

  private async pass(): Promise<void> {
    let outcome: Outcome;
    try {
      outcome = await this.converge();
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${err instanceof FirewallApplyUnfinishedError ? unfinished(err.owed) : 'the table in force is kept'}`);
    }
    // Behind the table in force: look again once more has applied (an event will come).
    if (outcome === 'behind') this.ports.log.info('firewall: the table in force is newer than this node\'s store; waiting to catch up');
  }
}
