// A stack's service answers by its compose name on the networks it is on (net/dns-view.ts):
// inside stack `app`, `cache` is app-cache; the shoal name answers too; a short name two stacks on
// one network share, or one that is a service's own name, is not a guess.

import { describe, expect, it } from 'vitest';
import { decide } from '../../net/dns-answers.ts';
import { dnsView } from '../../net/dns-view.ts';
import { cluster, networkState } from '../net/service-dns-fixtures.ts';

const yaml = (name: string): string => `apiVersion: shoal/v1\nkind: Service\nname: ${name}\nimage: busybox:1.36\nnetworks: [front]\n`;

function view(extra: (c: ReturnType<typeof cluster>) => void) {
  const c = cluster();
  extra(c);
  return dnsView(c.control.build(), networkState(c.networks), 'n1');
}

const a = (v: ReturnType<typeof view>, name: string) => decide(v, 'front', { name, type: 'A', class: 'IN' });

describe('stack names in the service DNS', () => {
  it('answers a stack service by its compose name and by its shoal name; a shared short name is not answered', () => {
    const v = view((c) => {
      c.control.service(yaml('app-cache'), { source: 'stack:app' }).placed('cache1', 'app-cache', 1, 'n1', 'running');
      c.control.service(yaml('other-queue'), { source: 'stack:other' }).placed('q1', 'other-queue', 1, 'n1', 'running');
      c.control.service(yaml('app-queue'), { source: 'stack:app' }).placed('q2', 'app-queue', 1, 'n1', 'running');
      // Named like a stack's but made by hand: no short name.
      c.control.service(yaml('app-manual')).placed('m1', 'app-manual', 1, 'n1', 'running');
      // A stack service whose short name is another service's own name: that service keeps it.
      c.control.service(yaml('app-web'), { source: 'stack:app' }).placed('w1', 'app-web', 1, 'n1', 'running');
      Object.assign(c.networks[0]?.addresses ?? {}, { cache1: '10.61.0.20', q1: '10.61.0.21', q2: '10.61.0.22', m1: '10.61.0.23', w1: '10.61.0.24' });
    });
    expect(a(v, 'cache')).toEqual({ kind: 'records', addresses: ['10.61.0.20'] });
    expect(a(v, 'app-cache')).toEqual({ kind: 'records', addresses: ['10.61.0.20'] });
    expect(a(v, 'queue')).toEqual({ kind: 'forward' });
    expect(a(v, 'manual')).toEqual({ kind: 'forward' });
    expect(a(v, 'web')).toEqual({ kind: 'records', addresses: ['10.61.0.9', '10.61.0.10', '10.61.1.2'] });
    // A short name is one of ours: its AAAA is answered here (empty), never sent upstream.
    expect(decide(v, 'front', { name: 'cache', type: 'AAAA', class: 'IN' })).toEqual({ kind: 'records', addresses: [] });
  });
});
