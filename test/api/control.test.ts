// The control plane's routes through inject(), on one node that runs the control plane (its
// leader loops, and its agent on an in-memory runtime): apply (strict, dry run, all or nothing,
// expectRevs), services (list, get, scale, rollback, rebalance, remove), nodes (list, get by id
// or name, availability, labels), tasks (filters, pages), the reserved collections refused by
// /v1/docs and /v1/txn, and the feature level a write needs.

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { servicesCollection } from '../../src/resources/collections.ts';
import { expectError, problemPaths } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

const webYaml = readFileSync(new URL('../../docs/examples/web.yaml', import.meta.url), 'utf8');
/** The example as a document: the tests below change one field of it at a time. */
const webDoc = parseYaml(webYaml) as Record<string, unknown> & { image: string };

interface ServiceView { name: string; rev: number; record: { specVersion: number; spec: { image: string; replicas: number | null }; previousSpec: unknown; updateStatus: { state: string } }; status: { desired: number; running: number; converged: boolean } }
interface TaskItem { id: string; service: string; slot: number | string; nodeId: string | null; nodeName: string | null; desired: string; observed: string; record: { specVersion: number } }
interface NodeView { id: string; name: string; rev: number; record: { availability: string; labels: Record<string, string> }; tasks: number; running: number }

let s: SingleNode;
beforeAll(async () => {
  s = await singleNode({ control: true });
  await until('the node registered', async () => (await get<{ items: NodeView[] }>('/v1/nodes')).items.length === 1);
});
afterAll(async () => { await s.close(); });

async function get<T>(url: string): Promise<T> {
  const res = await s.app.inject({ url });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as T;
}

const post = (url: string, payload?: unknown) => s.app.inject({ method: 'POST', url, ...(payload !== undefined ? { payload: payload as object } : {}) });

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const service = (name: string) => get<{ service: ServiceView; tasks: TaskItem[]; rev: number }>(`/v1/services/${name}`);
const converged = (name: string, running: number) => async () => {
  const v = await service(name);
  return v.service.status.converged && v.service.status.running === running;
};

describe('POST /v1/apply', () => {
  it('creates the example service, and its three tasks run', async () => {
    const res = await post('/v1/apply', { text: webYaml });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json() as { dryRun: boolean; rev: number; services: { name: string; outcome: string; specVersion: number }[] };
    expect(a).toMatchObject({ dryRun: false, services: [{ name: 'web', outcome: 'created', specVersion: 1 }] });
    expect(a.rev).toBeGreaterThan(0);
    await until('web converged with 3 running', converged('web', 3));
    const v = await service('web');
    expect(v.tasks.filter((t) => t.desired === 'running').map((t) => [t.slot, t.nodeName, t.observed])).toEqual([[1, 'solo', 'running'], [2, 'solo', 'running'], [3, 'solo', 'running']]);
    const again = (await post('/v1/apply', { text: webYaml })).json() as { rev: number | null; services: { outcome: string }[] };
    expect(again).toMatchObject({ rev: null, services: [{ outcome: 'unchanged' }] });
  });

  it('answers a dry run with what would change (the tasks a rolling update replaces) and writes nothing', async () => {
    const before = s.store.revision;
    const doc = { ...webDoc, image: 'busybox:v2' };
    const res = await post('/v1/apply?dryRun=true', { documents: [doc, { ...doc, name: 'api' }] });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json() as { dryRun: boolean; rev: null; services: { name: string; outcome: string; change?: string; replaces?: string[]; fields?: string[]; specVersion: number }[] };
    const running = (await service('web')).tasks.filter((t) => t.desired === 'running').map((t) => t.id);
    expect(a.dryRun).toBe(true);
    expect(a.rev).toBeNull();
    expect(a.services).toEqual([
      { name: 'web', outcome: 'updated', change: 'replace', replaces: running, fields: ['image'], specVersion: 2 },
      { name: 'api', outcome: 'created', specVersion: 1 },
    ]);
    expect(s.store.revision).toBe(before);
  });

  it('refuses the whole apply with every problem at once, with its path, and writes nothing', async () => {
    const before = s.store.revision;
    const text = `${webYaml}---
apiVersion: shoal/v1
kind: Service
name: db
image: busybox:local
replica: 2
update: {parallelism: 0}
---
apiVersion: shoal/v1
kind: Servce
name: x
`;
    const d = expectError(await post('/v1/apply', { text }), 'bad_request');
    expect(problemPaths(d)).toEqual(expect.arrayContaining(['services[1].replica', 'services[1].update.parallelism', 'documents[2].kind']));
    expect(s.store.revision).toBe(before);
    expect(s.store.get(servicesCollection, 'db')).toBeUndefined();
  });

  it('refuses a body with both or neither of documents and text, and JSON text that is not JSON', async () => {
    expectError(await post('/v1/apply', { documents: [], text: 'x' }), 'bad_request');
    expectError(await post('/v1/apply', {}), 'bad_request');
    expectError(await post('/v1/apply', { documents: [{ apiVersion: 'shoal/v1' }], format: 'json' }), 'bad_request');
    expect(problemPaths(expectError(await post('/v1/apply', { text: '{"a":', format: 'json' }), 'bad_request'))).toEqual(['documents']);
    expect(problemPaths(expectError(await post('/v1/apply', { documents: [] }), 'bad_request'))).toEqual(['documents']);
  });

  it('applies only at the revisions named in expectRevs', async () => {
    const v = await service('web');
    const doc = webDoc;
    const d = expectError(await post('/v1/apply', { documents: [doc], expectRevs: { web: v.service.rev - 1 } }), 'revision_mismatch');
    expect(d).toMatchObject({ service: 'web', expectedRev: v.service.rev - 1, currentRev: v.service.rev });
    const ok = await post('/v1/apply', { documents: [doc], expectRevs: { web: v.service.rev } });
    expect(ok.statusCode, ok.body).toBe(200);
  });
});

describe('services', () => {
  it('lists services sorted by name, with their status', async () => {
    const l = await get<{ items: ServiceView[]; rev: number }>('/v1/services');
    expect(l.items.map((x) => x.name)).toEqual(['web']);
    expect(l.items[0]?.status).toMatchObject({ desired: 3, running: 3, converged: true });
    expect(l.rev).toBeGreaterThan(0);
    expect((await get<{ items: ServiceView[] }>('/v1/services?consistency=stale')).items).toHaveLength(1);
  });

  it('scales a service, and refuses an unknown one, a bad count and a global service', async () => {
    const r = await post('/v1/services/web/scale', { replicas: 5 });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ outcome: 'updated', service: { name: 'web', record: { spec: { replicas: 5 } } } });
    await until('web converged with 5 running', converged('web', 5));
    expectError(await post('/v1/services/nope/scale', { replicas: 1 }), 'not_found');
    expect(problemPaths(expectError(await post('/v1/services/web/scale', { replicas: -1 }), 'bad_request'))).toEqual(['body.replicas']);
    await post('/v1/apply', { documents: [{ apiVersion: 'shoal/v1', kind: 'Service', name: 'agent', image: 'busybox:local', mode: 'global' }] });
    expect(problemPaths(expectError(await post('/v1/services/agent/scale', { replicas: 2 }), 'bad_request'))).toEqual(['body.replicas']);
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/services/agent' })).statusCode).toBe(200);
  });

  it('rolls back to the previous spec, and refuses a service that has none', async () => {
    expect(problemPaths(expectError(await post('/v1/services/web/rollback'), 'bad_request'))).toEqual(['params.name']);
    // Replace all five at once, each good as soon as it runs: the test waits for no monitor period.
    const doc = { ...webDoc, replicas: 5, update: { parallelism: 5, monitor: '0s' } };
    expect((await post('/v1/apply', { documents: [doc] })).json()).toMatchObject({ services: [{ outcome: 'updated', change: 'scale', specVersion: 1 }] });
    expect((await post('/v1/apply', { documents: [{ ...doc, image: 'busybox:v2' }] })).json()).toMatchObject({ services: [{ outcome: 'updated', change: 'replace', specVersion: 2 }] });
    await until('web updated to v2', async () => (await service('web')).service.record.updateStatus.state === 'completed');
    const r = await post('/v1/services/web/rollback', {});
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ specVersion: 1, service: { record: { spec: { image: webDoc.image }, updateStatus: { state: 'rolling-back' } } } });
    await until('web rolled back', async () => (await service('web')).service.record.updateStatus.state === 'rolled-back');
    const v = await service('web');
    expect(v.tasks.filter((t) => t.desired === 'running').every((t) => t.record.specVersion === 1)).toBe(true);
  });

  it('answers a rebalance step: balanced on one node, and not_found for an unknown service', async () => {
    await until('web settled', converged('web', 5));
    const r = await post('/v1/services/web/rebalance');
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ state: 'balanced', moved: null, rev: null, counts: [{ nodeName: 'solo', tasks: 5 }] });
    expectError(await post('/v1/services/nope/rebalance'), 'not_found');
    expectError(await post('/v1/services/web/rebalance', { now: true }), 'bad_request');
  });

  it('refuses an unknown service and a name that is not a DNS label', async () => {
    expectError(await s.app.inject({ url: '/v1/services/nope' }), 'not_found');
    expect(problemPaths(expectError(await s.app.inject({ url: '/v1/services/Bad_Name' }), 'bad_request'))).toEqual(['params.name']);
    expectError(await s.app.inject({ url: '/v1/services?consistency=eventual' }), 'bad_request');
  });
});

describe('tasks', () => {
  it('lists tasks with filters and in pages, and reads one', async () => {
    const all = await get<{ items: TaskItem[]; next: string | null }>('/v1/tasks?service=web&state=running');
    expect(all.items).toHaveLength(5);
    expect(all.items.every((t) => t.service === 'web' && t.observed === 'running' && t.nodeName === 'solo')).toBe(true);
    expect(all.items.map((t) => t.id)).toEqual([...all.items.map((t) => t.id)].sort());
    expect((await get<{ items: TaskItem[] }>('/v1/tasks?node=solo&state=running')).items).toHaveLength(5);
    const first = await get<{ items: TaskItem[]; next: string | null }>('/v1/tasks?service=web&state=running&limit=2');
    expect(first.items).toHaveLength(2);
    expect(first.next).toBe(first.items[1]?.id);
    const second = await get<{ items: TaskItem[] }>(`/v1/tasks?service=web&state=running&limit=2&after=${first.next ?? ''}`);
    expect(second.items[0]?.id).toBe(all.items[2]?.id);
    const one = await get<{ task: TaskItem }>(`/v1/tasks/${all.items[0]?.id ?? ''}`);
    expect(one.task).toEqual(all.items[0]);
    expectError(await s.app.inject({ url: '/v1/tasks/nope' }), 'not_found');
    expectError(await s.app.inject({ url: '/v1/tasks?node=nowhere' }), 'not_found');
    expect(problemPaths(expectError(await s.app.inject({ url: '/v1/tasks?state=sleeping&limit=0' }), 'bad_request')).sort()).toEqual(['query.limit', 'query.state']);
  });
});

describe('nodes', () => {
  it('lists nodes and reads one by id or name, with its tasks', async () => {
    const l = await get<{ items: NodeView[] }>('/v1/nodes');
    expect(l.items.map((n) => [n.name, n.tasks, n.running])).toEqual([['solo', 5, 5]]);
    const one = await get<{ node: NodeView; tasks: TaskItem[] }>('/v1/nodes/solo');
    expect(one.node.id).toBe('solo');
    expect(one.tasks.filter((t) => t.desired === 'running')).toHaveLength(5);
    expectError(await s.app.inject({ url: '/v1/nodes/nowhere' }), 'not_found');
  });

  it('sets availability and labels (a compare-and-set on the record)', async () => {
    const paused = await post('/v1/nodes/solo/availability', { availability: 'pause' });
    expect(paused.statusCode, paused.body).toBe(200);
    expect(paused.json()).toMatchObject({ node: { record: { availability: 'pause' } } });
    expect((await post('/v1/nodes/solo/availability', { availability: 'pause' })).json()).toMatchObject({ rev: null });
    expect((await post('/v1/nodes/solo/availability', { availability: 'active' })).json()).toMatchObject({ node: { record: { availability: 'active' } } });
    expect(problemPaths(expectError(await post('/v1/nodes/solo/availability', { availability: 'off' }), 'bad_request'))).toEqual(['body.availability']);
    const labelled = await post('/v1/nodes/solo/labels', { set: { rack: 'r1', room: 'attic' } });
    expect(labelled.json()).toMatchObject({ node: { record: { labels: { rack: 'r1', room: 'attic' } } } });
    expect((await post('/v1/nodes/solo/labels', { remove: ['room', 'absent'] })).json()).toMatchObject({ node: { record: { labels: { rack: 'r1' } } } });
    expectError(await post('/v1/nodes/solo/labels', { set: { rack: 'r2' }, remove: ['rack'] }), 'bad_request');
    // A bad key is named with its rule, not zod's "Invalid key in record".
    const badKey = await post('/v1/nodes/solo/labels', { set: { 'bad key': 'x' } });
    expect(expectError(badKey, 'bad_request').problems).toEqual([{ path: 'body.set.bad key', message: 'the key "bad key" is not a label key (letters, digits, and . _ - / inside)' }]);
    expectError(await post('/v1/nodes/nowhere/labels', { set: { a: 'b' } }), 'not_found');
  });
});

describe('reserved collections', () => {
  it('refuses writes through /v1/docs, naming the typed route, and allows reads', async () => {
    const before = s.store.revision;
    const d = expectError(await s.app.inject({ method: 'PUT', url: '/v1/docs/shoal.services/web', payload: { name: 'web' } }), 'bad_request');
    expect(problemPaths(d)).toEqual(['params.collection']);
    expect(JSON.stringify(d)).toContain('POST /v1/apply');
    const del = expectError(await s.app.inject({ method: 'DELETE', url: '/v1/docs/shoal.nodes/solo' }), 'bad_request');
    expect(JSON.stringify(del)).toContain('/v1/nodes/{ref}/availability');
    expectError(await s.app.inject({ method: 'PUT', url: '/v1/docs/shoal.future/x', payload: {} }), 'bad_request');
    expect(s.store.revision).toBe(before);
    expect((await s.app.inject({ url: '/v1/docs/shoal.services/web' })).json()).toMatchObject({ doc: { name: 'web' } });
  });

  it('refuses writes through /v1/txn, every one at once, and lets compares read them', async () => {
    const before = s.store.revision;
    const d = expectError(await post('/v1/txn', {
      compare: [],
      success: [{ op: 'put', collection: 'notes', id: 'a', doc: {} }, { op: 'delete', collection: 'shoal.tasks', id: 'x' }],
      failure: [{ op: 'put', collection: 'shoal.task-status', id: 'x', doc: {} }],
    }), 'bad_request');
    expect(problemPaths(d)).toEqual(['body.success.1.collection', 'body.failure.0.collection']);
    expect(s.store.revision).toBe(before);
    const ok = await post('/v1/txn', { compare: [{ collection: 'shoal.nodes', id: 'solo', target: 'exists', cmp: '=', value: true }], success: [{ op: 'put', collection: 'notes', id: 'a', doc: {} }] });
    expect(ok.json()).toMatchObject({ succeeded: true });
  });
});

describe('removing a service', () => {
  it('deletes its record; its tasks are shut down and reaped', async () => {
    const r = await s.app.inject({ method: 'DELETE', url: '/v1/services/web' });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ name: 'web', removed: true });
    expectError(await s.app.inject({ url: '/v1/services/web' }), 'not_found');
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/services/web' }), 'not_found');
    await until('its tasks reaped', async () => (await get<{ items: TaskItem[] }>('/v1/tasks?service=web')).items.length === 0);
  });
});

describe('a cluster below the control plane\'s feature level', () => {
  it('answers writes with feature_not_enabled and writes nothing', async () => {
    const old = await singleNode({ featureLevelMax: 1 });
    try {
      const before = old.store.revision;
      expectError(await old.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: webYaml } }), 'feature_not_enabled');
      expect(old.store.revision).toBe(before);
      const dry = await old.app.inject({ method: 'POST', url: '/v1/apply?dryRun=true', payload: { text: webYaml } });
      expect(dry.json()).toMatchObject({ dryRun: true, services: [{ name: 'web', outcome: 'created' }] });
      expect((await old.app.inject({ url: '/v1/services' })).json()).toMatchObject({ items: [] });
    } finally {
      await old.close();
    }
  });
});

describe('apply --prune', () => {
  it('prunes only what its source created and no longer names (--prune), never a service of another source', async () => {
    const doc = (name: string) => ({ apiVersion: 'shoal/v1', kind: 'Service', name, image: 'busybox:local', command: ['sleep', '1000'], replicas: 1 });
    expect((await post('/v1/apply', { documents: [doc('pa'), doc('pb')], source: 'stack-a' })).statusCode).toBe(200);
    expect((await post('/v1/apply', { documents: [doc('other')], source: 'stack-b' })).statusCode).toBe(200);
    const dry = (await post('/v1/apply?dryRun=true', { documents: [doc('pa')], source: 'stack-a', prune: true })).json() as { services: { name: string; outcome: string }[] };
    expect(dry.services).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'pb', outcome: 'removed' })]));
    expect((await get<{ items: { name: string }[] }>('/v1/services')).items.map((x) => x.name)).toEqual(expect.arrayContaining(['pa', 'pb', 'other']));
    const res = (await post('/v1/apply', { documents: [doc('pa')], source: 'stack-a', prune: true })).json() as { services: { name: string; outcome: string }[] };
    expect(res.services.map((x) => [x.name, x.outcome]).sort()).toEqual([['pa', 'unchanged'], ['pb', 'removed']]);
    const names = (await get<{ items: { name: string }[] }>('/v1/services')).items.map((x) => x.name);
    expect(names).toContain('other');
    expect(names).not.toContain('pb');
    expectError(await post('/v1/apply', { documents: [doc('pa')], prune: true }), 'bad_request');
  });
});
