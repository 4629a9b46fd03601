// Attacks on the client API of a node serving HTTPS with authentication: each is refused with a
// typed error from the catalog and leaves the store unchanged (issue 23, "Bad input and attacks").

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCa, issueNodeCert } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import type { PemPair } from '../../src/security/certificates.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from './tls-node.ts';
import { encodeCommand } from '../../fsm/index.ts';
import { credentialsCollection, newBearer, type BearerRecord } from '../../src/api/bearer-tokens.ts';

let c: TlsCluster;
let admin: ClientCredential;

beforeAll(async () => {
  c = await tlsCluster(1);
  admin = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'alice', role: 'admin' }) };
});
afterAll(async () => { await c?.close(); });

const node = () => c.nodes[0]!;
const revision = () => node().store.revision;

async function bearer(role: 'admin' | 'operator' | 'reader', principal = `${role}-bot`): Promise<{ id: string; token: string }> {
  const r = await call(node(), admin, 'POST', '/v1/credentials', { principal, role });
  expect(r.status).toBe(201);
  return { id: r.body.id as string, token: r.body.token as string };
}

describe('the client API over TLS', () => {
  it('serves an admin client certificate, and stamps its principal on the write', async () => {
    const r = await call(node(), admin, 'PUT', '/v1/docs/sec/one', { a: 1 });
    expect(r.status).toBe(200);
    const w = await call(node(), admin, 'GET', '/v1/docs/sec/one');
    expect(w.body.doc).toEqual({ a: 1 });
  });

  it('answers the probes and the OpenAPI document without a credential', async () => {
    for (const p of ['/healthz', '/readyz', '/docs/openapi.json']) expect((await call(node(), { caPem: c.ca.certPem }, 'GET', p)).status, p).toBe(200);
  });

  it('refuses a request with no credential: 401 unauthenticated, nothing written', async () => {
    const before = revision();
    const r = await call(node(), { caPem: c.ca.certPem }, 'PUT', '/v1/docs/sec/anon', { a: 1 });
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'missing' } });
    expect((await call(node(), { caPem: c.ca.certPem }, 'GET', '/v1/docs/sec/one')).status).toBe(401);
    // fastify's HEAD twin of every GET route is guarded as its GET is.
    expect((await call(node(), { caPem: c.ca.certPem }, 'HEAD', '/v1/docs/sec/one')).status).toBe(401);
    expect(revision()).toBe(before);
  });

  it('refuses a client certificate of another CA: 401, nothing written', async () => {
    const otherCa = await createCa('other-cluster');
    const foreign = await issueClientCert(otherCa, { principal: 'mallory', role: 'admin' });
    const before = revision();
    const r = await call(node(), { caPem: c.ca.certPem, cert: foreign }, 'PUT', '/v1/docs/sec/foreign', { a: 1 });
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'certificate' } });
    // A node certificate of another cluster is no better.
    const foreignNode = await issueNodeCert(otherCa, 'aaaabbbbccccdddd', { hosts: ['127.0.0.1'] });
    const n = await call(node(), { caPem: c.ca.certPem, cert: foreignNode }, 'POST', '/v1/cluster/leader', {});
    expect(n.status).toBe(401);
    expect(revision()).toBe(before);
  });

  it('refuses a forged principal header from a client: 403 forbidden (forged_principal), nothing written', async () => {
    const before = revision();
    const reader = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'rita', role: 'reader' }) };
    const forged: Record<string, string>[] = [{ 'x-shoal-principal': 'alice' }, { 'x-shoal-principal': 'node:x', 'x-shoal-role': 'admin' }, { 'x-shoal-role': 'admin' }];
    for (const headers of forged) {
      const r = await call(node(), { ...reader, headers }, 'PUT', '/v1/docs/sec/forged', { a: 1 });
      expect(r.status, JSON.stringify(headers)).toBe(403);
      expect(r.body).toMatchObject({ code: 'forbidden', details: { reason: 'forged_principal' } });
    }
    expect(revision()).toBe(before);
  });

  it('takes a bearer token until it is revoked; then 401, nothing written', async () => {
    const { id, token } = await bearer('operator');
    expect((await call(node(), { caPem: c.ca.certPem, token }, 'PUT', '/v1/docs/sec/by-token', { a: 1 })).status).toBe(200);
    const listed = await call(node(), admin, 'GET', '/v1/credentials');
    expect(JSON.stringify(listed.body)).not.toContain(token.split('.')[1]);
    expect((listed.body.items as { id: string }[]).map((i) => i.id)).toContain(id);
    expect((await call(node(), admin, 'DELETE', `/v1/credentials/${id}`)).status).toBe(200);
    const before = revision();
    const r = await call(node(), { caPem: c.ca.certPem, token }, 'PUT', '/v1/docs/sec/by-token', { a: 2 });
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'token' } });
    expect(revision()).toBe(before);
  });

  it('refuses a bearer token past its expiry: 401 token_expired, nothing written', async () => {
    const fresh = newBearer();
    const record: BearerRecord = { kind: 'bearer', principal: 'late-bot', role: 'admin', secretSha256: fresh.secretSha256, createdBy: 'alice', createdAtMs: 1, expiresAtMs: Date.now() - 1 };
    await node().node.propose(encodeCommand({ cmd: { op: 'put', collection: credentialsCollection, id: fresh.id, doc: record as never }, ts: Date.now(), principal: 'shoal' }));
    const before = revision();
    const r = await call(node(), { caPem: c.ca.certPem, token: fresh.token }, 'PUT', '/v1/docs/sec/by-expired', { a: 1 });
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'token_expired', id: fresh.id } });
    expect(revision()).toBe(before);
  });

  it('keeps the credentials collection from non-admins, and from /v1/docs writes', async () => {
    const { token } = await bearer('operator', 'ops-2');
    const read = await call(node(), { caPem: c.ca.certPem, token }, 'GET', '/v1/docs/shoal.credentials');
    expect(read.status).toBe(403);
    const write = await call(node(), admin, 'PUT', '/v1/docs/shoal.credentials/0000000000000000', { kind: 'bearer' });
    expect(write.status).toBe(400);
  });
});

describe('roles', () => {
  interface Op { method: string; path: string; role: string }
  let ops: Op[] = [];

  beforeAll(async () => {
    const doc = await call(node(), { caPem: c.ca.certPem }, 'GET', '/docs/openapi.json');
    const paths = doc.body.paths as Record<string, Record<string, { 'x-shoal-role'?: string }>>;
    ops = Object.entries(paths).flatMap(([p, byMethod]) => Object.entries(byMethod).map(([method, op]) => ({ method: method.toUpperCase(), path: p, role: op['x-shoal-role'] ?? '' })));
  });

  it('every operation in the OpenAPI document declares a role', () => {
    expect(ops.length).toBeGreaterThan(30);
    expect(ops.filter((o) => !['public', 'reader', 'operator', 'admin'].includes(o.role))).toEqual([]);
    // What must stay open, and what must not.
    const publicOps = ops.filter((o) => o.role === 'public').map((o) => `${o.method} ${o.path}`).sort();
    // The console's files (/ui) hold no data: the page asks for a credential before it reads anything.
    // Joining (src/api/join-routes.ts, node-cert-routes.ts, ca-routes.ts): the token, or a node's key, is the credential.
    expect(publicOps).toEqual([
      'GET /docs', 'GET /docs/openapi.json', 'GET /healthz', 'GET /readyz', 'GET /ui', 'GET /ui/', 'GET /ui/app.css', 'GET /ui/app.js',
      'GET /v1/join/ca', 'POST /v1/join', 'POST /v1/join/ca-key', 'POST /v1/join/renew', 'POST /v1/ca/next-key',
    ].sort());
    expect(ops.filter((o) => o.method !== 'GET' && o.role === 'reader')).toEqual([]);
  });

  /** A concrete URL for an OpenAPI path; ids that exist, so a refusal is about the role, not a 404. */
  const concrete = (p: string): string => p.replace('{collection}', 'sec').replace('{id}', 'one').replace('{name}', 'web').replace('{ref}', 'n1');

  async function refusedEverywhere(cred: ClientCredential, held: string, denied: (o: Op) => boolean): Promise<void> {
    const targets = ops.filter(denied);
    expect(targets.length).toBeGreaterThan(0);
    const before = revision();
    for (const o of targets) {
      const r = await call(node(), cred, o.method, concrete(o.path), o.method === 'GET' || o.method === 'DELETE' ? undefined : {});
      expect(r.status, `${held} at ${o.method} ${o.path}`).toBe(403);
      expect(r.body).toMatchObject({ code: 'forbidden', details: { role: held, needed: o.role } });
    }
    expect(revision()).toBe(before);
  }

  it('refuses a reader every mutating route: 403, the store unchanged', async () => {
    const { token } = await bearer('reader', 'reader-2');
    await refusedEverywhere({ caPem: c.ca.certPem, token }, 'reader', (o) => o.method !== 'GET' && o.role !== 'public');
  });

  it('refuses an operator every admin route: 403, the store unchanged', async () => {
    const operator = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'olga', role: 'operator' }) };
    await refusedEverywhere(operator, 'operator', (o) => o.role === 'admin');
  });

  it('lets a reader read', async () => {
    const { token } = await bearer('reader', 'reader-3');
    for (const p of ['/v1/docs/sec/one', '/v1/docs/sec', '/v1/cluster', '/v1/services', '/v1/nodes', '/v1/tasks', '/metrics']) {
      expect((await call(node(), { caPem: c.ca.certPem, token }, 'GET', p)).status, p).toBe(200);
    }
  });
});

describe('rate limit on authentication failures', () => {
  it('answers 429 too_many_requests with Retry-After once an address has failed too often', async () => {
    const before = revision();
    const bad: ClientCredential = { caPem: c.ca.certPem, token: `shoal_0123456789abcdef.${'x'.repeat(43)}` };
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 30; i++) {
      last = await call(node(), bad, 'GET', '/v1/docs/sec/one');
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.at(-1)).toBe(429);
    expect(last?.body).toMatchObject({ code: 'too_many_requests', details: { limit: 'authFailures' } });
    expect(Number(last?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // While refused, a good credential from the same address is refused too: no guessing on the side.
    expect((await call(node(), admin, 'GET', '/v1/docs/sec/one')).status).toBe(429);
    expect(revision()).toBe(before);
  });
});

export type { PemPair };
