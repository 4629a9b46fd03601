// Every route through inject(): the happy paths, and every way a request can be wrong — each a
// 4xx with the right code from the catalog, never a 5xx.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { errorCatalog } from '../../src/errors.ts';
import { decodeSnapshotFile } from '../../src/node/recovery/snapshot-file.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

function expectError(res: LightMyRequestResponse, code: keyof typeof errorCatalog): Record<string, unknown> {
  const body = res.json() as { code: string; message: string; requestId: string; retryable: boolean; details?: Record<string, unknown> };
  expect(res.statusCode, `${res.statusCode} ${res.body}`).toBe(errorCatalog[code].status);
  expect(body.code).toBe(code);
  expect(body.message.length).toBeGreaterThan(0);
  expect(body.requestId).toBeTruthy();
  expect(body.retryable).toBe(errorCatalog[code].retryable);
  return body.details ?? {};
}

const put = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  s.app.inject({ method: 'PUT', url, payload: payload as object, headers });

describe('documents', () => {
  it('creates, reads with ETag, replaces with If-Match, and deletes', async () => {
    const created = await put('/v1/docs/apps/web', { image: 'nginx' });
    expect(created.statusCode).toBe(200);
    const doc = created.json() as { rev: number; createRev: number; doc: unknown; collection: string; id: string };
    expect(doc).toMatchObject({ collection: 'apps', id: 'web', doc: { image: 'nginx' } });
    expect(doc.rev).toBe(doc.createRev);
    expect(created.headers.etag).toBe(`"${doc.rev}"`);

    const got = await s.app.inject({ url: '/v1/docs/apps/web' });
    expect(got.json()).toEqual(doc);
    const stale = await s.app.inject({ url: '/v1/docs/apps/web?consistency=stale' });
    expect(stale.json()).toEqual(doc);

    const replaced = await put('/v1/docs/apps/web', { image: 'caddy' }, { 'if-match': `"${doc.rev}"` });
    expect(replaced.statusCode).toBe(200);
    expect(replaced.json()).toMatchObject({ createRev: doc.createRev, doc: { image: 'caddy' } });
    const rev2 = (replaced.json() as { rev: number }).rev;
    expect(rev2).toBeGreaterThan(doc.rev);

    const deleted = await s.app.inject({ method: 'DELETE', url: '/v1/docs/apps/web', headers: { 'if-match': String(rev2) } });
    expect(deleted.statusCode).toBe(200);
    expectError(await s.app.inject({ url: '/v1/docs/apps/web' }), 'not_found');
  });

  it('answers a stale If-Match and a taken If-None-Match with 412 precondition_failed and the current rev', async () => {
    const first = (await put('/v1/docs/apps/cas', { n: 1 })).json() as { rev: number };
    const second = (await put('/v1/docs/apps/cas', { n: 2 }, { 'if-match': String(first.rev) })).json() as { rev: number };
    const stale = expectError(await put('/v1/docs/apps/cas', { n: 3 }, { 'if-match': String(first.rev) }), 'precondition_failed');
    expect(stale).toMatchObject({ currentRev: second.rev, precondition: 'If-Match' });
    const taken = expectError(await put('/v1/docs/apps/cas', { n: 4 }, { 'if-none-match': '*' }), 'precondition_failed');
    expect(taken).toMatchObject({ currentRev: second.rev, precondition: 'If-None-Match' });
    const gone = expectError(await put('/v1/docs/apps/never', { n: 1 }, { 'if-match': '3' }), 'precondition_failed');
    expect(gone.currentRev).toBeNull();
    const del = expectError(await s.app.inject({ method: 'DELETE', url: '/v1/docs/apps/cas', headers: { 'if-match': String(first.rev) } }), 'precondition_failed');
    expect(del.currentRev).toBe(second.rev);
    expect((await s.app.inject({ url: '/v1/docs/apps/cas' })).json()).toMatchObject({ doc: { n: 2 } });
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/docs/apps/missing' }), 'not_found');
  });

  it('answers a retried conditional write with the first result, not 412, under the same Idempotency-Key', async () => {
    const first = (await put('/v1/docs/apps/retry', { n: 1 })).json() as { rev: number };
    const h = { 'if-match': String(first.rev), 'idempotency-key': 'cas-retry-1' };
    const a = await put('/v1/docs/apps/retry', { n: 2 }, h);
    expect(a.statusCode).toBe(200);
    const b = await put('/v1/docs/apps/retry', { n: 2 }, h);
    expect(b.statusCode).toBe(200);
    expect(b.json()).toEqual(a.json());
    expect(b.headers['idempotent-replayed']).toBe('true');
    const d = { 'if-match': String((a.json() as { rev: number }).rev), 'idempotency-key': 'del-retry-1' };
    const delA = await s.app.inject({ method: 'DELETE', url: '/v1/docs/apps/retry', headers: d });
    const delB = await s.app.inject({ method: 'DELETE', url: '/v1/docs/apps/retry', headers: d });
    expect([delA.statusCode, delB.statusCode]).toEqual([200, 200]);
    expect(delB.json()).toEqual(delA.json());
  });

  it('lists with prefix, limit and paging, and a revision to watch from', async () => {
    for (const id of ['a1', 'a2', 'a3', 'b1']) await put(`/v1/docs/list/${id}`, { id });
    const page1 = (await s.app.inject({ url: '/v1/docs/list?prefix=a&limit=2' })).json() as { items: { id: string }[]; next: string | null; rev: number };
    expect(page1.items.map((d) => d.id)).toEqual(['a1', 'a2']);
    expect(page1.next).toBe('a2');
    expect(page1.rev).toBe(s.store.revision);
    const page2 = (await s.app.inject({ url: `/v1/docs/list?prefix=a&limit=2&after=${page1.next}` })).json() as { items: { id: string }[]; next: string | null };
    expect(page2.items.map((d) => d.id)).toEqual(['a3']);
    expect(page2.next).toBeNull();
  });

  it('replays an idempotent write and refuses a different request under the same key', async () => {
    const h = { 'idempotency-key': 'k-1', 'x-shoal-principal': 'alice' };
    const a = await put('/v1/docs/idem/x', { v: 1 }, h);
    const b = await put('/v1/docs/idem/x', { v: 1 }, h);
    expect(b.statusCode).toBe(200);
    expect(b.json()).toEqual(a.json());
    expect(b.headers['idempotent-replayed']).toBe('true');
    expectError(await put('/v1/docs/idem/x', { v: 2 }, h), 'idempotency_conflict');
    // Another principal has its own key space.
    expect((await put('/v1/docs/idem/x', { v: 3 }, { ...h, 'x-shoal-principal': 'bob' })).statusCode).toBe(200);
  });
});

describe('transactions', () => {
  it('applies the success branch atomically when the compares hold, else the failure branch', async () => {
    const base = (await put('/v1/docs/txn/a', { v: 0 })).json() as { rev: number };
    const ok = await s.app.inject({ method: 'POST', url: '/v1/txn', payload: {
      compare: [{ collection: 'txn', id: 'a', target: 'rev', cmp: '=', value: base.rev }],
      success: [{ op: 'put', collection: 'txn', id: 'a', doc: { v: 1 } }, { op: 'put', collection: 'txn', id: 'b', doc: { v: 1 } }],
      failure: [{ op: 'put', collection: 'txn', id: 'lost', doc: {} }],
    } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ succeeded: true });
    const no = await s.app.inject({ method: 'POST', url: '/v1/txn', payload: {
      compare: [{ collection: 'txn', id: 'a', target: 'rev', cmp: '=', value: base.rev }],
      success: [{ op: 'delete', collection: 'txn', id: 'a' }],
      failure: [{ op: 'put', collection: 'txn', id: 'failed', doc: { seen: true } }],
    } });
    expect(no.json()).toMatchObject({ succeeded: false });
    expect((await s.app.inject({ url: '/v1/docs/txn/failed' })).statusCode).toBe(200);
    expect((await s.app.inject({ url: '/v1/docs/txn/a' })).json()).toMatchObject({ doc: { v: 1 } });
  });

  it('changes nothing when an op of the chosen branch fails its own precondition', async () => {
    const res = await s.app.inject({ method: 'POST', url: '/v1/txn', payload: {
      success: [{ op: 'put', collection: 'txn', id: 'c', doc: {} }, { op: 'put', collection: 'txn', id: 'a', doc: {}, expect: { absent: true } }],
    } });
    // A txn op's own expect is not an HTTP precondition: it stays 409.
    expect(expectError(res, 'already_exists')).toMatchObject({ branch: 'success', op: 1 });
    expectError(await s.app.inject({ url: '/v1/docs/txn/c' }), 'not_found');
  });
});

describe('watch', () => {
  it('streams the backlog after a revision, then live events, with ids on revision boundaries', async () => {
    const start = s.store.revision;
    await put('/v1/docs/w/one', { n: 1 });
    const address = await s.app.listen({ port: 0, host: '127.0.0.1' });
    const ctrl = new AbortController();
    const res = await fetch(`${address}/v1/watch?collection=w&after=${start}`, { signal: ctrl.signal });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    const readUntil = async (needle: string) => {
      while (!text.includes(needle)) text += new TextDecoder().decode((await reader.read()).value);
    };
    await readUntil('"id":"one"');
    await put('/v1/docs/w/two', { n: 2 });
    await readUntil('"id":"two"');
    ctrl.abort();
    const events = text.split('\n\n').filter((b) => b.includes('data:'));
    expect(events.map((b) => (JSON.parse(b.split('data: ')[1] ?? '{}') as { id: string }).id)).toEqual(['one', 'two']);
    expect(events.every((b) => /^id: \d+$/m.test(b))).toBe(true);
  });

  it('answers a cursor older than the retained events with cursor_expired and the oldest revision', async () => {
    for (let i = 0; i < 60; i++) await put(`/v1/docs/churn/d${i}`, { i });
    const details = expectError(await s.app.inject({ url: '/v1/watch?after=1' }), 'cursor_expired');
    expect(details.oldestRev).toBeGreaterThan(1);
  });
});

describe('cluster routes', () => {
  it('reports status with this node as leader and its member record', async () => {
    const res = await s.app.inject({ url: '/v1/cluster' });
    expect(res.json()).toMatchObject({ clusterId: 'test-cluster', leader: 'solo', members: [{ id: 'solo', role: 'voter', health: 'healthy' }] });
  });

  it('adds a learner, refuses a duplicate, removes it, and 404s unknown members', async () => {
    const member = { id: 'newbie', name: 'newbie', peerAddress: '127.0.0.1:9', apiAddress: '127.0.0.1:10' };
    const added = await s.app.inject({ method: 'POST', url: '/v1/cluster/members?force=true', payload: member });
    expect(added.statusCode).toBe(201);
    expect((added.json() as { members: { id: string; role: string }[] }).members).toContainEqual(expect.objectContaining({ id: 'newbie', role: 'learner' }));
    expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/members?force=true', payload: member }), 'already_exists');
    const removed = await s.app.inject({ method: 'DELETE', url: '/v1/cluster/members/newbie' });
    expect(removed.statusCode).toBe(200);
    expect((removed.json() as { members: { id: string }[] }).members.map((m) => m.id)).toEqual(['solo']);
    expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/members/ghost/promote' }), 'not_found');
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/cluster/members/ghost' }), 'not_found');
  });

  it('refuses to remove the last voter', async () => {
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/cluster/members/solo' }), 'bad_request');
  });

  it('refuses a transfer with no other voter', async () => {
    expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/leader', payload: {} }), 'bad_request');
  });

  it('downloads a consistent snapshot file holding the documents', async () => {
    const res = await s.app.inject({ url: '/v1/cluster/snapshot' });
    expect(res.statusCode).toBe(200);
    const body = decodeSnapshotFile(res.rawPayload, 'download');
    expect(body.clusterId).toBe('test-cluster');
    expect(body.index).toBeGreaterThan(1);
    expect(body.members.map((m) => m.id)).toEqual(['solo']);
  });
});

describe('health, metrics and docs', () => {
  it('serves /healthz, /readyz and /readyz?sync', async () => {
    expect((await s.app.inject({ url: '/healthz' })).json()).toMatchObject({ ok: true, role: 'leader' });
    expect((await s.app.inject({ url: '/readyz' })).statusCode).toBe(200);
    expect((await s.app.inject({ url: '/readyz?sync' })).json()).toMatchObject({ ready: true });
  });

  it('serves Prometheus metrics including the proposal latency histogram', async () => {
    const text = (await s.app.inject({ url: '/metrics' })).body;
    expect(text).toContain('# TYPE shoal_proposal_duration_seconds histogram');
    expect(text).toMatch(/shoal_proposal_duration_seconds_count [1-9]/);
  });

  it('serves the OpenAPI document listing every route', async () => {
    const doc = (await s.app.inject({ url: '/docs' })).json() as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    for (const path of ['/v1/docs/{collection}/{id}', '/v1/docs/{collection}', '/v1/txn', '/v1/watch', '/v1/cluster', '/v1/cluster/members', '/v1/cluster/leader', '/v1/cluster/snapshot']) {
      expect(doc.paths).toHaveProperty([path]);
    }
  });
});

describe('bad input is a 4xx with the right code, never a 5xx', () => {
  it('reports every problem of a request at once', async () => {
    const res = await s.app.inject({ method: 'PUT', url: '/v1/docs/BAD NAME/x?bogus=1', payload: { a: 1 }, headers: { 'if-match': 'abc' } });
    const details = expectError(res, 'bad_request') as { problems: { path: string }[] };
    const paths = details.problems.map((p) => p.path);
    expect(paths).toEqual(expect.arrayContaining(['params.collection', 'query', 'headers.if-match']));
  });

  it('refuses unknown fields and wrong types in a txn', async () => {
    const details = expectError(await s.app.inject({ method: 'POST', url: '/v1/txn', payload: {
      compare: [{ collection: 'c', id: 'x', target: 'rev', cmp: '==', value: 'one' }], success: [{ op: 'upsert' }], extra: true,
    } }), 'bad_request') as { problems: { path: string }[] };
    expect(details.problems.length).toBeGreaterThanOrEqual(3);
  });

  it('refuses a non-object document, malformed JSON, a wrong media type and an oversized body', async () => {
    expectError(await put('/v1/docs/c/x', [1, 2]), 'bad_request');
    expectError(await s.app.inject({ method: 'PUT', url: '/v1/docs/c/x', payload: '{"a":', headers: { 'content-type': 'application/json' } }), 'bad_request');
    expectError(await s.app.inject({ method: 'PUT', url: '/v1/docs/c/x', payload: 'a=1', headers: { 'content-type': 'text/plain' } }), 'unsupported_media_type');
    // The answer names the limit, so a client can say how far over it the body is.
    expect(expectError(await put('/v1/docs/c/x', { blob: 'x'.repeat(100 * 1024) }), 'payload_too_large')).toEqual({ limit: 'bodyBytesMax', max: 64 * 1024 });
    expectError(await s.app.inject({ url: '/v1/docs/c/x?consistency=maybe' }), 'bad_request');
    expectError(await s.app.inject({ url: '/v1/watch?after=-3' }), 'bad_request');
    expectError(await s.app.inject({ method: 'POST', url: '/v1/cluster/members', payload: { id: 'x' } }), 'bad_request');
    expectError(await s.app.inject({ url: '/nope' }), 'not_found');
  });
});

describe('unavailable', () => {
  it('fails writes fast with no_leader, 503 and Retry-After when there is no leader', async () => {
    const lonely = await singleNode({ voters: ['solo', 'ghost'] });
    try {
      const res = await lonely.app.inject({ method: 'PUT', url: '/v1/docs/c/x', payload: {} });
      expectError(res, 'no_leader');
      expect(res.headers['retry-after']).toBe('1');
      expectError(await lonely.app.inject({ url: '/v1/docs/c/x' }), 'no_leader');
    } finally {
      await lonely.close();
    }
  });

  it('answers stopping once the node stopped', async () => {
    const short = await singleNode();
    await short.node.stop();
    expectError(await short.app.inject({ method: 'PUT', url: '/v1/docs/c/x', payload: {} }), 'stopping');
    await short.app.close();
  });
});
