// The per-node firewall loop against a real document store and a recording firewall: it applies
// on start and on every change of what the table depends on, records the revision, never
// replaces a newer table with an older state, and keeps the table in force when an apply fails.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { firewallPoliciesCollection, networksCollection } from '../../src/resources/network-resources.ts';
import type { ApplyReport, InForce } from '../../net/firewall.ts';
import { FirewallLoop } from '../../net/firewall-loop.ts';
import type { RenderedFirewall } from '../../net/firewall-render.ts';

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
