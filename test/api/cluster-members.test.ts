// Membership routes on one in-process node: members named by name or id, unique names, and the
// guardrails before a change (the new node must answer as itself and of this cluster; a learner
// is promoted only once caught up), each overridable with force=true.

import { createServer, type Server } from 'node:http';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolveMember } from '../../src/api/cluster-routes.ts';
import { promoteLagEntriesMax, promoteRefusal } from '../../src/resources/membership-refusals.ts';
import { errorCatalog } from '../../src/errors.ts';
import { confChangeContext, type MemberRecord } from '../../src/resources/membership.ts';
import { freePort } from '../../bench/lib/proc.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

function expectError(res: LightMyRequestResponse, code: keyof typeof errorCatalog): Record<string, unknown> {
  const body = res.json() as { code: string; message: string; details?: Record<string, unknown> };
  expect(res.statusCode, `${res.statusCode} ${res.body}`).toBe(errorCatalog[code].status);
  expect(body.code).toBe(code);
  return { ...body.details, message: body.message };
}

/** A stand-in for a node waiting to join: answers GET /v1/cluster?local with `view`. */
async function fakeNode(view: unknown): Promise<{ api: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(req.url === '/v1/cluster?local' ? JSON.stringify(view) : '{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const a = server.address();
  if (a === null || typeof a !== 'object') throw new Error('no address');
  return { api: `127.0.0.1:${a.port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const add = (member: MemberRecord, force = false) => s.app.inject({ method: 'POST', url: `/v1/cluster/members${force ? '?force=true' : ''}`, payload: member });

/** Adds learners behind the API's back, so that tests can make what the API refuses (duplicate names). */
async function addLearnersDirectly(members: MemberRecord[]): Promise<void> {
  for (const m of members) await s.node.changeMembership({ changes: [{ type: 'addLearner', node: m.id }], context: confChangeContext([m]) });
}

afterEach(async () => {
  // Every test leaves the cluster as it found it: solo alone.
  for (const m of s.node.membership.list()) if (m.id !== 'solo') await s.node.changeMembership({ changes: [{ type: 'removeNode', node: m.id }] });
});

describe('members named by name or id', () => {
  it('resolves an exact id first, then a unique name; refuses an ambiguous name with the candidates', () => {
    const members = [
      { id: 'a1', name: 'twin', peerAddress: 'x:1', apiAddress: 'x:2' },
      { id: 'b2', name: 'twin', peerAddress: 'x:1', apiAddress: 'x:2' },
      { id: 'c3', name: 'a1', peerAddress: 'x:1', apiAddress: 'x:2' },
      { id: 'd4', name: 'delta', peerAddress: 'x:1', apiAddress: 'x:2' },
    ];
    expect(resolveMember(members, 'a1').id).toBe('a1');
    expect(resolveMember(members, 'delta').id).toBe('d4');
    expect(() => resolveMember(members, 'twin')).toThrow(expect.objectContaining({
      code: 'ambiguous_name', details: { name: 'twin', candidates: [{ id: 'a1', name: 'twin' }, { id: 'b2', name: 'twin' }] },
    }));
    expect(() => resolveMember(members, 'nobody')).toThrow(expect.objectContaining({ code: 'not_found' }));
  });

  it('removes by name and answers with the member it removed', async () => {
    const learner = { id: 'e5e5e5', name: 'echo', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:9' };
    expect((await add(learner, true)).statusCode).toBe(201);
    const removed = await s.app.inject({ method: 'DELETE', url: '/v1/cluster/members/echo' });
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toMatchObject({ member: { id: 'e5e5e5', name: 'echo' } });
    expect(s.node.membership.get('e5e5e5')).toBeUndefined();
  });

  it('an ambiguous name is ambiguous_name on every route, an unknown one not_found with a CLI hint', async () => {
    await addLearnersDirectly([
      { id: 'a1', name: 'twin', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:9' },
      { id: 'b2', name: 'twin', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:9' },
    ]);
    for (const req of [
      { method: 'POST' as const, url: '/v1/cluster/members/twin/promote' },
      { method: 'DELETE' as const, url: '/v1/cluster/members/twin' },
      { method: 'POST' as const, url: '/v1/cluster/leader', payload: { to: 'twin' } },
    ]) {
      const d = expectError(await s.app.inject(req), 'ambiguous_name');
      expect(d.candidates, req.url).toEqual([{ id: 'a1', name: 'twin' }, { id: 'b2', name: 'twin' }]);
    }
    const missing = expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/leader', payload: { to: 'ghost' } }), 'not_found');
    expect(missing.message).toContain('shoal cluster members');
    expect(missing.message).not.toContain('GET /v1/cluster');
  });

  it('refuses a second member with a taken name, and a name outside the rule', async () => {
    const d = expectError(await add({ id: 'f6f6f6', name: 'solo', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:9' }, true), 'already_exists');
    expect(d).toMatchObject({ member: 'solo', name: 'solo' });
    expectError(await add({ id: 'f6f6f6', name: 'Bad Name!', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:9' }, true), 'bad_request');
    expectError(await add({ id: 'f6f6f6', name: 'ok', peerAddress: '127.0.0.1:99999', apiAddress: '127.0.0.1:9' }, true), 'bad_request');
  });
});

describe('adding a node: it must answer as itself, of this cluster', () => {
  it('refuses a node whose API does not answer, unless force=true', async () => {
    const m = { id: 'g7g7g7', name: 'golf', peerAddress: '127.0.0.1:9', apiAddress: `127.0.0.1:${await freePort()}` };
    const d = expectError(await add(m), 'member_not_ready');
    expect(d).toMatchObject({ reason: 'unreachable', member: 'g7g7g7' });
    expect(d.message).toContain('start the node before adding it');
    expect(s.node.membership.get('g7g7g7')).toBeUndefined();
    expect((await add(m, true)).statusCode).toBe(201);
  });

  it('refuses a node of another cluster (another CA) and a node that is someone else', async () => {
    const other = await fakeNode({ clusterId: 'another-cluster', node: 'h8h8h8' });
    try {
      const d = expectError(await add({ id: 'h8h8h8', name: 'hotel', peerAddress: '127.0.0.1:9', apiAddress: other.api }), 'member_not_ready');
      expect(d).toMatchObject({ reason: 'cluster_mismatch', clusterId: 'another-cluster' });
      expect(d.message).toContain('belongs to cluster another-cluster, not to this cluster test-cluster');
    } finally {
      await other.close();
    }
    const someoneElse = await fakeNode({ clusterId: 'test-cluster', node: 'zzzzzz' });
    try {
      const d = expectError(await add({ id: 'h8h8h8', name: 'hotel', peerAddress: '127.0.0.1:9', apiAddress: someoneElse.api }), 'member_not_ready');
      expect(d).toMatchObject({ reason: 'id_mismatch', nodeId: 'zzzzzz' });
    } finally {
      await someoneElse.close();
    }
    expect(s.node.membership.get('h8h8h8')).toBeUndefined();
  });

  it('adds a node that answers as itself, of this cluster, and names it in the answer', async () => {
    const joining = await fakeNode({ clusterId: 'test-cluster', node: 'i9i9i9', members: [] });
    try {
      const res = await add({ id: 'i9i9i9', name: 'india', peerAddress: '127.0.0.1:9', apiAddress: joining.api });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ member: { id: 'i9i9i9', name: 'india' }, members: expect.arrayContaining([expect.objectContaining({ id: 'i9i9i9', role: 'learner' })]) });
    } finally {
      await joining.close();
    }
  });
});

describe('promoting a learner: only once caught up', () => {
  it('refuses a learner the leader has not heard from, by name, unless force=true is asked', async () => {
    expect((await add({ id: 'j0j0j0', name: 'juliet', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:9' }, true)).statusCode).toBe(201);
    const d = expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/members/juliet/promote' }), 'member_not_ready');
    expect(d).toMatchObject({ reason: 'inactive', member: 'j0j0j0', matchIndex: 0 });
    expect(d.message).toContain('juliet (j0j0j0)');
    expect(s.node.confState().learners).toContain('j0j0j0');
    expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/members/juliet/promote?force=maybe' }), 'bad_request');
  });

  it('judges readiness from the leader\'s progress: recently active, replicating, and near the last index', () => {
    const m = { id: 'k1', name: 'kilo', peerAddress: 'x:1', apiAddress: 'x:2' };
    const st = (pr: { match: number; state: 'probe' | 'replicate' | 'snapshot'; recentActive: boolean }, lastIndex = 5000) =>
      ({ lastIndex, progress: { k1: { ...pr, next: pr.match + 1, learner: true, inflight: 0, pendingSnapshot: 0 } } }) as unknown as Parameters<typeof promoteRefusal>[0];
    expect(promoteRefusal(st({ match: 5000, state: 'replicate', recentActive: true }), m)).toBeUndefined();
    expect(promoteRefusal(st({ match: 5000 - promoteLagEntriesMax, state: 'replicate', recentActive: true }), m)).toBeUndefined();
    expect(promoteRefusal(st({ match: 5000 - promoteLagEntriesMax - 1, state: 'replicate', recentActive: true }), m)?.reason).toBe('lagging');
    expect(promoteRefusal(st({ match: 5000, state: 'replicate', recentActive: false }), m)?.reason).toBe('inactive');
    expect(promoteRefusal(st({ match: 0, state: 'probe', recentActive: true }), m)?.reason).toBe('inactive');
    expect(promoteRefusal(st({ match: 100, state: 'snapshot', recentActive: true }), m)?.reason).toBe('lagging');
    expect(promoteRefusal({ lastIndex: 10 } as unknown as Parameters<typeof promoteRefusal>[0], m)?.reason).toBe('inactive');
  });
});

describe('the cluster view', () => {
  it('says which node answered and the software it runs', async () => {
    const v = (await s.app.inject({ url: '/v1/cluster' })).json() as { node: string; softwareVersion: string; members: { softwareVersion: string }[] };
    expect(v).toMatchObject({ node: 'solo', softwareVersion: '0.0.0-test' });
    expect(v.members[0]?.softwareVersion).toBe('0.0.0-test');
  });
});
