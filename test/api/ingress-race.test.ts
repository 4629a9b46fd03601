// Two applies racing for one ingress port (issue 38; src/resources/ingress-ports.ts): each
// decides on a store without the other's service, so the apply-time check alone would let both
// land. The port record written in the same transaction as the service makes the second write
// fail, and its write path decides again, now seeing the first: refused, both services named.
//
// The race is made certain, not left to timing: proposals are held until both applies have
// decided (each read the same store), then released together.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servicesCollection } from '../../src/resources/collections.ts';
import { ingressPortsCollection } from '../../src/resources/ingress-ports.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

const svc = (name: string, port: Record<string, unknown>) => ({ apiVersion: 'shoal/v1', kind: 'Service', name, image: 'busybox:local', command: ['sleep', '1000'], replicas: 1, ports: [port] });

/** Holds the first `n` proposals until all `n` have been made, then lets them go together; counts every proposal. */
function holdProposals(n: number): { count: () => number; restore: () => void } {
  const node = s.node;
  const original = node.propose.bind(node);
  let held: (() => void)[] = [];
  let count = 0;
  node.propose = (data, opts) => {
    count++;
    if (count > n) return original(data, opts);
    return new Promise<void>((resolve) => {
      held.push(resolve);
      if (held.length === n) { for (const go of held) go(); held = []; }
    }).then(() => original(data, opts));
  };
  return { count: () => count, restore: () => { node.propose = original; } };
}

async function race(a: object, b: object): Promise<{ codes: number[]; bodies: { code?: string; message?: string; details?: { problems?: { path: string; message: string }[] } }[]; proposals: number }> {
  const hold = holdProposals(2);
  try {
    const res = await Promise.all([a, b].map((doc) => s.app.inject({ method: 'POST', url: '/v1/apply?resolveImage=never', payload: { documents: [doc] } })));
    return { codes: res.map((r) => r.statusCode), bodies: res.map((r) => r.json()), proposals: hold.count() };
  } finally {
    hold.restore();
  }
}

describe('two applies racing for one ingress port', () => {
  it('cannot both land: the second decides again and is refused, naming the first', async () => {
    const r = await race(svc('alpha', { published: 8080, target: 80 }), svc('beta', { published: 8080, target: 80 }));
    // Both decided on the same store (their two proposals were held together); the one that
    // decided again was refused without proposing.
    expect(r.proposals).toBe(2);
    expect([...r.codes].sort()).toEqual([200, 400]);
    const landed = r.codes[0] === 200 ? 'alpha' : 'beta';
    const refused = landed === 'alpha' ? 'beta' : 'alpha';
    const problem = r.bodies[r.codes.indexOf(400)]?.details?.problems?.[0];
    expect(problem?.path).toBe('services[0].ports[0].published');
    expect(problem?.message).toContain(`service ${refused} publishes 8080/tcp (ingress), and service ${landed} publishes it in ingress mode`);
    expect(s.store.get(servicesCollection, landed)).toBeDefined();
    expect(s.store.get(servicesCollection, refused)).toBeUndefined();
    expect(s.store.get(ingressPortsCollection, 'tcp-8080')?.doc).toMatchObject({ protocol: 'tcp', port: 8080, service: landed, mode: 'ingress' });
  });

  it('an ingress port and a host port of the same number cannot both land either', async () => {
    const r = await race(svc('gamma', { published: 9090, target: 80 }), svc('delta', { published: 9090, target: 80, mode: 'host' }));
    expect([...r.codes].sort()).toEqual([200, 400]);
    const landed = r.codes[0] === 200 ? 'gamma' : 'delta';
    expect(s.store.get(servicesCollection, landed)).toBeDefined();
    expect(s.store.get(servicesCollection, landed === 'gamma' ? 'delta' : 'gamma')).toBeUndefined();
  });

  it('ports that do not clash still both land: another protocol, and host ports shared', async () => {
    const udp = await race(svc('tcp7000', { published: 7000, target: 80 }), svc('udp7000', { published: 7000, target: 80, protocol: 'udp' }));
    expect(udp.codes).toEqual([200, 200]);
    const host = await race(svc('h1', { published: 7100, target: 80, mode: 'host' }), svc('h2', { published: 7100, target: 80, mode: 'host' }));
    // The same record serializes them (one decides again), and both land: host ports may be shared.
    expect(host.codes).toEqual([200, 200]);
    expect(host.proposals).toBe(3);
    expect(s.store.get(servicesCollection, 'h1')).toBeDefined();
    expect(s.store.get(servicesCollection, 'h2')).toBeDefined();
  });

  it('an apply that leaves a service\'s ports as they were writes no port record', async () => {
    const before = s.store.get(ingressPortsCollection, 'tcp-7000')?.rev;
    const res = await s.app.inject({ method: 'POST', url: '/v1/apply?resolveImage=never', payload: { documents: [{ ...svc('tcp7000', { published: 7000, target: 80 }), replicas: 2 }] } });
    expect(res.statusCode, res.body).toBe(200);
    expect(s.store.get(ingressPortsCollection, 'tcp-7000')?.rev).toBe(before);
  });
});
