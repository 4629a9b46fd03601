// Bearer tokens expire (src/api/bearer-tokens.ts, credentials-routes.ts): 90 days unless asked
// otherwise, at most 366, or never when asked for explicitly; an expired token is refused with
// 401 unauthenticated, reason token_expired (only to a caller holding its secret), and a record
// written before expiry existed (no expiresAtMs) keeps working as one that never expires.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { singleNode, type SingleNode } from './single-node.ts';
import {
  bearerTtlMsDefault, bearerTtlMsMax, credentialsCollection, lookupBearer, newBearer, type BearerRecord,
} from '../../src/api/bearer-tokens.ts';
import { proposeCommand } from '../../src/api/token-routes.ts';
import type { JsonObject } from '../../fsm/types.ts';

let n: SingleNode;

beforeAll(async () => {
  n = await singleNode();
});
afterAll(async () => {
  await n.close();
});

interface View { id: string; token?: string; createdAtMs: number; expiresAtMs: number | null; expired: boolean }

async function create(body: Record<string, unknown>): Promise<{ status: number; body: View & { code?: string; details?: unknown } }> {
  const res = await n.app.inject({ method: 'POST', url: '/v1/credentials', payload: { principal: 'bot', role: 'operator', ...body } });
  return { status: res.statusCode, body: res.json() };
}

/** Writes a bearer record straight into the store (as an older release, or time passing, would leave it). */
async function planted(extra: Partial<BearerRecord>): Promise<{ id: string; token: string }> {
  const fresh = newBearer();
  const record: BearerRecord = { kind: 'bearer', principal: 'planted', role: 'operator', secretSha256: fresh.secretSha256, createdBy: 'test', createdAtMs: 1, ...extra };
  const r = await proposeCommand(n.ctx, 'test', { op: 'put', collection: credentialsCollection, id: fresh.id, doc: record as unknown as JsonObject });
  expect(r.ok).toBe(true);
  return { id: fresh.id, token: fresh.token };
}

const putWith = (token: string, id: string) => n.app.inject({ method: 'PUT', url: `/v1/docs/apps/${id}`, payload: { v: 1 }, headers: { authorization: `Bearer ${token}` } });

describe('bearer token expiry', () => {
  it('gives a new token 90 days unless the request names a lifetime', async () => {
    const r = await create({});
    expect(r.status).toBe(201);
    expect(r.body.expiresAtMs).toBe(r.body.createdAtMs + bearerTtlMsDefault);
    expect(r.body.expired).toBe(false);
    const short = await create({ ttlMs: 3_600_000 });
    expect(short.body.expiresAtMs).toBe(short.body.createdAtMs + 3_600_000);
    expect((await putWith(short.body.token ?? '', 'by-short')).statusCode).toBe(200);
  });

  it('makes a token that never expires only when asked with ttlMs null', async () => {
    const r = await create({ ttlMs: null });
    expect(r.status).toBe(201);
    expect(r.body.expiresAtMs).toBeNull();
    expect((await putWith(r.body.token ?? '', 'by-forever')).statusCode).toBe(200);
  });

  it('refuses a lifetime past the bound, or too short to use, and writes nothing', async () => {
    const before = n.store.list(credentialsCollection, { limit: 1000 }).items.length;
    for (const ttlMs of [bearerTtlMsMax + 1, 999, 0, -5, 1.5]) {
      const r = await create({ ttlMs });
      expect(r.status, String(ttlMs)).toBe(400);
      expect(r.body.code).toBe('bad_request');
    }
    expect(n.store.list(credentialsCollection, { limit: 1000 }).items.length).toBe(before);
  });

  it('refuses an expired token with 401 token_expired, says what to do, and writes nothing', async () => {
    const { id, token } = await planted({ expiresAtMs: Date.now() - 1000 });
    const rev = n.store.revision;
    const res = await putWith(token, 'by-expired');
    expect(res.statusCode).toBe(401);
    const body = res.json() as { code: string; message: string; details: Record<string, unknown> };
    expect(body).toMatchObject({ code: 'unauthenticated', details: { reason: 'token_expired', id } });
    expect(body.message).toMatch(/expired at .*shoal credential create/);
    expect(n.store.revision).toBe(rev);
    expect(n.store.get('apps', 'by-expired')).toBeUndefined();
  });

  it('tells expiry only to the holder of the secret: a wrong secret is just unknown', async () => {
    const { id } = await planted({ expiresAtMs: Date.now() - 1000 });
    const res = await putWith(`shoal_${id}.${'A'.repeat(43)}`, 'by-guess');
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ code: 'unauthenticated', details: { reason: 'token' } });
  });

  it('keeps a record without expiresAtMs (the previous release\'s) working, listed as never expiring', async () => {
    const { id, token } = await planted({});
    expect((await putWith(token, 'by-old')).statusCode).toBe(200);
    const listed = (await n.app.inject({ method: 'GET', url: '/v1/credentials' })).json() as { items: View[] };
    expect(listed.items.find((c) => c.id === id)).toMatchObject({ expiresAtMs: null, expired: false });
  });

  it('lists an expired token as expired', async () => {
    const { id } = await planted({ expiresAtMs: Date.now() - 1000 });
    const listed = (await n.app.inject({ method: 'GET', url: '/v1/credentials' })).json() as { items: View[] };
    expect(listed.items.find((c) => c.id === id)).toMatchObject({ expired: true });
  });

  it('expires exactly at expiresAtMs (lookupBearer with a given clock)', async () => {
    const { token } = await planted({ expiresAtMs: 5_000 });
    expect(lookupBearer(n.store, token, 4_999)).toMatchObject({ ok: true });
    expect(lookupBearer(n.store, token, 5_000)).toMatchObject({ ok: false, reason: 'expired', expiresAtMs: 5_000 });
    expect(lookupBearer(n.store, 'shoal_nothex.x', 0)).toEqual({ ok: false, reason: 'unknown' });
  });
});
