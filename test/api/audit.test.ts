// GET /v1/audit over a single node: records name the caller's principal (from its credential)
// and, from feature level 5, its role; refused writes carry their code, replays add nothing, and
// only admins read them.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { singleNode, type SingleNode } from './single-node.ts';

let n: SingleNode;

async function token(role: 'admin' | 'operator' | 'reader', principal: string): Promise<string> {
  const res = await n.app.inject({ method: 'POST', url: '/v1/credentials', payload: { principal, role } });
  expect(res.statusCode).toBe(201);
  return (res.json() as { token: string }).token;
}

const auth = (t: string) => ({ authorization: `Bearer ${t}` });

interface Page { items: Array<Record<string, unknown>>; next: number | null; rev: number }

async function audit(query = ''): Promise<Page> {
  const res = await n.app.inject({ method: 'GET', url: `/v1/audit${query}` });
  expect(res.statusCode).toBe(200);
  return res.json() as Page;
}

beforeAll(async () => {
  n = await singleNode();
});
afterAll(async () => {
  await n.close();
});

describe('GET /v1/audit', () => {
  it('records a bearer-token write once, with its principal, and a refused conditional write with its code', async () => {
    const ops = await token('operator', 'ops-bot');
    const put = await n.app.inject({ method: 'PUT', url: '/v1/docs/apps/web', payload: { v: 1 }, headers: { ...auth(ops), 'idempotency-key': 'k-1' } });
    expect(put.statusCode).toBe(200);
    const again = await n.app.inject({ method: 'PUT', url: '/v1/docs/apps/web', payload: { v: 1 }, headers: { ...auth(ops), 'idempotency-key': 'k-1' } });
    expect(again.statusCode).toBe(200);
    const refused = await n.app.inject({ method: 'PUT', url: '/v1/docs/apps/web', payload: { v: 2 }, headers: { ...auth(ops), 'if-match': '1' } });
    expect(refused.statusCode).toBe(412);
    const mine = await audit('?principal=ops-bot');
    expect(mine.items.map((r) => [r.op, r.resources, r.result])).toEqual([
      ['put', ['apps/web'], 'ok'],
      ['put', ['apps/web'], 'revision_mismatch'],
    ]);
    expect(mine.items[0]).toMatchObject({ principal: 'ops-bot', role: 'operator', index: (put.json() as { rev: number }).rev });
  });

  it('records the admin that created the credential, and pages with after/next', async () => {
    const all = await audit();
    expect(all.items[0]).toMatchObject({ op: 'put', result: 'ok', role: 'admin' });
    expect((all.items[0]?.resources as string[])[0]).toMatch(/^shoal\.credentials\//);
    const first = await audit('?limit=1');
    expect(first.items).toHaveLength(1);
    const rest = await audit(`?after=${first.next}`);
    expect(rest.items.map((r) => r.id)).toEqual(all.items.slice(1).map((r) => r.id));
  });

  it('is for admins only', async () => {
    const ops = await token('operator', 'ops-2');
    const res = await n.app.inject({ method: 'GET', url: '/v1/audit', headers: auth(ops) });
    expect(res.statusCode).toBe(403);
  });

  it('records the role of a txn too', async () => {
    const ops = await token('operator', 'ops-3');
    const res = await n.app.inject({ method: 'POST', url: '/v1/txn', payload: { compare: [], success: [{ op: 'put', collection: 'apps', id: 't', doc: {} }], failure: [] }, headers: auth(ops) });
    expect(res.statusCode).toBe(200);
    expect((await audit('?principal=ops-3')).items.map((r) => [r.op, r.role])).toEqual([['txn', 'operator']]);
  });

  it('refuses a bad query', async () => {
    const res = await n.app.inject({ method: 'GET', url: '/v1/audit?limit=0' });
    expect(res.statusCode).toBe(400);
  });
});

describe('GET /v1/audit in a cluster below feature level 5', () => {
  it('writes records without a role, as the release before it does', async () => {
    const old = await singleNode({ featureLevelMax: 4 });
    try {
      expect(old.node.featureLevel).toBe(4);
      const res = await old.app.inject({ method: 'PUT', url: '/v1/docs/apps/a', payload: {}, headers: { 'x-shoal-principal': 'alice', 'x-shoal-role': 'operator' } });
      expect(res.statusCode).toBe(200);
      const page = (await old.app.inject({ method: 'GET', url: '/v1/audit?principal=alice' })).json() as Page;
      expect(page.items).toHaveLength(1);
      expect(page.items[0]).toMatchObject({ principal: 'alice', op: 'put', result: 'ok' });
      expect(page.items[0]).not.toHaveProperty('role');
    } finally {
      await old.close();
    }
  });
});
