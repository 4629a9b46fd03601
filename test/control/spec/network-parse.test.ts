import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, parseSpecs, type Problem } from '../../../src/resources/spec/index.ts';
import { firewallPolicySpecSchema, networkSpecSchema } from '../../../src/resources/spec/network-spec.ts';

function refused(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('bad_request');
    return ((err as ShoalError).details?.problems as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

const net = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Network', name: 'backend', subnet: '10.20.0.0/16', ...fields });
const policy = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'FirewallPolicy', name: 'web-db', ...fields });

describe('Network', () => {
  it('reads with its defaults, and a slice per node derived from the subnet', () => {
    const { networks } = parseSpecs('apiVersion: shoal/v1\nkind: Network\nname: backend\nsubnet: 10.20.0.0/16\n---\napiVersion: shoal/v1\nkind: Network\nname: iot\nsubnet: 192.168.77.0/24\ninternal: true\n');
    expect(networks).toEqual([
      { name: 'backend', subnet: '10.20.0.0/16', internal: false, slicePrefix: 24 },
      { name: 'iot', subnet: '192.168.77.0/24', internal: true, slicePrefix: 28 },
    ]);
    for (const n of networks) expect(networkSpecSchema.parse(n)).toEqual(n);
  });

  it.each([
    [{ subnet: '10.20.0.0' }, 'networks[0].subnet: "10.20.0.0" is not a CIDR block; write it as address/prefix'],
    [{ subnet: '10.20.1.0/16' }, 'networks[0].subnet: "10.20.1.0/16" has host bits set; the block is 10.20.0.0/16'],
    [{ subnet: '10.300.0.0/16' }, 'is not an IPv4 address'],
    [{ subnet: '10.20.0.0/33' }, 'the prefix length must be 0..32'],
    [{ subnet: '10.20.0.0/28' }, 'networks[0].subnet: 10.20.0.0/28 is a /28; a network\'s subnet is a /8 to a /24'],
    [{ subnet: 10 }, 'networks[0].subnet: must be a string'],
    [{ internal: 'yes' }, 'networks[0].internal: must be true or false'],
    [{ subent: 'x' }, 'networks[0].subent: unknown field; did you mean subnet?'],
    [{ name: 'Bad_Name' }, 'networks[0].name: "Bad_Name" is not a DNS label'],
  ])('refuses %j', (fields, expected) => {
    const problems = refused(() => parseSpecObjects([net(fields)]));
    expect(problems.some((p) => p.includes(expected)), problems.join('\n')).toBe(true);
  });

  it('refuses overlapping subnets in one apply, naming both, with every other problem', () => {
    expect(refused(() => parseSpecObjects([
      net({ name: 'a', subnet: '10.20.0.0/16' }),
      net({ name: 'b', subnet: '10.20.5.0/24', internal: 1 }),
      net({ name: 'c', subnet: '10.21.0.0/16' }),
      net({ name: 'd', subnet: '10.0.0.0/8' }),
    ]))).toEqual([
      'networks[1].internal: must be true or false, not the number 1',
      'networks[3].subnet: 10.0.0.0/8 overlaps 10.20.0.0/16 of networks[0] (a); subnets of networks never overlap',
    ]);
  });

  it('refuses two networks of one name', () => {
    expect(refused(() => parseSpecObjects([net({ subnet: '10.1.0.0/16' }), net({ subnet: '10.2.0.0/16' })]))).toEqual([
      'networks[1].name: backend is already declared by networks[0]',
    ]);
  });
});

describe('FirewallPolicy', () => {
  it('reads ports as numbers or port/protocol, selectors sorted and deduplicated', () => {
    const { firewallPolicies } = parseSpecObjects([policy({
      allow: [{ from: { services: ['web', 'api', 'web'] }, to: { networks: ['db'] }, ports: [5432, '53/udp', '8080/tcp'] }],
      publish: [{ service: 'web', ports: [80], nodes: ['node.labels.edge == true'] }, { service: 'api' }],
    })]);
    const p = firewallPolicies[0];
    expect(p?.allow).toEqual([{
      from: { services: ['api', 'web'], networks: [] }, to: { services: [], networks: ['db'] },
      ports: [{ port: 5432, protocol: 'tcp' }, { port: 53, protocol: 'udp' }, { port: 8080, protocol: 'tcp' }],
    }]);
    expect(p?.publish[0]?.nodes[0]?.text).toBe('node.labels.edge == true');
    expect(p?.publish[1]).toEqual({ service: 'api', ports: [], nodes: [] });
    expect(firewallPolicySpecSchema.parse(p)).toEqual(p);
  });

  it('takes platform constraints in publish rules, and refuses node.role (a node\'s firewall does not know the raft roles)', () => {
    const { firewallPolicies } = parseSpecObjects([policy({ publish: [{ service: 'web', nodes: ['node.platform.arch == x86_64'] }] })]);
    expect(firewallPolicies[0]?.publish[0]?.nodes[0]?.text).toBe('node.platform.arch == amd64');
    expect(refused(() => parseSpecObjects([policy({ publish: [{ service: 'web', nodes: ['node.labels.a == b', 'node.role == manager'] }] })])))
      .toEqual([expect.stringMatching(/^firewallPolicies\[0\]\.publish\[0\]\.nodes\[1\]: node\.role is not taken in publish rules/)]);
  });

  it('reports every problem at once, with its path', () => {
    expect(refused(() => parseSpecObjects([policy({
      allow: [
        { from: {}, to: { services: ['db'] }, ports: [0, '70000', '80/sctp', 443, 443] },
        { from: { services: ['web'] }, to: { services: ['db'] }, ports: [] },
        { from: { services: ['web'] }, to: { service: ['db'] }, ports: [80] },
      ],
      publish: [{ service: 'web', nodes: ['node.labels.x ~ y'] }],
    })]))).toEqual([
      'firewallPolicies[0].allow[0].from: selects nothing; name services (services: [web]) or networks (networks: [backend])',
      'firewallPolicies[0].allow[0].ports[0]: the number 0 is not a port: write 80 (TCP), "80/tcp" or "53/udp", the port 1..65535',
      'firewallPolicies[0].allow[0].ports[1]: "70000" is not a port: write 80 (TCP), "80/tcp" or "53/udp", the port 1..65535',
      'firewallPolicies[0].allow[0].ports[2]: "80/sctp" is not a port: write 80 (TCP), "80/tcp" or "53/udp", the port 1..65535',
      'firewallPolicies[0].allow[1].ports: must name at least one port: a policy allows exactly the ports it names',
      'firewallPolicies[0].allow[2].to.service: unknown field; did you mean services?',
      expect.stringMatching(/^firewallPolicies\[0\]\.publish\[0\]\.nodes\[0\]: /),
    ]);
  });

  it('refuses a port named twice, and a policy that allows nothing', () => {
    expect(refused(() => parseSpecObjects([policy({ allow: [{ from: { services: ['a'] }, to: { services: ['b'] }, ports: [443, '443/tcp'] }] })])))
      .toEqual(['firewallPolicies[0].allow[0].ports[1]: 443/tcp is named twice']);
    expect(refused(() => parseSpecObjects([policy({})]))).toEqual([
      'firewallPolicies[0]: allows nothing; give allow rules, publish rules, or both (networks are isolated without a policy)',
    ]);
  });
});
