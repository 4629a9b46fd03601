// A Service's fixed addresses (src/resources/spec/network-addresses.ts; issue 39's compose
// ipv4_address): read sorted and stored with the schema's default; refused with their path when
// not an IPv4 address, on a network the service is not on, with more than one replica, global,
// or updated start-first; at apply (src/control/network-apply.ts), outside the network's subnet,
// on a slice's first, gateway or last address, or another service's. A change replaces the task;
// a record with any needs feature level 6. The allocation is in test/control/address-allocator.test.ts.

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, renderService, specChange, type Problem, type ServiceSpec } from '../../../src/resources/spec/index.ts';
import { serviceSpecSchema } from '../../../src/resources/spec/service-spec.ts';
import { fixedAddressProblem } from '../../../src/resources/spec/network-addresses.ts';
import { checkNetworks } from '../../../src/control/network-apply.ts';
import type { NetworkState, NetworkRecord } from '../../../src/resources/network-resources.ts';
import type { ControlState } from '../../../src/resources/state.ts';
import { compatCommand } from '../../../src/resources/record-compat.ts';
import { controlFeatureLevel, servicesCollection } from '../../../src/resources/collections.ts';
import { featureLevelContainerSettings } from '../../../src/base/feature-level.ts';

const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'db', image: 'busybox:local', networks: ['back'], ...fields });

function one(fields: Record<string, unknown>): ServiceSpec {
  const s = parseSpecObjects([svc(fields)]).services[0];
  if (s === undefined) throw new Error('none');
  return s;
}

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('bad_request');
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

describe('a service\'s fixed addresses: the spec', () => {
  it('reads them, none by default, stores and renders them back', () => {
    expect(one({}).networkAddresses).toEqual({});
    const s = one({ networks: ['front', 'back'], networkAddresses: { front: '10.30.0.9', back: '10.20.0.50' } });
    expect(s.networkAddresses).toEqual({ back: '10.20.0.50', front: '10.30.0.9' });
    expect(Object.keys(s.networkAddresses)).toEqual(['back', 'front']);
    expect(serviceSpecSchema.parse(JSON.parse(JSON.stringify(s)))).toEqual(s);
    expect(one(renderService(s)).networkAddresses).toEqual(s.networkAddresses);
    const { networkAddresses: _n, ...older } = JSON.parse(JSON.stringify(s)) as Record<string, unknown>;
    expect(serviceSpecSchema.parse(older).networkAddresses).toEqual({});
  });

  it('refuses, with their paths: not IPv4, a network the service is not on, two replicas, global, start-first', () => {
    expect(problemsOf(() => one({ networkAddresses: { back: 'fd00::5' } }))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses\.back: "fd00::5" is not an IPv4 address/)]);
    expect(problemsOf(() => one({ networkAddresses: { back: 5 } }))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses\.back: the number 5 is not an IPv4 address/)]);
    expect(problemsOf(() => one({ networkAddresses: { front: '10.20.0.50' } }))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses\.front: the service is not on the network front/)]);
    expect(problemsOf(() => one({ replicas: 2, networkAddresses: { back: '10.20.0.50' } }))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses: the service has 2 replicas, and one address can be only one task's/)]);
    expect(problemsOf(() => one({ mode: 'global', networkAddresses: { back: '10.20.0.50' } }))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses: a global service runs a task on every node/)]);
    expect(problemsOf(() => one({ update: { order: 'start-first' }, networkAddresses: { back: '10.20.0.50' } }))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses: a service with a fixed address is updated stop-first/)]);
    // One replica, or none (scaled to zero), is fine.
    expect(one({ replicas: 0, networkAddresses: { back: '10.20.0.50' } }).networkAddresses).toEqual({ back: '10.20.0.50' });
  });

  it('is a change that replaces the task, and asks feature level 6 of a record that has any', () => {
    expect(specChange(one({}), one({ networkAddresses: { back: '10.20.0.50' } }))).toBe('replace');
    expect(specChange(one({ networkAddresses: { back: '10.20.0.50' } }), one({ networkAddresses: { back: '10.20.0.51' } }))).toBe('replace');
    const record = (networkAddresses: Record<string, string>) => ({ name: 'db', spec: { name: 'db', networkAddresses }, previousSpec: null });
    const plain = compatCommand({ op: 'put', collection: servicesCollection, id: 'db', doc: record({}) });
    expect(plain).toEqual({ cmd: { op: 'put', collection: servicesCollection, id: 'db', doc: { name: 'db', spec: { name: 'db' }, previousSpec: null } }, featureLevel: controlFeatureLevel });
    const set = compatCommand({ op: 'put', collection: servicesCollection, id: 'db', doc: record({ back: '10.20.0.50' }) });
    expect(set.featureLevel).toBe(featureLevelContainerSettings);
  });
});

describe('a service\'s fixed addresses: at apply', () => {
  const back: NetworkRecord = { name: 'back', spec: { name: 'back', subnet: '10.20.0.0/16', internal: false, slicePrefix: 24 }, slices: {}, addresses: {}, createdAt: 0, updatedAt: 0 };
  const nets: NetworkState = { revision: 1, networks: new Map([['back', { value: back, rev: 1 }]]), policies: new Map() };
  const stored = (name: string, networkAddresses: Record<string, string>): ControlState => ({
    services: new Map([[name, { value: { name, spec: one({ name, networkAddresses }) }, rev: 2 }]]),
  }) as unknown as ControlState;
  const set = (...specs: Record<string, unknown>[]) => parseSpecObjects(specs.map((f) => svc(f)));

  it('says why an address cannot be fixed: outside the subnet, the network\'s own, a gateway, a slice\'s first or last', () => {
    const spec = back.spec;
    expect(fixedAddressProblem(spec, '10.20.0.50')).toBeNull();
    expect(fixedAddressProblem(spec, '10.20.255.254')).toBeNull();
    expect(fixedAddressProblem(spec, '10.21.0.50')).toBe('10.21.0.50 is not in the subnet 10.20.0.0/16 of network back: pick an address inside it');
    expect(fixedAddressProblem(spec, '10.20.0.0')).toMatch(/^10\.20\.0\.0 is the network's own address \(network back gives each node a \/24 slice of 10\.20\.0\.0\/16/);
    expect(fixedAddressProblem(spec, '10.20.7.1')).toMatch(/^10\.20\.7\.1 is a node's gateway on the network/);
    expect(fixedAddressProblem(spec, '10.20.7.0')).toMatch(/^10\.20\.7\.0 is the first address of a slice/);
    expect(fixedAddressProblem(spec, '10.20.7.255')).toMatch(/^10\.20\.7\.255 is the last address of a slice/);
  });

  it('refuses, at the service\'s path, an address outside the subnet, a gateway, and one another service fixes (stored or in the same apply)', () => {
    expect(problemsOf(() => checkNetworks(nets, set({ networkAddresses: { back: '10.99.0.5' } })))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses\.back: 10\.99\.0\.5 is not in the subnet 10\.20\.0\.0\/16/)]);
    expect(problemsOf(() => checkNetworks(nets, set({ networkAddresses: { back: '10.20.3.1' } })))).toEqual([expect.stringMatching(/^services\[0\]\.networkAddresses\.back: 10\.20\.3\.1 is a node's gateway/)]);
    expect(problemsOf(() => checkNetworks(nets, set({ networkAddresses: { back: '10.20.0.50' } }), stored('cache', { back: '10.20.0.50' }))))
      .toEqual(['services[0].networkAddresses.back: 10.20.0.50 on network back is already the fixed address of service cache: pick another, or drop it there first']);
    expect(problemsOf(() => checkNetworks(nets, set({ networkAddresses: { back: '10.20.0.50' } }, { name: 'cache', networkAddresses: { back: '10.20.0.50' } }))))
      .toEqual(['services[1].networkAddresses.back: 10.20.0.50 on network back is already the fixed address of service db (services[0] of this apply): pick another, or drop it there first']);
  });

  it('takes an address the service itself held (a re-apply), another free one, and one on a network of the same apply', () => {
    expect(() => checkNetworks(nets, set({ networkAddresses: { back: '10.20.0.50' } }), stored('db', { back: '10.20.0.50' }))).not.toThrow();
    expect(() => checkNetworks(nets, set({ networkAddresses: { back: '10.20.0.51' } }), stored('cache', { back: '10.20.0.50' }))).not.toThrow();
    const withNet = parseSpecObjects([{ apiVersion: 'shoal/v1', kind: 'Network', name: 'side', subnet: '10.40.0.0/24' }, svc({ networks: ['side'], networkAddresses: { side: '10.40.0.9' } })]);
    expect(() => checkNetworks(nets, withNet)).not.toThrow();
  });
});
