// Networks and firewall policies through the API (inject, one node running the control plane):
// applied with services in one strict apply, listed and inspected, refused with paths when they
// do not fit the store (an unknown network, an overlapping or changed subnet), removed (a
// network only once no service names it), and their collections closed to /v1/docs.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, problemPaths } from '../api/expect-error.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode({ control: true }); });
afterAll(async () => { await s.close(); });

const doc = (kind: string, fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind, ...fields });
const apply = (documents: unknown[]) => s.app.inject({ method: 'POST', url: '/v1/apply', payload: { documents } });

describe('networks and firewall policies', () => {
  it('are applied with the services that name them, in one apply', async () => {
    const res = await apply([
      doc('Service', { name: 'web', image: 'busybox:local', command: ['sleep', '3600'], networks: ['front'] }),
      doc('Network', { name: 'front', subnet: '10.61.0.0/16' }),
      doc('Network', { name: 'back', subnet: '10.62.0.0/16', internal: true }),
      doc('FirewallPolicy', { name: 'web-db', allow: [{ from: { services: ['web'] }, to: { networks: ['back'] }, ports: [5432] }] }),
    ]);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      services: [{ name: 'web', outcome: 'created' }],
      networks: [{ name: 'front', outcome: 'created' }, { name: 'back', outcome: 'created' }],
      firewallPolicies: [{ name: 'web-db', outcome: 'created' }],
    });
    const list = (await s.app.inject({ url: '/v1/networks' })).json() as { items: { name: string; services: string[]; record: { spec: { slicePrefix: number } } }[] };
    expect(list.items.map((n) => [n.name, n.services, n.record.spec.slicePrefix])).toEqual([['back', [], 24], ['front', ['web'], 24]]);
    const policy = (await s.app.inject({ url: '/v1/firewall-policies/web-db' })).json() as { policy: { record: { spec: { allow: unknown[] } } } };
    expect(policy.policy.record.spec.allow).toEqual([{ from: { services: ['web'], networks: [] }, to: { services: [], networks: ['back'] }, ports: [{ port: 5432, protocol: 'tcp' }] }]);
    const again = (await apply([doc('Network', { name: 'back', subnet: '10.62.0.0/16', internal: true })])).json() as { rev: number | null; networks: unknown[] };
    expect(again).toMatchObject({ rev: null, networks: [{ name: 'back', outcome: 'unchanged' }] });
  });

  it('refuses, with paths, a service on an unknown network, an overlapping subnet and a changed one', async () => {
    const res = await apply([
      doc('Service', { name: 'api', image: 'busybox:local', networks: ['front', 'nowhere'] }),
      doc('Network', { name: 'iot', subnet: '10.61.128.0/24' }),
      doc('Network', { name: 'back', subnet: '10.63.0.0/16', internal: true }),
    ]);
    expect(problemPaths(expectError(res, 'bad_request'))).toEqual(['networks[0].subnet', 'networks[1].subnet', 'services[0].networks[1]']);
    expect(res.body).toContain('no network \\"nowhere\\"');
    expect((await s.app.inject({ url: '/v1/services/api' })).statusCode).toBe(404);
  });

  it('removes a network only once no service names it', async () => {
    const refused = await s.app.inject({ method: 'DELETE', url: '/v1/networks/front' });
    expect(problemPaths(expectError(refused, 'bad_request'))).toEqual(['params.name']);
    expect(refused.body).toContain('used by web');
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/services/web' })).statusCode).toBe(200);
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/networks/front' })).json()).toMatchObject({ name: 'front', removed: true });
    expectError(await s.app.inject({ url: '/v1/networks/front' }), 'not_found');
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/firewall-policies/web-db' })).statusCode).toBe(200);
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/firewall-policies/web-db' }), 'not_found');
  });

  it('gives the node a slice and each task of an attached service an address from it (the leader\'s allocator)', async () => {
    const res = await apply([
      doc('Network', { name: 'iot', subnet: '10.70.0.0/24' }),
      doc('Service', { name: 'sensor', image: 'busybox:local', command: ['sleep', '3600'], replicas: 2, networks: ['iot'] }),
    ]);
    expect(res.statusCode, res.body).toBe(200);
    type View = { network: { slices: Record<string, string>; record: { addresses: Record<string, string> } } };
    const view = async (): Promise<View> => (await s.app.inject({ url: '/v1/networks/iot' })).json() as View;
    const deadline = Date.now() + 15_000;
    while (Object.keys((await view()).network.record.addresses).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const v = await view();
    expect(Object.values(v.network.slices)).toEqual(['10.70.0.0/28']);
    expect(Object.values(v.network.record.addresses).sort()).toEqual(['10.70.0.2', '10.70.0.3']);
    // Scaled to one: the finished task gives its address back.
    await s.app.inject({ method: 'POST', url: '/v1/services/sensor/scale', payload: { replicas: 1 } });
    while (Object.keys((await view()).network.record.addresses).length > 1 && Date.now() < deadline + 15_000) await new Promise((r) => setTimeout(r, 20));
    expect(Object.keys((await view()).network.record.addresses)).toHaveLength(1);
  });

  it('keeps their collections closed to /v1/docs', async () => {
    const res = await s.app.inject({ method: 'PUT', url: '/v1/docs/shoal.networks/x', payload: { name: 'x' } });
    expect(expectError(res, 'bad_request')).toMatchObject({ problems: [{ message: expect.stringContaining('shoal network rm') }] });
  });
});
