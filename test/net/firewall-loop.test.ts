// The per-node firewall loop against a real document store and a recording firewall: it applies
// on start and on every change of what the table depends on, records the revision, never
// replaces a newer table with an older state, and keeps the table in force when an apply fails.
// And with the real applier (net/firewall.ts) over a fake host that keeps the table `nft -f`
// applied: its quiet passes (net/applied-table.ts), counted in commands run, and what an apply
// that failed after `nft -f` owes (the connections of the permissions it revoked, ended on the
// next pass unless granted again). And the applier's DOCKER-USER check: which failures mean "no
// Docker".

import { describe, expect, it } from 'vitest';
import { CommandError } from '../../src/base/run-command.ts';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { firewallPoliciesCollection, networksCollection } from '../../src/resources/network-resources.ts';
import { nodesCollection, tasksCollection } from '../../src/resources/collections.ts';
import { dockerRuleCheckMs } from '../../net/applied-table.ts';
import type { CommandOutput } from '../../net/firewall-command.ts';
import { Firewall, type ApplyReport, type InForce } from '../../net/firewall.ts';
import { FirewallLoop } from '../../net/firewall-loop.ts';
import type { RenderedFirewall } from '../../net/firewall-render.ts';
import { StateBuilder } from '../control/state-builder.ts';

let index = 0;
function put(store: DocumentStore, collection: string, id: string, doc: object): void {
  index += 1;
  store.apply({ index, term: 2, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: index }) });
}

class RecordingFirewall {
  applied: RenderedFirewall[] = [];
  inForceRevision: number | null = null;
  failNext = 0;

  async inForce(): Promise<InForce | null> {
    return this.inForceRevision === null ? null : { nodeId: 'n1', term: 2, revision: this.inForceRevision, permits: [], published: [] };
  }

  async apply(r: RenderedFirewall): Promise<ApplyReport> {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('nft -f - failed (exit 1): simulated');
    }
    this.applied.push(r);
    return { before: null, revoked: 0, docker: false };
  }

  async ensureDockerRule(): Promise<boolean> {
    return false;
  }
}

/**
 * The host as the applier sees it through its command runner: the table the last `nft -f` applied
 * (its stamp and its `permits` and `published` sets, listed back as `nft -j` does), a DOCKER-USER
 * chain with shoal's rule in it, and the open flows `conntrack -L` lists. Records every command.
 */
class FakeHost {
  calls: string[] = [];
  /** What `conntrack -R -` was given: the flows deleted. */
  deleted: string[] = [];
  table: { comment: string; permits: string[][]; published: string[][] } | null = null;
  flows = '';
  /** Commands starting with one of these exit 1 (a conntrack that refuses, say). */
  failing: string[] = [];

  readonly run = async (cmd: string, args: readonly string[], input?: string): Promise<CommandOutput> => {
    const line = `${cmd} ${args.join(' ')}`;
    this.calls.push(line);
    if (this.failing.some((f) => line.startsWith(f))) return { code: 1, stdout: '', stderr: `${cmd}: Operation not permitted (simulated)` };
    const ok = (stdout = ''): CommandOutput => ({ code: 0, stdout, stderr: '' });
    if (cmd === 'nft' && args[0] === '-j') return this.table === null ? { code: 1, stdout: '', stderr: 'Error: No such file or directory' } : ok(this.listing());
    if (cmd === 'nft' && args[0] === '-f') {
      const text = input ?? '';
      this.table = { comment: /comment "(shoal node=[^"]+)"/.exec(text)?.[1] ?? '', permits: elements(text, 'permits'), published: elements(text, 'published') };
      return ok();
    }
    if (cmd === 'conntrack' && args[0] === '-L') return ok(this.flows);
    if (cmd === 'conntrack' && args[0] === '-R') this.deleted.push(...(input ?? '').split('\n').filter((l) => l !== ''));
    return ok();
  };

  count(prefix: string): number {
    return this.calls.filter((c) => c.startsWith(prefix)).length;
  }

  private listing(): string {
    const set = (name: string, elems: string[][]) => ({ set: { family: 'inet', table: 'shoal', name, elem: elems.map((e) => ({ concat: e.map((v) => (/^\d+$/.test(v) ? Number(v) : v)) })) } });
    return JSON.stringify({ nftables: [
      { table: { family: 'inet', name: 'shoal' } },
      set('permits', this.table?.permits ?? []),
      set('published', this.table?.published ?? []),
      { rule: { family: 'inet', table: 'shoal', chain: 'applied', comment: this.table?.comment } },
    ] });
  }
}

/** A set's elements as `nft -f` text lists them, each split at ` . `. */
function elements(text: string, name: string): string[][] {
  const m = new RegExp(`set ${name} \\{[^}]*?elements = \\{\n([^}]*)\n    \\}`).exec(text);
  return m?.[1] === undefined ? [] : m[1].split(',\n').map((e) => e.trim().split(' . '));
}

function task(id: string, service: string): object {
  return {
    id, service, slot: 1, specVersion: 1, nodeId: 'n1', desired: 'running', observed: 'running', assignedTerm: 2, nodeEpoch: 0, containerId: null,
    exitCode: null, message: null, pendingReason: null, attempt: 0, createdAt: 0, assignedAt: 0, startedAt: 0, finishedAt: null, updatedAt: 0,
  };
}

const allow = (port: number): object => ({ name: 'web-db', spec: { name: 'web-db', allow: [{ from: { services: ['web'], networks: [] }, to: { services: ['db'], networks: [] }, ports: [{ port, protocol: 'tcp' }] }], publish: [] }, createdAt: 0, updatedAt: 0 });

/** Node n1 with web-0 (10.61.0.2) on front, db-0 (10.62.0.2) on back, and a policy letting web reach db on 5432. */
function webDb(): DocumentStore {
  const store = new DocumentStore();
  const n1 = new StateBuilder().node('n1').build().nodes.get('n1')?.value;
  put(store, nodesCollection, 'n1', n1 ?? {});
  put(store, tasksCollection, 'web-0', task('web-0', 'web'));
  put(store, tasksCollection, 'db-0', task('db-0', 'db'));
  put(store, networksCollection, 'front', { ...network('front', '10.61.0.0/16'), slices: { n1: 0 }, addresses: { 'web-0': '10.61.0.2' } });
  put(store, networksCollection, 'back', { ...network('back', '10.62.0.0/16'), slices: { n1: 0 }, addresses: { 'db-0': '10.62.0.2' } });
  put(store, firewallPoliciesCollection, 'web-db', allow(5432));
  return store;
}

/** The loop with the real applier on a fake host, and a clock the test moves. */
function onFakeHost(store: DocumentStore): { host: FakeHost; loop: FirewallLoop; clock: { now: number } } {
  const host = new FakeHost();
  const clock = { now: 0 };
  const loop = new FirewallLoop({ store, nodeId: 'n1', term: () => 5, managementPorts: [7101], firewall: new Firewall(host.run), now: () => clock.now, log: quietLog });
  return { host, loop, clock };
}

/** A node's document written again with a new address: a new revision, the same table. */
function touchNode(store: DocumentStore): void {
  const n1 = store.get(nodesCollection, 'n1')?.doc as JsonObject;
  put(store, nodesCollection, 'n1', { ...n1, addresses: { api: `n1:${index}`, peer: 'n1:2' } });
}

const quietLog = { info: () => undefined, warn: () => undefined };
const network = (name: string, subnet: string): object => ({ name, spec: { name, subnet, internal: false, slicePrefix: 24 }, slices: {}, addresses: {}, createdAt: 0, updatedAt: 0 });

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}

describe('FirewallLoop', () => {
  it('applies on start and again when a network or a policy changes, with the term and revision', async () => {
    const store = new DocumentStore();
    put(store, networksCollection, 'front', network('front', '10.61.0.0/16'));
    const fw = new RecordingFirewall();
    const loop = new FirewallLoop({ store, nodeId: 'n1', term: () => 5, managementPorts: [7101, 7001], firewall: fw, log: quietLog });
    loop.start();
    await until(() => fw.applied.length === 1);
    expect(fw.applied[0]?.text).toContain(`comment "shoal node=n1 term=5 revision=${store.revision}"`);
    expect(fw.applied[0]?.text).toContain('10.61.0.0/16');
    put(store, 'notes', 'x', { a: 1 });
    put(store, firewallPoliciesCollection, 'p', { name: 'p', spec: { name: 'p', allow: [], publish: [] }, createdAt: 0, updatedAt: 0 });
    await until(() => fw.applied.length === 2);
    expect(loop.appliedRevision).toBe(store.revision);
    await loop.close();
  });

  it('never replaces a table rendered from a newer revision (a store still catching up)', async () => {
    const store = new DocumentStore();
    put(store, networksCollection, 'front', network('front', '10.61.0.0/16'));
    const fw = new RecordingFirewall();
    fw.inForceRevision = store.revision + 100;
    const loop = new FirewallLoop({ store, nodeId: 'n1', term: () => 5, managementPorts: [], firewall: fw, log: quietLog });
    expect(await loop.converge()).toBe('behind');
    expect(fw.applied).toHaveLength(0);
    fw.inForceRevision = store.revision;
    expect(await loop.converge()).toBe('applied');
  });

  it('keeps the table in force when an apply fails, and retries', async () => {
    const store = new DocumentStore();
    put(store, networksCollection, 'front', network('front', '10.61.0.0/16'));
    const fw = new RecordingFirewall();
    fw.failNext = 1;
    const warnings: string[] = [];
    const loop = new FirewallLoop({ store, nodeId: 'n1', term: () => 5, managementPorts: [], firewall: fw, log: { info: () => undefined, warn: (m) => warnings.push(m) } });
    loop.start();
    await until(() => fw.applied.length === 1);
    expect(warnings[0]).toMatch(/the table in force is kept; retrying in 500 ms/);
    await loop.close();
  });
});

describe('FirewallLoop quiet passes (the real applier, a fake host)', () => {
  it('applies nothing when a change leaves the table as it is: one `nft -j list`, no `nft -f`, no iptables', async () => {
    const store = webDb();
    const { host, loop } = onFakeHost(store);
    expect(await loop.converge()).toBe('applied');
    expect(host.table?.permits).toEqual([['10.61.0.2', '10.62.0.2', 'tcp', '5432']]);
    const applied = store.revision;
    host.calls = [];
    touchNode(store);
    expect(await loop.converge()).toBe('unchanged');
    expect(host.calls).toEqual(['nft -j list table inet shoal']);
    // The table in force, and what the loop says it applied, are still those of the first pass.
    expect(host.table?.comment).toBe(`shoal node=n1 term=5 revision=${applied}`);
    expect(loop.appliedRevision).toBe(applied);
  });

  it('applies again when the table in force is not the one it applied: flushed, replaced by another stamp, or gone', async () => {
    const store = webDb();
    const { host, loop } = onFakeHost(store);
    expect(await loop.converge()).toBe('applied');
    const flush = (): void => { if (host.table !== null) host.table.permits = []; };
    const restamp = (): void => { if (host.table !== null) host.table.comment = `shoal node=n1 term=4 revision=${store.revision}`; };
    const drop = (): void => { host.table = null; };
    for (const change of [flush, restamp, drop]) {
      touchNode(store);
      change();
      host.calls = [];
      expect(await loop.converge()).toBe('applied');
      expect(host.count('nft -f')).toBe(1);
      expect(host.count('nft -j')).toBe(1);
      expect(host.table?.comment).toBe(`shoal node=n1 term=5 revision=${store.revision}`);
      expect(host.table?.permits).toEqual([['10.61.0.2', '10.62.0.2', 'tcp', '5432']]);
      expect(loop.appliedRevision).toBe(store.revision);
    }
  });

  it('checks the DOCKER-USER rule again once 30 s of quiet passes have gone by, not before', async () => {
    const store = webDb();
    const { host, loop, clock } = onFakeHost(store);
    expect(await loop.converge()).toBe('applied');
    expect(host.count('iptables')).toBe(2);
    host.calls = [];
    clock.now = dockerRuleCheckMs - 1;
    touchNode(store);
    expect(await loop.converge()).toBe('unchanged');
    expect(host.count('iptables')).toBe(0);
    host.calls = [];
    clock.now = dockerRuleCheckMs;
    touchNode(store);
    expect(await loop.converge()).toBe('unchanged');
    expect(host.calls).toEqual(['nft -j list table inet shoal', 'iptables -w 5 -S DOCKER-USER', expect.stringMatching(/^iptables -w 5 -C DOCKER-USER .*shoal-firewall/)]);
    expect(host.count('nft -f')).toBe(0);
    // Checked just now: the next quiet passes wait another 30 s.
    host.calls = [];
    clock.now = 2 * dockerRuleCheckMs - 1;
    touchNode(store);
    expect(await loop.converge()).toBe('unchanged');
    expect(host.count('iptables')).toBe(0);
  });

  it('applies a change that alters the table, reading it once, and ends the connections of a removed permission', async () => {
    const store = webDb();
    const { host, loop } = onFakeHost(store);
    expect(await loop.converge()).toBe('applied');
    host.flows = 'tcp      6 431999 ESTABLISHED src=10.61.0.2 dst=10.62.0.2 sport=40112 dport=5432 src=10.62.0.2 dst=10.61.0.2 sport=5432 dport=40112 [ASSURED] mark=0 use=1\n';
    host.calls = [];
    put(store, firewallPoliciesCollection, 'web-db', allow(5433));
    expect(await loop.converge()).toBe('applied');
    expect(host.table?.permits).toEqual([['10.61.0.2', '10.62.0.2', 'tcp', '5433']]);
    expect(host.count('nft -j')).toBe(1);
    expect(host.count('nft -f')).toBe(1);
    expect(host.count('conntrack -L')).toBe(1);
    expect(host.deleted).toHaveLength(1);
    expect(host.deleted[0]).toMatch(/^-D -p tcp .*10\.61\.0\.2.*40112/);
    expect(loop.appliedRevision).toBe(store.revision);
  });
});

describe('FirewallLoop: what an apply that failed after `nft -f` owes (the real applier, a fake host)', () => {
  const open5432 = 'tcp      6 431999 ESTABLISHED src=10.61.0.2 dst=10.62.0.2 sport=40112 dport=5432 src=10.62.0.2 dst=10.61.0.2 sport=5432 dport=40112 [ASSURED] mark=0 use=1\n';

  /** web may reach db on 5432 and has a connection open; the policy moves to 5433 and conntrack refuses to delete on that pass. */
  async function revokedWhileConntrackFails(): Promise<{ store: DocumentStore; host: FakeHost; loop: FirewallLoop }> {
    const store = webDb();
    const { host, loop } = onFakeHost(store);
    expect(await loop.converge()).toBe('applied');
    host.flows = open5432;
    host.failing = ['conntrack -R', 'conntrack -D'];
    put(store, firewallPoliciesCollection, 'web-db', allow(5433));
    await expect(loop.converge()).rejects.toThrow(/Operation not permitted/);
    // The new table is in force: a pass reading it finds no 5432 permit to revoke.
    expect(host.table?.permits).toEqual([['10.61.0.2', '10.62.0.2', 'tcp', '5433']]);
    expect(host.deleted).toEqual([]);
    host.failing = [];
    host.calls = [];
    return { store, host, loop };
  }

  it('ends the connections of a permission revoked by a pass whose conntrack failed, on the next pass', async () => {
    const { store, host, loop } = await revokedWhileConntrackFails();
    // Nothing changed in the store since: the pass is not quiet, for something is owed.
    expect(await loop.converge()).toBe('applied');
    expect(host.count('conntrack -L')).toBe(1);
    expect(host.deleted).toHaveLength(1);
    expect(host.deleted[0]).toMatch(/^-D -p tcp .*10\.61\.0\.2.*40112/);
    expect(loop.appliedRevision).toBe(store.revision);
    // Ended: owed no more, so the next pass that changes nothing is quiet again.
    host.calls = [];
    touchNode(store);
    expect(await loop.converge()).toBe('unchanged');
    expect(host.calls).toEqual(['nft -j list table inet shoal']);
  });

  it('does not end them when the permission is granted again before the retry', async () => {
    const { store, host, loop } = await revokedWhileConntrackFails();
    put(store, firewallPoliciesCollection, 'web-db', allow(5432));
    expect(await loop.converge()).toBe('applied');
    expect(host.table?.permits).toEqual([['10.61.0.2', '10.62.0.2', 'tcp', '5432']]);
    // Only the 5433 permit this pass revokes is looked for (no flow of it is open).
    expect(host.count('conntrack -R')).toBe(0);
    expect(host.deleted).toEqual([]);
  });

  it('owes them too when the DOCKER-USER check fails after the new table went in, and says so', async () => {
    const store = webDb();
    const { host, loop } = onFakeHost(store);
    expect(await loop.converge()).toBe('applied');
    host.flows = open5432;
    // The rule is missing (-C) and cannot be put back (-I).
    host.failing = ['iptables -w 5 -C', 'iptables -w 5 -I'];
    const warnings: string[] = [];
    const started = new FirewallLoop({ store, nodeId: 'n1', term: () => 5, managementPorts: [7101], firewall: new Firewall(host.run), log: { info: () => undefined, warn: (m) => warnings.push(m) } });
    put(store, firewallPoliciesCollection, 'web-db', allow(5433));
    started.start();
    await until(() => warnings.length === 1);
    expect(warnings[0]).toMatch(/^firewall: iptables -w 5 -I .* exited with code 1: .*; the new table is in force; the connections of 1 removed permissions are ended on the next pass; retrying in 500 ms$/);
    host.failing = [];
    await until(() => host.deleted.length === 1);
    expect(host.deleted[0]).toMatch(/^-D -p tcp .*10\.61\.0\.2.*40112/);
    await started.close();
    await loop.close();
  });
});

describe('Firewall.ensureDockerRule', () => {
  const runner = (chain: () => Promise<CommandOutput>) => {
    const calls: string[] = [];
    const run = async (cmd: string, args: readonly string[]): Promise<CommandOutput> => {
      calls.push(`${cmd} ${args.join(' ')}`);
      if (args.includes('-S')) return chain();
      return { code: 0, stdout: '', stderr: '' };
    };
    return { calls, firewall: new Firewall(run) };
  };
  const failure = (reason: 'not_found' | 'timeout'): CommandError => new CommandError({ command: 'iptables', args: ['-w', '5', '-S', 'DOCKER-USER'], reason, exitCode: null, signal: null, stderrTail: '', detail: '10000 ms' });

  it('keeps its rule when the DOCKER-USER chain exists', async () => {
    const { calls, firewall } = runner(async () => ({ code: 0, stdout: '-N DOCKER-USER\n', stderr: '' }));
    expect(await firewall.ensureDockerRule()).toBe(true);
    expect(calls).toEqual(['iptables -w 5 -S DOCKER-USER', expect.stringMatching(/^iptables -w 5 -C DOCKER-USER .*shoal-firewall/)]);
  });

  it('says no Docker when the chain does not exist (iptables exits non-zero) or iptables is not installed', async () => {
    const noChain = runner(async () => ({ code: 1, stdout: '', stderr: 'iptables: No chain/target/match by that name.' }));
    expect(await noChain.firewall.ensureDockerRule()).toBe(false);
    expect(noChain.calls).toHaveLength(1);
    const noIptables = runner(async () => { throw failure('not_found'); });
    expect(await noIptables.firewall.ensureDockerRule()).toBe(false);
  });

  it('fails when iptables could not run for another reason (a timeout): not taken for "no Docker"', async () => {
    const { calls, firewall } = runner(async () => { throw failure('timeout'); });
    await expect(firewall.ensureDockerRule()).rejects.toThrow(/did not finish within 10000 ms/);
    expect(calls).toHaveLength(1);
  });
});
