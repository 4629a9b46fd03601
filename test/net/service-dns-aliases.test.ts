// A service's network aliases (spec networkAliases) in the service DNS (net/dns-view.ts): an
// alias answers on its network only, with the service's tasks there; two services giving one
// alias are both answered (as Docker does); a service's own name is never hidden by an alias.

import { describe, expect, it } from 'vitest';
import { decide, type Decision } from '../../net/dns-answers.ts';
import { dnsView, type DnsView } from '../../net/dns-view.ts';
import { serviceYaml } from '../control/state-builder.ts';
import { cluster, networkState } from './service-dns-fixtures.ts';

function view(edit: (c: ReturnType<typeof cluster>) => void): DnsView {
  const c = cluster();
  edit(c);
  return dnsView(c.control.build(), networkState(c.networks), 'n1');
}

const a = (v: DnsView, network: string, name: string, type = 'A'): Decision => decide(v, network, { name, type, class: 'IN' });
const records = (...addresses: string[]): Decision => ({ kind: 'records', addresses });

describe('network aliases in the service DNS', () => {
  it('answers an alias with the service\'s tasks on that network, under every documented form, and not on its other networks', () => {
    const v = view((c) => {
      c.control.service(serviceYaml('pg', 'networks: [front, back]\nnetworkAliases: {back: [postgres, database]}'))
        .placed('pg1', 'pg', 1, 'n1', 'running');
      Object.assign(c.networks[0]?.addresses ?? {}, { pg1: '10.61.0.30' });
      Object.assign(c.networks[1]?.addresses ?? {}, { pg1: '10.62.0.30' });
    });
    for (const name of ['postgres', 'database', 'postgres.back', 'tasks.postgres.back.shoal', 'POSTGRES.']) {
      expect(a(v, 'back', name), name).toEqual(records('10.62.0.30'));
    }
    // The service's own name still answers on both; the alias is back's only (front forwards it).
    expect(a(v, 'back', 'pg')).toEqual(records('10.62.0.30'));
    expect(a(v, 'front', 'pg')).toEqual(records('10.61.0.30'));
    expect(a(v, 'front', 'postgres.back')).toEqual({ kind: 'nxdomain' });
    expect(v.services.has('postgres')).toBe(true);
    expect(v.networks.get('front')?.services.has('postgres')).toBe(false);
    // A known name with no record of the type: an empty NOERROR, never forwarded.
    expect(a(v, 'back', 'postgres', 'AAAA')).toEqual(records());
  });

  it('answers an alias two services give on one network with both services\' tasks, sorted by address', () => {
    const v = view((c) => {
      c.control.service(serviceYaml('blue', 'networks: [front]\nnetworkAliases: {front: [www]}')).placed('b1', 'blue', 1, 'n1', 'running');
      c.control.service(serviceYaml('green', 'networks: [front]\nnetworkAliases: {front: [www]}')).placed('g1', 'green', 1, 'n2', 'running');
      Object.assign(c.networks[0]?.addresses ?? {}, { b1: '10.61.0.41', g1: '10.61.1.40' });
    });
    expect(a(v, 'front', 'www')).toEqual(records('10.61.0.41', '10.61.1.40'));
    expect(a(v, 'front', 'blue')).toEqual(records('10.61.0.41'));
  });

  it('never lets an alias hide a service\'s own name, and leaves out tasks that do not count', () => {
    const v = view((c) => {
      // `web` is a service on front: an alias web of another service does not take it over.
      c.control.service(serviceYaml('proxy', 'networks: [front]\nnetworkAliases: {front: [web, edge]}'))
        .placed('p1', 'proxy', 1, 'n1', 'running')
        .placed('p2', 'proxy', 2, 'n1', 'starting');
      Object.assign(c.networks[0]?.addresses ?? {}, { p1: '10.61.0.50', p2: '10.61.0.51' });
    });
    expect(a(v, 'front', 'web')).toEqual(records('10.61.0.9', '10.61.0.10', '10.61.1.2'));
    expect(a(v, 'front', 'edge')).toEqual(records('10.61.0.50'));
  });

  it('names an alias of a service with no task running (empty), as its own name', () => {
    const v = view((c) => {
      c.control.service(serviceYaml('cold', 'networks: [front]\nnetworkAliases: {front: [sleepy]}'));
    });
    expect(a(v, 'front', 'sleepy')).toEqual(records());
  });
});
