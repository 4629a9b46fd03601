// The disruption budget through the API (docs/control-plane.md, "The disruption budget"), on one
// node that runs the control plane (its loops, and its agent on an in-memory runtime): the budget
// in a service's status, a drill refused past it (and forced), a drain that answers what waits and
// then waits (its moves one at a time, as the budget allows; a lone node has nowhere to move them),
// a forced drain and a forced update recorded on the service.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servicesCollection } from '../../src/resources/collections.ts';
import { catalogued, expectError, problemPaths } from './expect-error.ts';
import { checkDrillBudget } from '../../src/cli/drill-cluster.ts';
import { listeningSingleNode, type SingleNode } from './single-node.ts';

const webYaml = 'apiVersion: shoal/v1\nkind: Service\nname: web\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 3\nupdate: {monitor: 0s}\n';

interface Disruption { limit: string; maxUnavailable: number; unavailable: { slot: string; why: string }[]; allowed: number; waiting: string | null; forced: { cause: string; nodeId: string | null; specVersion: number | null; by: string | null; message: string }[] }
interface ServiceView { record: { specVersion: number; forcedDisruptions?: unknown[] }; status: { running: number; converged: boolean; disruption: Disruption } }
interface TaskItem { desired: string; observed: string }

let s: SingleNode;
let addr: string;
beforeAll(async () => { ({ n: s, addr } = await listeningSingleNode({ control: true })); });
afterAll(async () => { await s.close(); });

const post = (url: string, payload?: unknown) => s.app.inject({ method: 'POST', url, ...(payload !== undefined ? { payload: payload as object } : {}) });
const service = async (): Promise<{ service: ServiceView; tasks: TaskItem[] }> => (await s.app.inject({ url: '/v1/services/web' })).json() as { service: ServiceView; tasks: TaskItem[] };

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the disruption budget', () => {
  it('shows in the status: the budget, nothing unavailable, one slot allowed', async () => {
    expect((await post('/v1/apply', { text: webYaml })).statusCode).toBe(200);
    await until('web converged', async () => (await service()).service.status.converged);
    expect((await service()).service.status.disruption).toEqual({ limit: 'maxUnavailable 1', maxUnavailable: 1, unavailable: [], allowed: 1, waiting: null, forced: [] });
  });

  it('refuses a drill on a node serving more slots than the budget allows, and writes nothing', async () => {
    const before = s.store.revision;
    const res = await post('/v1/nodes/solo/disruption', { cause: 'drill' });
    const e = catalogued(res);
    expect(e.code).toBe('disruption_budget_exceeded');
    expect(e.message).toContain('a drill on solo would take a service past the disruption budget: waiting for the disruption budget of web (maxUnavailable 1): 0 slots unavailable; waiting: a drill on solo (3 tasks)');
    expect(e.details).toMatchObject({ node: 'solo', services: [{ service: 'web', moves: 3, allowed: 1, forced: false }] });
    expect(s.store.revision).toBe(before);
    expect(problemPaths(expectError(await post('/v1/nodes/solo/disruption', { cause: 'reboot' }), 'bad_request'))).toEqual(['body.cause']);
  });

  it('shoal drill asks first, and fails at once, having done nothing, when the node serves more slots than the whole budget', async () => {
    const before = s.store.revision;
    const said: string[] = [];
    const started = Date.now();
    const failure = await checkDrillBudget(addr, { id: 'solo', name: 'solo' }, { force: false, waitMs: 60_000, onProgress: (l) => said.push(l) }).catch((e: unknown) => e);
    // No wait would help: the node's three slots are more than the budget of one.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(failure).toMatchObject({
      code: 'disruption_budget_exceeded', exitCode: 1,
      message: expect.stringMatching(/^a drill on solo would take a service past the disruption budget: waiting for the disruption budget of web \(maxUnavailable 1\).*\n {2}nothing was done: the drill did not start\. Waiting will not help: the node serves 3 slots of web, more than its whole budget \(1\)\. .*or pass --force$/s),
    });
    expect(said).toEqual([]);
    expect(s.store.revision).toBe(before);
  });

  it('lets a forced drill through, recording it on the service', async () => {
    const r = await post('/v1/nodes/solo/disruption', { cause: 'drill', force: true });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ node: 'solo', allowed: false, forced: true, budgets: [{ service: 'web', forced: true, waiting: null }] });
    // As shoal drill --force asks: it goes ahead and says which budgets it went past.
    expect(await checkDrillBudget(addr, { id: 'solo', name: 'solo' }, { force: true, waitMs: 0, onProgress: () => undefined })).toEqual(['web: past its disruption budget (--force)']);
    expect((await service()).service.status.disruption.forced).toEqual([expect.objectContaining({ cause: 'drill', nodeId: 'solo', specVersion: null, message: expect.stringMatching(/^forced past the disruption budget \(maxUnavailable 1\) by .+: 0 slots unavailable$/) })]);
  });

  it('a drain answers what waits, and its moves go one at a time: with nowhere to go, the first holds the budget and the rest wait', async () => {
    const r = await post('/v1/nodes/solo/availability', { availability: 'drain' });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({
      node: { record: { availability: 'drain' } },
      budgets: [{ service: 'web', limit: 'maxUnavailable 1', moves: 3, allowed: 1, forced: false, waiting: 'waiting for the disruption budget of web (maxUnavailable 1): 0 slots unavailable; waiting: the drain of solo (3 tasks)' }],
    });
    await until('one task moved, the others waiting', async () => {
      const v = await service();
      return v.tasks.filter((t) => t.desired === 'running' && t.observed === 'running').length === 2 && v.service.status.disruption.waiting !== null;
    });
    // Still so a moment later: nothing past the budget.
    await new Promise((r2) => setTimeout(r2, 300));
    const v = await service();
    expect(v.tasks.filter((t) => t.desired === 'running' && t.observed === 'running')).toHaveLength(2);
    expect(v.service.status.disruption).toMatchObject({ unavailable: [{ why: expect.stringMatching(/^pending: no node fits$|^being placed$/) }], allowed: 0 });
    expect(v.service.status.disruption.waiting).toMatch(/^waiting for the disruption budget of web \(maxUnavailable 1\): 1 slot unavailable \(slot \d: (pending: no node fits|being placed)\); waiting: the drain of solo \(2 tasks\)$/);
  });

  it('a forced drain moves the rest at once, records it, and the record goes once the node is empty', async () => {
    expect(problemPaths(expectError(await post('/v1/nodes/solo/availability', { availability: 'pause', force: true }), 'bad_request'))).toEqual(['body.force']);
    const r = await post('/v1/nodes/solo/availability', { availability: 'drain', force: true });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ budgets: [{ service: 'web', moves: 2, forced: true, waiting: null }] });
    await until('no task runs', async () => (await service()).tasks.every((t) => t.observed !== 'running'));
    await until('the forced drain is over', async () => !(await service()).service.status.disruption.forced.some((f) => f.cause === 'drain'));
    expect((await post('/v1/nodes/solo/availability', { availability: 'active' })).statusCode).toBe(200);
    await until('web converged again', async () => (await service()).service.status.converged);
  });

  it('a forced update records the version it may take past the budget, and says so in the outcome', async () => {
    const r = await post('/v1/apply', { text: webYaml.replace('busybox:local', 'busybox:v2'), force: true });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ services: [{ name: 'web', outcome: 'updated', change: 'replace', forced: true, specVersion: 2 }] });
    const doc = s.store.get(servicesCollection, 'web')?.doc as { forcedDisruptions: { cause: string; specVersion: number }[] };
    expect(doc.forcedDisruptions.find((f) => f.cause === 'update')).toMatchObject({ specVersion: 2 });
    await until('the update completed, and its record went', async () => {
      const v = await service();
      return v.service.status.converged && !v.service.status.disruption.forced.some((f) => f.cause === 'update');
    });
  });
});
