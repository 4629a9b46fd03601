// The routing mesh's gaps at the API (issue 38; docs/network.md, "Ingress"): an apply of a service
// with an ingress port while no node runs the mesh is accepted with a warning in its answer, and a
// rollback that would bring back an ingress port another service has taken since is refused with
// both named, as an apply is.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodesCollection, servicesCollection } from '../../src/resources/collections.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
// One node that says it does not run the mesh (as in `shoal dev`, or with ingress disabled).
beforeAll(async () => {
  s = await singleNode({ control: true, ingress: false });
  const deadline = Date.now() + 10_000;
  while ((s.store.get(nodesCollection, 'solo')?.doc as { ingress?: boolean } | undefined)?.ingress !== false) {
    if (Date.now() > deadline) throw new Error('the node did not write ingress: false in its record');
    await new Promise((r) => setTimeout(r, 25));
  }
});
afterAll(async () => { await s?.close(); });

const svc = (name: string, ports: Record<string, unknown>[]) => ({ apiVersion: 'shoal/v1', kind: 'Service', name, image: 'busybox:local', command: ['sleep', '1000'], replicas: 1, ports });

async function apply(doc: object, dryRun = false): Promise<{ status: number; body: { warnings?: string[]; details?: { problems?: { path: string; message: string }[] } } }> {
  const r = await s.app.inject({ method: 'POST', url: `/v1/apply?resolveImage=never${dryRun ? '&dryRun=true' : ''}`, payload: { documents: [doc] } });
  return { status: r.statusCode, body: r.json() };
}

describe('an apply of an ingress port when no node runs the mesh', () => {
  it('is accepted with a warning naming the service and the port, in a dry run too', async () => {
    for (const dryRun of [true, false]) {
      const r = await apply(svc('web', [{ published: 8080, target: 80 }]), dryRun);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.warnings).toEqual([expect.stringContaining('service web: ingress port 8080/tcp open on no node: no node runs the routing mesh (solo')]);
    }
    expect(s.store.get(servicesCollection, 'web')).toBeDefined();
  });

  it('says nothing for a host-mode port', async () => {
    const r = await apply(svc('agent', [{ published: 9100, target: 9100, mode: 'host' }]));
    expect(r.status).toBe(200);
    expect(r.body.warnings).toBeUndefined();
  });
});

describe('a rollback', () => {
  it('is refused, both services named, when another service took its previous spec\'s ingress port since', async () => {
    expect((await apply(svc('alpha', [{ published: 7000, target: 80 }]))).status).toBe(200);
    // alpha moves to 7001 (its previous spec keeps 7000), and beta takes 7000: accepted.
    expect((await apply(svc('alpha', [{ published: 7001, target: 80 }]))).status).toBe(200);
    expect((await apply(svc('beta', [{ published: 7000, target: 80 }]))).status).toBe(200);
    const r = await s.app.inject({ method: 'POST', url: '/v1/services/alpha/rollback', payload: {} });
    expect(r.statusCode, r.body).toBe(400);
    const problems = (r.json() as { details: { problems: { path: string; message: string }[] } }).details.problems;
    expect(problems).toEqual([{ path: 'previousSpec.ports[0].published', message: expect.stringContaining('service alpha publishes 7000/tcp (ingress), and service beta publishes it in ingress mode') }]);
    // Nothing written: alpha still publishes 7001.
    expect((s.store.get(servicesCollection, 'alpha')?.doc as { spec: { ports: { published: number }[] } }).spec.ports[0]?.published).toBe(7001);
  });

  it('goes through when the port is free, and claims its record', async () => {
    expect((await apply(svc('gamma', [{ published: 7100, target: 80 }]))).status).toBe(200);
    expect((await apply(svc('gamma', [{ published: 7101, target: 80 }]))).status).toBe(200);
    const before = s.store.get('shoal.ingress-ports', 'tcp-7100')?.rev ?? 0;
    const r = await s.app.inject({ method: 'POST', url: '/v1/services/gamma/rollback', payload: {} });
    expect(r.statusCode, r.body).toBe(200);
    expect((s.store.get(servicesCollection, 'gamma')?.doc as { spec: { ports: { published: number }[] } }).spec.ports[0]?.published).toBe(7100);
    // Written again in the rollback's transaction: a racing apply of 7100 fails on it.
    expect(s.store.get('shoal.ingress-ports', 'tcp-7100')?.rev).toBeGreaterThan(before);
    expect(s.store.get('shoal.ingress-ports', 'tcp-7100')?.doc).toMatchObject({ service: 'gamma', mode: 'ingress' });
  });
});
