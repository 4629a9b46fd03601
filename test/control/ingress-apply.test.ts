// The routing mesh's spec (issue 38): ports[].mode, its default, what it refuses, what the
// scheduler keeps apart, what an apply refuses when two services claim one ingress port, the
// implicit `ingress` network, and the feature level the field needs.

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../src/errors.ts';
import { ingressWarnings, prepareIngress } from '../../src/control/ingress-apply.ts';
import { demandOf } from '../../src/control/scheduler/demand.ts';
import { compatCommand } from '../../src/resources/record-compat.ts';
import { servicesCollection } from '../../src/resources/collections.ts';
import { newService } from '../../src/control/apply.ts';
import type { NetworkRecord, NetworkState } from '../../src/resources/network-resources.ts';
import { parseSpecObjects, parseSpecs, type Problem, type SpecSet } from '../../src/resources/spec/index.ts';
import { renderService } from '../../src/resources/spec/render.ts';
import { featureLevelIngress } from '../../src/base/feature-level.ts';
import type { JsonValue } from '../../fsm/types.ts';
import { StateBuilder, serviceYaml } from './state-builder.ts';

const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields });

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('accepted');
}

const noNets = (networks: NetworkRecord[] = []): NetworkState => ({ revision: 1, networks: new Map(networks.map((n) => [n.name, { value: n, rev: 1 }])), policies: new Map() });
const setOf = (yaml: string): SpecSet => parseSpecs(yaml);

describe('ports[].mode', () => {
  it('defaults to ingress for a replicated service, host for a global one, with hostNetwork or on one address; joins `ingress` then', () => {
    const [web, agent, hostNet, onAddress] = parseSpecObjects([
      svc({ ports: [{ published: 8080, target: 80 }, { published: 53, target: 53, protocol: 'udp', mode: 'host' }] }),
      svc({ name: 'agent', mode: 'global', ports: [{ published: 9100, target: 9100 }] }),
      svc({ name: 'hn', hostNetwork: true, ports: [{ published: 9200, target: 9200 }] }),
      svc({ name: 'one', ports: [{ published: 9300, target: 9300, hostIp: '192.168.1.5' }] }),
    ]).services;
    expect(web?.ports).toEqual([{ published: 8080, target: 80, protocol: 'tcp', mode: 'ingress' }, { published: 53, target: 53, protocol: 'udp' }]);
    expect(web?.networks).toEqual(['ingress']);
    expect([agent?.ports[0]?.mode, hostNet?.ports[0]?.mode, onAddress?.ports[0]?.mode]).toEqual([undefined, undefined, undefined]);
    expect(agent?.networks).toEqual([]);
  });

  it('renders the mode back explicitly, so the rendered spec reads as the same spec', () => {
    const spec = parseSpecObjects([svc({ networks: [], ports: [{ published: 8080, target: 80 }, { published: 81, target: 81, mode: 'host' }] })]).services[0];
    if (spec === undefined) throw new Error('no spec');
    const rendered = renderService(spec);
    expect(rendered.ports).toEqual([{ published: 8080, target: 80, protocol: 'tcp', mode: 'ingress' }, { published: 81, target: 81, protocol: 'tcp', mode: 'host' }]);
    expect(parseSpecObjects([rendered]).services[0]).toEqual(spec);
  });

  it('refuses ingress with hostNetwork or hostIp, and an unknown mode, each with its path', () => {
    expect(problemsOf(() => parseSpecObjects([svc({ hostNetwork: true, ports: [{ published: 80, target: 80, mode: 'ingress' }] })]))).toEqual([
      expect.stringMatching(/^services\[0\]\.ports\[0\]\.mode: a container on the node's own network has no overlay address/),
    ]);
    expect(problemsOf(() => parseSpecObjects([svc({ ports: [{ published: 80, target: 80, mode: 'ingress', hostIp: '10.0.0.1' }] })]))).toEqual([
      expect.stringMatching(/^services\[0\]\.ports\[0\]\.hostIp: an ingress port is open on every address of every node/),
    ]);
    expect(problemsOf(() => parseSpecObjects([svc({ ports: [{ published: 80, target: 80, mode: 'vip' }] })]))).toEqual([expect.stringMatching(/^services\[0\]\.ports\[0\]\.mode: /)]);
  });

  it('the scheduler keeps tasks apart for host ports only', () => {
    const [ingress, host] = parseSpecObjects([svc({ ports: [{ published: 8080, target: 80 }] }), svc({ name: 'h', ports: [{ published: 8081, target: 80, mode: 'host' }] })]).services;
    if (ingress === undefined || host === undefined) throw new Error('no spec');
    expect(demandOf(ingress).ports).toEqual([]);
    expect(demandOf(host).ports).toEqual(['8081/tcp']);
  });

  it('needs feature level 6 written, and a host port writes nothing new', () => {
    const [ingress, host] = parseSpecObjects([svc({ ports: [{ published: 8080, target: 80 }] }), svc({ name: 'h', ports: [{ published: 8081, target: 80, mode: 'host' }] })]).services;
    if (ingress === undefined || host === undefined) throw new Error('no spec');
    const levelOf = (doc: unknown): number => compatCommand({ op: 'put', collection: servicesCollection, id: 'x', doc: doc as JsonValue }).featureLevel;
    expect(levelOf(newService(ingress, 0))).toBe(featureLevelIngress);
    expect(levelOf(newService(host, 0))).toBeLessThan(featureLevelIngress);
    expect(JSON.stringify(newService(host, 0).spec.ports)).not.toContain('mode');
  });
});

describe('an apply of ingress ports', () => {
  const stored = new StateBuilder().service(serviceYaml('web', 'ports: [{published: 8080, target: 80}]')).service(serviceYaml('admin', 'ports: [{published: 9000, target: 9000, mode: host}]')).build();

  it('refuses a second service publishing a stored ingress port, naming both', () => {
    const set = setOf(serviceYaml('api', 'ports: [{published: 8080, target: 8080}]'));
    expect(problemsOf(() => prepareIngress(stored, noNets(), set))).toEqual([
      'services[0].ports[0].published: service api publishes 8080/tcp (ingress), and service web publishes it in ingress mode (open on every node); an ingress port is open on every node, so it belongs to one service: choose another published port for one of them',
    ]);
  });

  it('refuses an ingress port that another service publishes in host mode, and two in one apply, both named', () => {
    expect(problemsOf(() => prepareIngress(stored, noNets(), setOf(serviceYaml('api', 'ports: [{published: 9000, target: 80}]'))))).toEqual([
      expect.stringContaining('service api publishes 9000/tcp (ingress), and service admin publishes it in host mode'),
    ]);
    const two = setOf(`${serviceYaml('a', 'ports: [{published: 7000, target: 80}]')}\n---\n${serviceYaml('b', 'ports: [{published: 7000, target: 80, mode: host}]')}`);
    expect(problemsOf(() => prepareIngress(stored, noNets(), two))).toEqual([
      expect.stringMatching(/^services\[0\]\.ports\[0\]\.published: service a publishes 7000\/tcp \(ingress\), and service b publishes it in host mode in this apply/),
      expect.stringMatching(/^services\[1\]\.ports\[0\]\.published: service b publishes 7000\/tcp \(host\), and service a publishes it in ingress mode/),
    ]);
  });

  it('accepts the same service applied again, another protocol on the port, and host ports shared as before', () => {
    expect(() => prepareIngress(stored, noNets(), setOf(serviceYaml('web', 'ports: [{published: 8080, target: 81}]')))).not.toThrow();
    expect(() => prepareIngress(stored, noNets(), setOf(serviceYaml('dns', 'ports: [{published: 8080, target: 53, protocol: udp}]')))).not.toThrow();
    expect(() => prepareIngress(stored, noNets(), setOf(serviceYaml('admin2', 'ports: [{published: 9000, target: 9000, mode: host}]')))).not.toThrow();
  });

  it('adds the implicit ingress network once, unless stored or applied; refuses a default subnet already taken', () => {
    const set = setOf(serviceYaml('api', 'ports: [{published: 8088, target: 80}]'));
    expect(prepareIngress(stored, noNets(), set).networks).toEqual([{ name: 'ingress', subnet: '10.255.0.0/16', internal: false, slicePrefix: 24 }]);
    const own = { name: 'ingress', spec: { name: 'ingress', subnet: '10.77.0.0/16', internal: false, slicePrefix: 24 }, slices: {}, addresses: {}, createdAt: 0, updatedAt: 0 };
    expect(prepareIngress(stored, noNets([own]), set).networks).toEqual([]);
    const clash = { ...own, name: 'lan', spec: { ...own.spec, name: 'lan', subnet: '10.255.4.0/24' } };
    expect(problemsOf(() => prepareIngress(stored, noNets([clash]), set))).toEqual([
      expect.stringMatching(/^services\[0\]\.ports: its ingress ports need the network ingress, which shoal makes with subnet 10\.255\.0\.0\/16; that overlaps 10\.255\.4\.0\/24 of network lan: apply a Network named ingress/),
    ]);
  });
});

describe('an ingress port no node opens', () => {
  const web = setOf(serviceYaml('web', 'ports: [{published: 8080, target: 80}, {published: 5353, target: 53, protocol: udp}]'));
  const hostOnly = setOf(serviceYaml('web', 'ports: [{published: 8080, target: 80, mode: host}]'));

  it('warns, naming the service and its ports, when every node says it does not run the mesh', () => {
    const state = new StateBuilder().node('n1', { name: 'n1', ingress: false }).node('n2', { name: 'n2', ingress: false }).build();
    const w = ingressWarnings(state, web);
    expect(w).toHaveLength(1);
    expect(w[0]).toContain('service web: ingress ports 8080/tcp, 5353/udp open on no node: no node runs the routing mesh (n1, n2');
    expect(w[0]).toContain('mode: host');
    // A host-mode port is opened by Docker on the task's node: nothing to say.
    expect(ingressWarnings(state, hostOnly)).toEqual([]);
  });

  it('says nothing when one node runs it, or when a node\'s record does not say (an older release)', () => {
    expect(ingressWarnings(new StateBuilder().node('n1', { ingress: false }).node('n2', { ingress: true }).build(), web)).toEqual([]);
    expect(ingressWarnings(new StateBuilder().node('n1', { ingress: false }).node('n2').build(), web)).toEqual([]);
  });

  it('asks feature level 6 for a node record that says whether it runs the mesh', () => {
    const node = { id: 'n1', state: 'ready' };
    expect(compatCommand({ op: 'put', collection: 'shoal.nodes', id: 'n1', doc: node }).featureLevel).toBeLessThan(featureLevelIngress);
    expect(compatCommand({ op: 'put', collection: 'shoal.nodes', id: 'n1', doc: { ...node, ingress: false } }).featureLevel).toBe(featureLevelIngress);
  });
});
