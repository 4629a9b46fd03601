import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConstraint, type Constraint } from '../../src/resources/spec/constraint.ts';
import type { FirewallPolicySpec } from '../../src/resources/spec/network-spec.ts';
import { FirewallTooLargeError, firewallPermits, removedPermits, type FirewallTask } from '../../net/firewall-permits.ts';
import { parseAppliedComment, renderFirewall, sshPort, type FirewallRenderInput } from '../../net/firewall-render.ts';
import { parseListing } from '../../net/firewall.ts';

const constraint = (text: string): Constraint => {
  const r = parseConstraint(text);
  if (!r.ok) throw new Error(r.message);
  return r.constraint;
};

const base: FirewallRenderInput = {
  node: { id: 'n1', name: 'pi-one', labels: { edge: 'true' } },
  term: 7, revision: 1234, managementPorts: [7101, 7001],
  networks: [{ name: 'front', subnet: '10.61.0.0/16', internal: false }, { name: 'back', subnet: '10.62.0.0/16', internal: true }],
  policies: [{
    name: 'web-db',
    allow: [{ from: { services: ['web'], networks: [] }, to: { services: ['db'], networks: [] }, ports: [{ port: 5432, protocol: 'tcp' }] }],
    publish: [{ service: 'web', ports: [], nodes: [constraint('node.labels.edge == true')] }, { service: 'db', ports: [], nodes: [constraint('node.name == other')] }],
  }],
  services: [{ name: 'web', ports: [{ published: 80, target: 8080, protocol: 'tcp' }] }, { name: 'db', ports: [{ published: 5432, target: 5432, protocol: 'tcp' }] }],
  tasks: [
    { id: 'w1', service: 'web', nodeId: 'n1', addresses: { front: '10.61.0.2' } },
    { id: 'w2', service: 'web', nodeId: 'n2', addresses: { front: '10.61.1.2' } },
    { id: 'd1', service: 'db', nodeId: 'n2', addresses: { back: '10.62.1.2' } },
    { id: 'd2', service: 'db', nodeId: 'n3', addresses: { back: '10.62.2.2' } },
  ],
};

describe('renderFirewall', () => {
  it('renders the whole table (snapshot)', () => {
    expect(renderFirewall(base).text).toMatchSnapshot();
  });

  it('keeps only permits with a task of this node at one end, and publishes only on the nodes the rule chooses', () => {
    const { permits, published } = firewallPermits(base);
    expect(permits).toEqual([
      { from: '10.61.0.2', to: '10.62.1.2', protocol: 'tcp', port: 5432 },
      { from: '10.61.0.2', to: '10.62.2.2', protocol: 'tcp', port: 5432 },
    ]);
    expect(published).toEqual([{ address: '10.61.0.2', protocol: 'tcp', port: 8080 }]);
    expect(firewallPermits({ ...base, node: { id: 'n3', name: 'n3', labels: {} } }).permits).toEqual([
      { from: '10.61.0.2', to: '10.62.2.2', protocol: 'tcp', port: 5432 },
      { from: '10.61.1.2', to: '10.62.2.2', protocol: 'tcp', port: 5432 },
    ]);
  });

  it('selects by network as well as by service', () => {
    const policy: FirewallPolicySpec = { name: 'p', allow: [{ from: { services: [], networks: ['front'] }, to: { services: [], networks: ['back'] }, ports: [{ port: 53, protocol: 'udp' }] }], publish: [] };
    expect(firewallPermits({ ...base, policies: [policy] }).permits.map((p) => `${p.from}>${p.to}`)).toEqual(['10.61.0.2>10.62.1.2', '10.61.0.2>10.62.2.2']);
  });

  it('refuses a policy that resolves to more permits than the bound', () => {
    const tasks: FirewallTask[] = Array.from({ length: 300 }, (_, i) => ({ id: `t${i}`, service: i % 2 === 0 ? 'a' : 'b', nodeId: 'n1', addresses: { front: `10.61.${i >> 8}.${i & 255}` } }));
    const ports = Array.from({ length: 10 }, (_, i) => ({ port: 1000 + i, protocol: 'tcp' as const }));
    const policy: FirewallPolicySpec = { name: 'p', allow: [{ from: { services: ['a', 'b'], networks: [] }, to: { services: ['a', 'b'], networks: [] }, ports }], publish: [] };
    expect(() => firewallPermits({ ...base, tasks, policies: [policy] })).toThrow(FirewallTooLargeError);
  });

  it('says what a new table no longer permits', () => {
    const before = firewallPermits(base).permits;
    expect(removedPermits(before, before.slice(1))).toEqual(before.slice(0, 1));
  });
});

const portArb = fc.integer({ min: 1, max: 65535 });
const policyArb: fc.Arbitrary<FirewallPolicySpec> = fc.record({
  name: fc.constant('p'),
  allow: fc.array(fc.record({
    from: fc.record({ services: fc.subarray(['web', 'db', 'x']), networks: fc.subarray(['front', 'back']) }),
    to: fc.record({ services: fc.subarray(['web', 'db', 'x']), networks: fc.subarray(['front', 'back']) }),
    ports: fc.array(fc.record({ port: portArb, protocol: fc.constantFrom('tcp' as const, 'udp' as const) }), { minLength: 1, maxLength: 4 }),
  }), { maxLength: 4 }),
  publish: fc.array(fc.record({ service: fc.constantFrom('web', 'db'), ports: fc.constant([]), nodes: fc.constant([]) }), { maxLength: 2 }),
});

describe('renderFirewall, properties', () => {
  it('accepts SSH, the API and the peer port on the host first, whatever the policy and networks', () => {
    fc.assert(fc.property(fc.array(policyArb, { maxLength: 3 }), fc.array(portArb, { minLength: 2, maxLength: 2 }), fc.boolean(), (policies, management, internal) => {
      const input = { ...base, policies, managementPorts: management, networks: base.networks.map((n) => ({ ...n, internal })) };
      const text = renderFirewall(input).text;
      const input_ = text.slice(text.indexOf('  chain input {'));
      const rules = input_.split('\n').slice(1).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('type '));
      const first = /^tcp dport \{ ([\d, ]+) \} accept/.exec(rules[0] ?? '');
      expect(first, rules[0]).not.toBeNull();
      const accepted = (first?.[1] ?? '').split(', ').map(Number);
      for (const port of [sshPort, ...management]) expect(accepted).toContain(port);
      // Nothing in any chain names a management port in a drop.
      expect(text).not.toMatch(/dport[^\n]*drop/);
      // The input chain never drops all traffic: its policy is accept.
      expect(input_).toContain('policy accept;');
    }), { numRuns: 200 });
  });

  it('is deterministic and records term and revision', () => {
    fc.assert(fc.property(fc.nat(), fc.nat(), (term, revision) => {
      const a = renderFirewall({ ...base, term, revision, tasks: [...base.tasks].reverse() });
      expect(renderFirewall({ ...base, term, revision }).text).toBe(a.text);
      const m = /counter comment "([^"]+)"/.exec(a.text);
      expect(parseAppliedComment(m?.[1] ?? '')).toEqual({ nodeId: 'n1', term, revision });
    }), { numRuns: 50 });
  });
});

describe('parseListing', () => {
  it('reads what is in force from nft -j list table output', () => {
    const json = JSON.stringify({ nftables: [
      { metainfo: { version: '1.0.6' } },
      { table: { family: 'inet', name: 'shoal', handle: 3 } },
      { set: { family: 'inet', name: 'permits', table: 'shoal', type: ['ipv4_addr', 'ipv4_addr', 'inet_proto', 'inet_service'], handle: 3, elem: [{ concat: ['10.1.0.2', '10.2.0.3', 'udp', 53] }, { concat: ['10.1.0.2', '10.2.0.3', 'tcp', 80] }] } },
      { set: { family: 'inet', name: 'published', table: 'shoal', type: ['ipv4_addr', 'inet_proto', 'inet_service'], handle: 4 } },
      { chain: { family: 'inet', table: 'shoal', name: 'applied', handle: 1 } },
      { rule: { family: 'inet', table: 'shoal', chain: 'applied', handle: 8, comment: 'shoal node=n1 term=3 revision=42', expr: [{ counter: { packets: 0, bytes: 0 } }] } },
    ] });
    expect(parseListing(json)).toEqual({
      nodeId: 'n1', term: 3, revision: 42, published: [],
      permits: [{ from: '10.1.0.2', to: '10.2.0.3', protocol: 'udp', port: 53 }, { from: '10.1.0.2', to: '10.2.0.3', protocol: 'tcp', port: 80 }],
    });
    expect(parseListing(JSON.stringify({ nftables: [{ table: { family: 'inet', name: 'shoal' } }] }))).toBeNull();
  });
});
