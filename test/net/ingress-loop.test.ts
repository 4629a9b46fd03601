// The routing mesh's loop against a real document store (net/ingress-loop.ts): which tasks are
// backends (running, healthy when checked, reported under the node's current epoch, on a node
// not down; those on a suspect node said), this node's SNAT address (its gateway of the ingress network), the publish rules
// when the firewall is on; applies on start and on change, never replaces a newer table, keeps
// the table in force when an apply fails. And the applier's reading of `nft -j` and what a new
// table removes (net/ingress.ts). And, with the real applier over a fake host, what an apply that
// failed after `nft -f` owes: the flows of the backends it removed, deleted on the next pass
// unless the backend is back.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import { firewallPoliciesCollection, networksCollection } from '../../src/resources/network-resources.ts';
import { parseConstraint } from '../../src/resources/spec/constraint.ts';
import { dockerRuleCheckMs } from '../../net/applied-table.ts';
import { IngressLoop, ingressRenderInput } from '../../net/ingress-loop.ts';
import { Ingress, IngressApplyUnfinishedError, parseIngressListing, removedBackends, type IngressApplyReport, type IngressInForce } from '../../net/ingress.ts';
import { parseIngressAppliedComment, renderIngress } from '../../net/ingress-render.ts';
import type { RenderedIngress } from '../../net/ingress-render.ts';
import type { CommandOutput } from '../../net/firewall-command.ts';
import { StateBuilder, serviceYaml } from '../control/state-builder.ts';

let index = 0;
function put(store: DocumentStore, collection: string, id: string, doc: object): void {
  index += 1;
  store.apply({ index, term: 2, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: index }) });
}

class RecordingIngress {
  applied: RenderedIngress[] = [];
  /** What is in force: the last table applied (its stamp and backends), or what a test set. */
  current: IngressInForce | null = null;
  failNext = 0;
  dockerChecks = 0;

  set inForceRevision(revision: number) {
    this.current = { nodeId: 'n1', term: 2, revision, backends: [] };
  }

  async inForce(): Promise<IngressInForce | null> {
    return this.current;
  }

  async apply(r: RenderedIngress): Promise<IngressApplyReport> {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('nft -f - failed (exit 1): simulated');
    }
    this.applied.push(r);
    const stamp = parseIngressAppliedComment(/comment "(shoal-ingress node=[^"]+)"/.exec(r.text)?.[1] ?? '');
    if (stamp !== null) this.current = { ...stamp, backends: r.backends };
    return { before: null, removed: [], flowsEnded: 0, docker: false };
  }

  async ensureDockerRule(): Promise<boolean> {
    this.dockerChecks++;
    return true;
  }
}

const quietLog = { info: () => undefined, warn: () => undefined };

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}

/** Three nodes; web (ingress 8080 → 80) with tasks in every state that matters; api with a health check. */
function cluster(): DocumentStore {
  const b = new StateBuilder()
    .node('n1').node('n2', { epoch: 3 }).node('n3', { state: 'down' })
    .service(serviceYaml('web', 'ports: [{published: 8080, target: 80}, {published: 5353, target: 53, protocol: udp}]'))
    .service(serviceYaml('api', 'ports: [{published: 9000, target: 9000}]\nhealthCheck: {command: ["true"]}'))
    .service(serviceYaml('admin', 'ports: [{published: 9999, target: 80, mode: host}]'))
    .placed('w1', 'web', 1, 'n1', 'running')
    .placed('w2', 'web', 2, 'n2', 'running')
    .placed('w3', 'web', 3, 'n3', 'running')
    .placed('w4', 'web', 4, 'n1', 'starting')
    .placed('a1', 'api', 1, 'n1', 'running', {}, { health: 'healthy' })
    .placed('a2', 'api', 2, 'n2', 'running', {}, { health: 'unhealthy' });
  // w2's report is from an older epoch of n2 (the node was declared down and came back since).
  const s = b.build();
  const store = new DocumentStore();
  for (const [id, v] of s.nodes) put(store, nodesCollection, id, v.value);
  for (const [id, v] of s.services) put(store, servicesCollection, id, v.value);
  for (const [id, v] of s.tasks) put(store, tasksCollection, id, v.value);
  for (const [id, v] of s.statuses) put(store, taskStatusCollection, id, id === 'w2' ? { ...v.value, nodeEpoch: 2 } : v.value);
  const addresses = { w1: '10.255.0.2', w2: '10.255.1.2', w3: '10.255.2.2', w4: '10.255.0.3', a1: '10.255.0.4', a2: '10.255.1.3' };
  put(store, networksCollection, 'ingress', { name: 'ingress', spec: { name: 'ingress', subnet: '10.255.0.0/16', internal: false, slicePrefix: 24 }, slices: { n1: 0, n2: 1, n3: 2 }, addresses, createdAt: 0, updatedAt: 0 });
  return store;
}

describe('ingressRenderInput', () => {
  it('counts as backends only tasks running (healthy when checked) under their node\'s current epoch, on nodes not down', () => {
    const input = ingressRenderInput(cluster(), 'n1', 7, false);
    expect(input.address).toBe('10.255.0.1');
    expect(input.services.map((s) => [s.name, [...s.backends].sort()])).toEqual(expect.arrayContaining([['web', ['10.255.0.2']], ['api', ['10.255.0.4']]]));
    expect(input.services.map((s) => s.name).sort()).toEqual(['api', 'web']);
    expect(input.published).toBeNull();
    expect(input.subnets).toEqual(['10.255.0.0/16']);
    expect(ingressRenderInput(cluster(), 'n2', 7, false).address).toBe('10.255.1.1');
    expect(ingressRenderInput(cluster(), 'n9', 7, false).address).toBeNull();
  });

  it('says which backends are on a node the leader holds suspect', () => {
    const store = cluster();
    expect(ingressRenderInput(store, 'n1', 7, false).services.find((s) => s.name === 'web')?.suspect).toEqual([]);
    const n1 = store.get(nodesCollection, 'n1')?.doc as JsonObject;
    put(store, nodesCollection, 'n1', { ...n1, state: 'suspect' });
    const input = ingressRenderInput(store, 'n2', 7, false);
    expect(input.services.map((s) => [s.name, s.backends, s.suspect])).toEqual(expect.arrayContaining([['web', ['10.255.0.2'], ['10.255.0.2']], ['api', ['10.255.0.4'], ['10.255.0.4']]]));
  });

  it('with the firewall on, opens the ingress ports a publish rule opens on this node', () => {
    const store = cluster();
    const edge = parseConstraint('node.name == n1');
    if (!edge.ok) throw new Error(edge.message);
    put(store, firewallPoliciesCollection, 'p', { name: 'p', spec: { name: 'p', allow: [], publish: [{ service: 'web', ports: [{ port: 8080, protocol: 'tcp' }], nodes: [edge.constraint] }, { service: 'admin', ports: [], nodes: [] }] }, createdAt: 0, updatedAt: 0 });
    expect(ingressRenderInput(store, 'n1', 7, true).published).toEqual([{ protocol: 'tcp', port: 8080 }]);
    expect(ingressRenderInput(store, 'n2', 7, true).published).toEqual([]);
  });
});

describe('ingressRenderInput with preferLocal', () => {
  it('tells this node\'s own backends apart, and the loop renders them alone for its ports', async () => {
    const store = cluster();
    // w2's report under n2's current epoch: web has a backend on n1 and one on n2.
    const w2 = store.get(taskStatusCollection, 'w2')?.doc as JsonObject;
    put(store, taskStatusCollection, 'w2', { ...w2, nodeEpoch: 3 });
    const web = (node: string) => ingressRenderInput(store, node, 7, false, true).services.find((s) => s.name === 'web');
    expect([...(web('n1')?.backends ?? [])].sort()).toEqual(['10.255.0.2', '10.255.1.2']);
    expect([web('n1')?.local, web('n2')?.local, web('n9')?.local]).toEqual([['10.255.0.2'], ['10.255.1.2'], []]);
    expect(ingressRenderInput(store, 'n1', 7, false, true).preferLocal).toBe(true);
    expect(ingressRenderInput(store, 'n1', 7, false).preferLocal).toBe(false);
    const ingress = new RecordingIngress();
    const loop = new IngressLoop({ store, nodeId: 'n2', term: () => 5, firewallEnabled: false, preferLocal: true, ingress, log: quietLog });
    expect(await loop.converge()).toBe('applied');
    expect(ingress.applied[0]?.text).toContain('dnat to 10.255.1.2 : 80 comment "service web, its tasks on this node (preferLocal)"');
    expect(ingress.applied[0]?.backends.map((b) => b.address)).not.toContain('10.255.0.2');
  });
});

describe('IngressLoop', () => {
  it('applies on start and again when a task\'s report changes, with the term and revision', async () => {
    const store = cluster();
    const ingress = new RecordingIngress();
    const loop = new IngressLoop({ store, nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress, log: quietLog });
    loop.start();
    await until(() => ingress.applied.length === 1);
    expect(ingress.applied[0]?.text).toContain(`comment "shoal-ingress node=n1 term=5 revision=${store.revision}"`);
    expect(ingress.applied[0]?.backends.map((b) => b.address)).not.toContain('10.255.1.2');
    const w4 = store.get(taskStatusCollection, 'w4')?.doc as JsonObject;
    put(store, taskStatusCollection, 'w4', { ...w4, state: 'running' });
    await until(() => ingress.applied.length === 2);
    expect(ingress.applied[1]?.backends.map((b) => b.address)).toContain('10.255.0.3');
    expect(loop.appliedRevision).toBe(store.revision);
    await loop.close();
  });

  it('touches nothing on a host with no ingress port and no table; never replaces a newer table', async () => {
    const ingress = new RecordingIngress();
    const empty = new IngressLoop({ store: new DocumentStore(), nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress, log: quietLog });
    expect(await empty.converge()).toBe('idle');
    const store = cluster();
    ingress.inForceRevision = store.revision + 100;
    const loop = new IngressLoop({ store, nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress, log: quietLog });
    expect(await loop.converge()).toBe('behind');
    expect(ingress.applied).toHaveLength(0);
    ingress.inForceRevision = store.revision;
    expect(await loop.converge()).toBe('applied');
  });

  it('applies nothing when a change leaves the table as it is and the table it applied is in force; applies again when the table in force is not it', async () => {
    const store = cluster();
    const ingress = new RecordingIngress();
    let now = 0;
    const loop = new IngressLoop({ store, nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress, log: quietLog, now: () => now });
    expect(await loop.converge()).toBe('applied');
    // A task report written again as it was: the same backends, a new revision.
    const w1 = store.get(taskStatusCollection, 'w1')?.doc as JsonObject;
    put(store, taskStatusCollection, 'w1', w1);
    expect(await loop.converge()).toBe('unchanged');
    expect(ingress.applied).toHaveLength(1);
    expect(ingress.dockerChecks).toBe(0);
    now += dockerRuleCheckMs;
    expect(await loop.converge()).toBe('unchanged');
    expect(ingress.dockerChecks).toBe(1);
    // A backend goes: applied.
    const w4 = store.get(taskStatusCollection, 'w4')?.doc as JsonObject;
    put(store, taskStatusCollection, 'w4', { ...w4, state: 'running' });
    expect(await loop.converge()).toBe('applied');
    expect(ingress.applied).toHaveLength(2);
    // Someone replaced the table (another stamp, or its backends flushed): applied again.
    ingress.current = { ...(ingress.current ?? { nodeId: 'n1', term: 5, revision: 0 }), backends: [] };
    expect(await loop.converge()).toBe('applied');
    expect(ingress.applied).toHaveLength(3);
    expect(ingress.applied[2]?.text).toContain(`revision=${store.revision}`);
  });

  it('keeps the table in force when an apply fails, says so, and retries', async () => {
    const store = cluster();
    const ingress = new RecordingIngress();
    ingress.failNext = 1;
    const warnings: string[] = [];
    const loop = new IngressLoop({ store, nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress, log: { info: () => undefined, warn: (m) => warnings.push(m) } });
    loop.start();
    await until(() => ingress.applied.length === 1);
    expect(warnings[0]).toMatch(/^ingress: nft -f - failed \(exit 1\): simulated; the table in force is kept; retrying in \d+ ms$/);
    await loop.close();
  });
});

describe('Ingress (the applier)', () => {
  it('reads the table in force from `nft -j list table`, and says which backends a new table removes', () => {
    const json = JSON.stringify({ nftables: [
      { metainfo: { json_schema_version: 1 } },
      { table: { family: 'ip', name: 'shoal-ingress' } },
      { set: { family: 'ip', name: 'backends', table: 'shoal-ingress', type: ['ipv4_addr', 'inet_proto', 'inet_service'], elem: [{ concat: ['10.255.0.2', 'tcp', 80] }, { concat: ['10.255.1.2', 'udp', 53] }] } },
      { rule: { family: 'ip', table: 'shoal-ingress', chain: 'applied', comment: 'shoal-ingress node=n1 term=4 revision=99' } },
    ] });
    const inForce = parseIngressListing(json);
    expect(inForce).toEqual({ nodeId: 'n1', term: 4, revision: 99, backends: [{ address: '10.255.0.2', protocol: 'tcp', port: 80 }, { address: '10.255.1.2', protocol: 'udp', port: 53 }] });
    expect(removedBackends(inForce?.backends ?? [], [{ address: '10.255.0.2', protocol: 'tcp', port: 80 }])).toEqual([{ address: '10.255.1.2', protocol: 'udp', port: 53 }]);
    expect(parseIngressListing(JSON.stringify({ nftables: [{ table: { family: 'ip', name: 'shoal-ingress' } }] }))).toBeNull();
  });

  it('ends a removed backend\'s flows with one conntrack delete filtered on its reply side, however many flows it had', async () => {
    const listing = JSON.stringify({ nftables: [
      { set: { family: 'ip', name: 'backends', table: 'shoal-ingress', elem: [{ concat: ['10.255.1.2', 'tcp', 80] }, { concat: ['10.255.2.2', 'tcp', 80] }, { concat: ['10.255.2.2', 'udp', 53] }] } },
      { rule: { family: 'ip', table: 'shoal-ingress', chain: 'applied', comment: 'shoal-ingress node=n1 term=4 revision=99' } },
    ] });
    const calls: string[] = [];
    const ingress = new Ingress(async (cmd, args) => {
      calls.push(`${cmd} ${args.join(' ')}`);
      if (cmd === 'nft' && args[0] === '-j') return { code: 0, stdout: listing, stderr: '' };
      if (cmd === 'conntrack' && args.includes('tcp')) return { code: 0, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 312 flow entries have been deleted.\n' };
      if (cmd === 'conntrack') return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n' };
      if (cmd === 'nft') return { code: 0, stdout: '', stderr: '' };
      return { code: 1, stdout: '', stderr: 'no DOCKER-USER here' };
    });
    const next = renderIngress({ nodeId: 'n1', term: 4, revision: 100, address: '10.255.0.1', published: null, subnets: ['10.255.0.0/16'], services: [{ name: 'web', createdAt: 1, ports: [{ published: 8080, target: 80, protocol: 'tcp' }], backends: ['10.255.1.2'] }] });
    const report = await ingress.apply(next);
    expect(report.removed).toEqual([{ address: '10.255.2.2', protocol: 'tcp', port: 80 }, { address: '10.255.2.2', protocol: 'udp', port: 53 }]);
    expect(calls.filter((c) => c.startsWith('conntrack'))).toEqual([
      'conntrack -D -p tcp --reply-src 10.255.2.2 --reply-port-src 80',
      'conntrack -D -p udp --reply-src 10.255.2.2 --reply-port-src 53',
    ]);
    // 312 ended on tcp; none open on udp (exit 1, "0 flow entries") is not a failure.
    expect(report.flowsEnded).toBe(312);
  });

  it('fails the apply when a conntrack delete really fails (the table is in place, the pass is retried)', async () => {
    const listing = JSON.stringify({ nftables: [
      { set: { family: 'ip', name: 'backends', table: 'shoal-ingress', elem: [{ concat: ['10.255.2.2', 'tcp', 80] }] } },
      { rule: { family: 'ip', table: 'shoal-ingress', chain: 'applied', comment: 'shoal-ingress node=n1 term=4 revision=99' } },
    ] });
    const ingress = new Ingress(async (cmd, args) => {
      if (cmd === 'nft' && args[0] === '-j') return { code: 0, stdout: listing, stderr: '' };
      if (cmd === 'conntrack') return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): Operation not permitted\n' };
      return { code: cmd === 'nft' ? 0 : 1, stdout: '', stderr: '' };
    });
    const next = renderIngress({ nodeId: 'n1', term: 4, revision: 100, address: '10.255.0.1', published: null, subnets: [], services: [] });
    await expect(ingress.apply(next)).rejects.toThrow(/Operation not permitted/);
  });

  it('owes, when a conntrack delete fails, that backend and those after it, not those already ended', async () => {
    const listing = JSON.stringify({ nftables: [
      { set: { family: 'ip', name: 'backends', table: 'shoal-ingress', elem: [{ concat: ['10.255.1.2', 'tcp', 80] }, { concat: ['10.255.2.2', 'tcp', 80] }, { concat: ['10.255.3.2', 'tcp', 80] }] } },
      { rule: { family: 'ip', table: 'shoal-ingress', chain: 'applied', comment: 'shoal-ingress node=n1 term=4 revision=99' } },
    ] });
    const ingress = new Ingress(async (cmd, args) => {
      if (cmd === 'nft' && args[0] === '-j') return { code: 0, stdout: listing, stderr: '' };
      if (cmd === 'conntrack' && args.includes('10.255.2.2')) return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): Operation not permitted\n' };
      if (cmd === 'conntrack') return { code: 0, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 2 flow entries have been deleted.\n' };
      return { code: cmd === 'nft' ? 0 : 1, stdout: '', stderr: '' };
    });
    const next = renderIngress({ nodeId: 'n1', term: 4, revision: 100, address: '10.255.0.1', published: null, subnets: [], services: [] });
    const err: unknown = await ingress.apply(next).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IngressApplyUnfinishedError);
    expect((err as IngressApplyUnfinishedError).owed).toEqual([{ address: '10.255.2.2', protocol: 'tcp', port: 80 }, { address: '10.255.3.2', protocol: 'tcp', port: 80 }]);
    // What is owed is handed to the next apply, which ends it along with what its table removes (nothing here).
    const calls: string[] = [];
    const retry = new Ingress(async (cmd, args) => {
      calls.push(`${cmd} ${args.join(' ')}`);
      return { code: 0, stdout: cmd === 'nft' && args[0] === '-j' ? JSON.stringify({ nftables: [] }) : '', stderr: '' };
    });
    const report = await retry.apply(next, null, (err as IngressApplyUnfinishedError).owed);
    expect(report.removed.map((b) => b.address)).toEqual(['10.255.2.2', '10.255.3.2']);
    expect(calls.filter((c) => c.startsWith('conntrack'))).toHaveLength(2);
  });
});

/**
 * The host as the mesh's applier sees it: the table the last `nft -f` applied (its stamp and its
 * `backends` set, listed back as `nft -j` does), and conntrack deleting a backend's flows (or
 * failing while `conntrackFails`). Records every command.
 */
class FakeIngressHost {
  calls: string[] = [];
  table: { comment: string; backends: string[][] } | null = null;
  conntrackFails = false;

  readonly run = async (cmd: string, args: readonly string[], input?: string): Promise<CommandOutput> => {
    this.calls.push(`${cmd} ${args.join(' ')}`);
    const ok = (stdout = '', stderr = ''): CommandOutput => ({ code: 0, stdout, stderr });
    if (cmd === 'nft' && args[0] === '-j') return this.table === null ? { code: 1, stdout: '', stderr: 'Error: No such file or directory' } : ok(this.listing());
    if (cmd === 'nft' && args[0] === '-f') {
      const text = input ?? '';
      const m = /set backends \{[^}]*?elements = \{\n([^}]*)\n {4}\}/.exec(text);
      this.table = { comment: /comment "(shoal-ingress node=[^"]+)"/.exec(text)?.[1] ?? '', backends: m?.[1] === undefined ? [] : m[1].split(',\n').map((e) => e.trim().split(' . ')) };
      return ok();
    }
    if (cmd === 'conntrack') return this.conntrackFails ? { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): Operation not permitted\n' } : ok('', 'conntrack v1.4.7 (conntrack-tools): 3 flow entries have been deleted.\n');
    return ok();
  };

  /** The conntrack deletes sent, as `ADDRESS PROTO PORT`. */
  deletes(): string[] {
    return this.calls.filter((c) => c.startsWith('conntrack -D')).map((c) => { const a = c.split(' '); return `${a[5]} ${a[3]} ${a[7]}`; });
  }

  private listing(): string {
    return JSON.stringify({ nftables: [
      { table: { family: 'ip', name: 'shoal-ingress' } },
      { set: { family: 'ip', table: 'shoal-ingress', name: 'backends', elem: (this.table?.backends ?? []).map((e) => ({ concat: e.map((v) => (/^\d+$/.test(v) ? Number(v) : v)) })) } },
      { rule: { family: 'ip', table: 'shoal-ingress', chain: 'applied', comment: this.table?.comment } },
    ] });
  }
}

describe('IngressLoop: what an apply that failed after `nft -f` owes (the real applier, a fake host)', () => {
  /** A task's report set to a state: running makes it a backend again, starting takes it out. */
  function report(store: DocumentStore, id: string, state: 'running' | 'starting'): void {
    const doc = store.get(taskStatusCollection, id)?.doc as JsonObject;
    put(store, taskStatusCollection, id, { ...doc, state });
  }

  /** web's w1 (10.255.0.2: tcp 80, udp 53) and api's a1 (10.255.0.4: tcp 9000) leave n1's table on a pass whose conntrack deletes fail. */
  async function removedWhileConntrackFails(): Promise<{ store: DocumentStore; host: FakeIngressHost; loop: IngressLoop }> {
    const store = cluster();
    const host = new FakeIngressHost();
    const loop = new IngressLoop({ store, nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress: new Ingress(host.run), log: quietLog });
    expect(await loop.converge()).toBe('applied');
    expect(host.table?.backends.map((b) => b.join(' ')).sort()).toEqual(['10.255.0.2 tcp 80', '10.255.0.2 udp 53', '10.255.0.4 tcp 9000']);
    host.conntrackFails = true;
    report(store, 'w1', 'starting');
    report(store, 'a1', 'starting');
    await expect(loop.converge()).rejects.toThrow(/Operation not permitted/);
    // The new table is in force: a pass reading it finds no backend to remove.
    expect(host.table?.backends).toEqual([]);
    host.conntrackFails = false;
    host.calls = [];
    return { store, host, loop };
  }

  it('deletes the flows of the backends a pass removed but could not end, on the next pass', async () => {
    const { store, host, loop } = await removedWhileConntrackFails();
    // Nothing changed in the store since: the pass is not quiet, for something is owed.
    expect(await loop.converge()).toBe('applied');
    expect(host.deletes().sort()).toEqual(['10.255.0.2 tcp 80', '10.255.0.2 udp 53', '10.255.0.4 tcp 9000']);
    expect(loop.appliedRevision).toBe(store.revision);
    // Ended: owed no more; the next pass that changes nothing is quiet again.
    host.calls = [];
    put(store, taskStatusCollection, 'w4', store.get(taskStatusCollection, 'w4')?.doc as JsonObject);
    expect(await loop.converge()).toBe('unchanged');
    expect(host.calls).toEqual(['nft -j list table ip shoal-ingress']);
  });

  it('does not delete the flows of a backend that is back before the retry', async () => {
    const { store, host, loop } = await removedWhileConntrackFails();
    report(store, 'w1', 'running');
    expect(await loop.converge()).toBe('applied');
    expect(host.table?.backends.map((b) => b.join(' ')).sort()).toEqual(['10.255.0.2 tcp 80', '10.255.0.2 udp 53']);
    expect(host.deletes()).toEqual(['10.255.0.4 tcp 9000']);
  });

  it('says the new table is in force and how many backends are owed, and retries until they are ended', async () => {
    const store = cluster();
    const host = new FakeIngressHost();
    const warnings: string[] = [];
    const loop = new IngressLoop({ store, nodeId: 'n1', term: () => 5, firewallEnabled: false, ingress: new Ingress(host.run), log: { info: () => undefined, warn: (m) => warnings.push(m) } });
    expect(await loop.converge()).toBe('applied');
    host.conntrackFails = true;
    report(store, 'a1', 'starting');
    loop.start();
    await until(() => warnings.length === 1);
    expect(warnings[0]).toMatch(/^ingress: conntrack -D .* exited with code 1: .*Operation not permitted; the new table is in force; the flows of 1 removed backends are ended on the next pass; retrying in 500 ms$/);
    host.calls = [];
    host.conntrackFails = false;
    await until(() => host.deletes().length === 1);
    expect(host.deletes()).toEqual(['10.255.0.4 tcp 9000']);
    await loop.close();
  });
});
