// A node that cannot serve says so: /healthz and /readyz answer 503 {ok:false, code, reason},
// every other route but /metrics answers the failure's catalogued error.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShoalError } from '../../src/errors.ts';
import { expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

/** Makes this node report a failure, as RaftNode does after a fatal error. */
function fail(code: 'node_failed' | 'disk_stalled'): void {
  const failure = new ShoalError(code, `this node stopped (${code}); use another node`);
  Object.defineProperty(s.node, 'failure', { configurable: true, get: () => failure });
}

describe('a healthy node', () => {
  it('says ok on /healthz with its software version', async () => {
    const res = await s.app.inject({ url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, id: 'solo', version: '0.0.0-test', role: 'leader' });
    expect((await s.app.inject({ url: '/readyz' })).json()).toMatchObject({ ok: true, ready: true, version: '0.0.0-test' });
  });
});

describe('a node that cannot serve', () => {
  it('answers 503 {ok:false, code, reason} on /healthz and /readyz, and its failure everywhere else but /metrics', async () => {
    await s.app.inject({ method: 'PUT', url: '/v1/docs/c/before', payload: {} });
    const rev = s.store.revision;
    fail('node_failed');
    try {
      for (const url of ['/healthz', '/readyz', '/readyz?sync']) {
        const res = await s.app.inject({ url });
        expect(res.statusCode, url).toBe(503);
        expect(res.json()).toMatchObject({ ok: false, code: 'node_failed', reason: expect.stringContaining('node_failed') as string, version: '0.0.0-test' });
      }
      const requests: { method: 'GET' | 'PUT' | 'POST' | 'DELETE'; url: string; payload?: object }[] = [
        { method: 'GET', url: '/v1/docs/c/before' }, { method: 'PUT', url: '/v1/docs/c/x', payload: {} }, { method: 'DELETE', url: '/v1/docs/c/before' },
        { method: 'GET', url: '/v1/docs/c' }, { method: 'POST', url: '/v1/txn', payload: {} }, { method: 'GET', url: '/v1/watch' },
        { method: 'GET', url: '/v1/cluster' }, { method: 'GET', url: '/v1/cluster/snapshot' }, { method: 'GET', url: '/docs' },
        { method: 'GET', url: '/no/such/route' },
      ];
      for (const r of requests) {
        const res = await s.app.inject(r);
        expectError(res, 'node_failed');
        expect(res.headers['retry-after'], r.url).toBe('1');
      }
      const metrics = await s.app.inject({ url: '/metrics' });
      expect(metrics.statusCode).toBe(200);
      expect(s.store.revision).toBe(rev);
    } finally {
      Reflect.deleteProperty(s.node, 'failure');
    }
    expect((await s.app.inject({ url: '/healthz' })).statusCode).toBe(200);
  });

  it('answers with the failure it has, whatever its code', async () => {
    fail('disk_stalled');
    try {
      expectError(await s.app.inject({ method: 'PUT', url: '/v1/docs/c/x', payload: {} }), 'disk_stalled');
      expect((await s.app.inject({ url: '/healthz' })).json()).toMatchObject({ ok: false, code: 'disk_stalled' });
    } finally {
      Reflect.deleteProperty(s.node, 'failure');
    }
  });
});
