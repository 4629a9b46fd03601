// Join tokens and POST /v1/join on one in-memory node: a token is redeemed once, a replay, an
// expired token, a revoked one and another cluster's are refused with token_invalid and change
// nothing; two redemptions of a single-use token at once: exactly one wins.

import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SingleNode } from '../api/single-node.ts';
import { caNode } from './ca-node.ts';
import { catalogued } from '../api/expect-error.ts';
import { createCa, type PemPair } from '../../src/security/certificates.ts';
import { createCsr } from '../../src/security/csr.ts';
import { memoryCaAuthority } from '../../src/security/authority.ts';
import { formatToken, hashSecret, joinIntentsCollection, newToken, parseToken, tokensCollection, type TokenRecord } from '../../src/security/tokens.ts';
import { nodeIdFromCertPem } from '../../src/security/identity.ts';
import { proposeCommand } from '../../src/api/token-routes.ts';
import type { JsonObject } from '../../fsm/types.ts';

let n: SingleNode;
let ca: PemPair;

beforeAll(async () => {
  ({ n, ca } = await caNode());
});
afterAll(async () => { await n.close(); });

async function makeToken(body: Record<string, unknown>): Promise<{ token: string; id: string }> {
  const res = await n.app.inject({ method: 'POST', url: '/v1/tokens', payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

let seq = 0;
async function joinBody(token: string): Promise<Record<string, unknown>> {
  const nodeId = `joiner${++seq}`;
  const { csrPem } = await createCsr(nodeId);
  return { kind: 'node', token, csr: csrPem, nodeId, name: `j${seq}`, peerAddress: `127.0.0.1:${9200 + seq}`, apiAddress: `127.0.0.1:${9100 + seq}` };
}

// Each from its own address: the refusals of one address are rate-limited (tested below).
let address = 0;
const join = async (payload: Record<string, unknown>, remoteAddress = `10.0.${Math.floor(++address / 250)}.${address % 250}`) => n.app.inject({ method: 'POST', url: '/v1/join', payload, remoteAddress });

describe('join tokens', () => {
  it('prints a token that pins the CA and stores only a hash of its secret', async () => {
    const { token, id } = await makeToken({ role: 'voter' });
    const parsed = parseToken(token);
    expect(parsed?.caFingerprint).toBe(n.ctx.security?.fingerprint);
    const stored = n.store.get(tokensCollection, id)?.doc as unknown as TokenRecord;
    expect(stored.secretSha256).toBe(hashSecret(parsed?.secret ?? ''));
    expect(JSON.stringify(stored)).not.toContain(parsed?.secret);
    const ca = await n.app.inject({ method: 'GET', url: '/v1/join/ca' });
    expect(ca.json()).toMatchObject({ clusterId: 'test-cluster', caPem: expect.stringContaining('BEGIN CERTIFICATE'), fingerprint: parsed?.caFingerprint });
  });

  it('redeems a voter token once: a signed certificate for the CSR key, a learner, an intent to promote; a replay is refused', async () => {
    const { token, id } = await makeToken({ role: 'voter', labels: { site: 'attic' } });
    const body = await joinBody(token);
    const res = await join(body);
    expect(res.statusCode, res.body).toBe(201);
    const answer = res.json() as { certPem: string; role: string };
    expect(answer.role).toBe('voter');
    expect(nodeIdFromCertPem(answer.certPem)).toBe(body.nodeId);
    expect(new X509Certificate(answer.certPem).checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(n.node.confState().learners).toContain(body.nodeId);
    expect(n.store.get(joinIntentsCollection, body.nodeId as string)?.doc).toMatchObject({ role: 'voter', token: id });
    const record = n.store.get(tokensCollection, id)?.doc as unknown as TokenRecord;
    expect(record.usesLeft).toBe(0);
    expect(record.redemptions).toEqual([expect.objectContaining({ subject: body.nodeId, name: body.name })]);
    const before = n.store.get(tokensCollection, id)?.rev;
    const replay = catalogued(await join(await joinBody(token)));
    expect(replay).toMatchObject({ code: 'token_invalid', details: { reason: 'used' } });
    expect(n.store.get(tokensCollection, id)?.rev).toBe(before);
    expect(n.node.confState().learners).toHaveLength(1);
  });

  it('lets exactly one of two simultaneous redemptions of a single-use token win', async () => {
    const { token } = await makeToken({ role: 'learner' });
    const [a, b] = await Promise.all([join(await joinBody(token)), join(await joinBody(token))]);
    expect([a.statusCode, b.statusCode].sort()).toEqual([201, 401]);
    const loser = a.statusCode === 401 ? a : b;
    expect(catalogued(loser)).toMatchObject({ code: 'token_invalid', details: { reason: 'used' } });
  });

  it('lets both of two simultaneous redemptions of a two-use token win, and a third lose', async () => {
    const { token, id } = await makeToken({ role: 'learner', uses: 2 });
    const answers = await Promise.all([join(await joinBody(token)), join(await joinBody(token))]);
    expect(answers.map((a) => a.statusCode)).toEqual([201, 201]);
    expect(catalogued(await join(await joinBody(token)))).toMatchObject({ details: { reason: 'used' } });
    expect((n.store.get(tokensCollection, id)?.doc as unknown as TokenRecord).redemptions).toHaveLength(2);
  });

  it('refuses an expired token and changes nothing', async () => {
    const t = newToken(n.ctx.security?.fingerprint ?? '');
    const record: TokenRecord = {
      id: t.id, role: 'voter', secretSha256: hashSecret(t.secret), createdAtMs: Date.now() - 7200_000, expiresAtMs: Date.now() - 3600_000,
      usesMax: 1, usesLeft: 1, labels: {}, createdBy: 'test', revoked: false, redemptions: [],
    };
    await proposeCommand(n.ctx, 'test', { op: 'put', collection: tokensCollection, id: t.id, doc: record as unknown as JsonObject });
    const rev = n.store.get(tokensCollection, t.id)?.rev;
    const learners = n.node.confState().learners.length;
    expect(catalogued(await join(await joinBody(formatToken(t))))).toMatchObject({ code: 'token_invalid', details: { reason: 'expired' } });
    expect(n.store.get(tokensCollection, t.id)?.rev).toBe(rev);
    expect(n.node.confState().learners).toHaveLength(learners);
  });

  it('waits for the token shoal init printed while the node has not written it yet; refuses to guess when the write was given up', async () => {
    const t = newToken(n.ctx.security?.fingerprint ?? '');
    const record: TokenRecord = {
      id: t.id, role: 'voter', secretSha256: hashSecret(t.secret), createdAtMs: Date.now(), expiresAtMs: Date.now() + 3600_000,
      usesMax: 1, usesLeft: 1, labels: {}, createdBy: 'shoal-init', revoked: false, redemptions: [],
    };
    // As src/security/founding-token.ts does: the record goes in once the node has led long enough.
    let pending: string | undefined = t.id;
    let settle = (_ok: boolean): void => {};
    const written = new Promise<boolean>((r) => { settle = r; });
    n.ctx.foundingToken = { pendingId: () => pending, written, cancel() {} };
    try {
      const joining = join(await joinBody(formatToken(t)));
      await new Promise((r) => setTimeout(r, 300));
      await proposeCommand(n.ctx, 'test', { op: 'put', collection: tokensCollection, id: t.id, doc: record as unknown as JsonObject });
      pending = undefined;
      settle(true);
      const res = await joining;
      expect(res.statusCode, res.body).toBe(201);
      expect((n.store.get(tokensCollection, t.id)?.doc as unknown as TokenRecord).usesLeft).toBe(0);
      // A founding token whose write was given up: a retryable refusal, not an unknown token.
      const other = newToken(n.ctx.security?.fingerprint ?? '');
      n.ctx.foundingToken = { pendingId: () => other.id, written: Promise.resolve(false), cancel() {} };
      expect(catalogued(await join(await joinBody(formatToken(other))))).toMatchObject({ code: 'no_leader', details: { token: other.id } });
      expect(n.store.get(tokensCollection, other.id)).toBeUndefined();
    } finally {
      n.ctx.foundingToken = undefined;
    }
  });

  it('refuses a revoked token, a wrong secret, a malformed token and another cluster\'s token', async () => {
    const { token, id } = await makeToken({ role: 'voter', uses: 3 });
    const wrong = parseToken(token);
    if (wrong === null) throw new Error('unparsable');
    const badSecret = formatToken({ ...wrong, secret: 'A'.repeat(43) });
    expect(catalogued(await join(await joinBody(badSecret)))).toMatchObject({ code: 'token_invalid', details: { reason: 'bad_secret' } });
    const otherCa = await createCa('other');
    const foreign = formatToken({ ...wrong, caFingerprint: memoryCaAuthority(otherCa).fingerprint });
    expect(catalogued(await join(await joinBody(foreign)))).toMatchObject({ code: 'token_invalid', details: { reason: 'other_cluster' } });
    expect(catalogued(await join(await joinBody('SHOAL1-nonsense')))).toMatchObject({ code: 'token_invalid', details: { reason: 'malformed' } });
    const revoked = await n.app.inject({ method: 'DELETE', url: `/v1/tokens/${id}` });
    expect(revoked.json()).toMatchObject({ id, state: 'revoked' });
    expect(catalogued(await join(await joinBody(token)))).toMatchObject({ code: 'token_invalid', details: { reason: 'revoked' } });
    expect((n.store.get(tokensCollection, id)?.doc as unknown as TokenRecord).redemptions).toEqual([]);
  });

  it('refuses a node token at login and a client token at join; a client token gives a client certificate with its role', async () => {
    const node = await makeToken({ role: 'learner' });
    const client = await makeToken({ role: 'client', clientRole: 'operator' });
    const { csrPem } = await createCsr('alice');
    expect(catalogued(await join({ kind: 'client', token: node.token, csr: csrPem, name: 'alice' }))).toMatchObject({ details: { reason: 'wrong_role' } });
    expect(catalogued(await join(await joinBody(client.token)))).toMatchObject({ details: { reason: 'wrong_role' } });
    const res = await join({ kind: 'client', token: client.token, csr: csrPem, name: 'alice' });
    expect(res.statusCode, res.body).toBe(201);
    const cert = new X509Certificate((res.json() as { certPem: string }).certPem);
    expect(cert.subject).toContain('CN=alice');
    expect(cert.subject).toContain('OU=operator');
  });

  it('lists tokens without their hashes, and validates what it is given', async () => {
    const list = await n.app.inject({ method: 'GET', url: '/v1/tokens' });
    const items = (list.json() as { items: Record<string, unknown>[] }).items;
    expect(items.length).toBeGreaterThan(3);
    expect(items.every((i) => !('secretSha256' in i) && typeof i.state === 'string')).toBe(true);
    const bad = catalogued(await n.app.inject({ method: 'POST', url: '/v1/tokens', payload: { role: 'king', uses: 0 } }));
    expect(bad.code).toBe('bad_request');
    expect((bad.details?.problems as unknown[]).length).toBe(2);
  });

  it('refuses a certificate request that names another node or is not signed by its key', async () => {
    const { token } = await makeToken({ role: 'learner' });
    const body = await joinBody(token);
    const other = await createCsr('someone-else');
    expect(catalogued(await join({ ...body, csr: other.csrPem }))).toMatchObject({ code: 'bad_request' });
    expect(catalogued(await join({ ...body, csr: 'not a csr' }))).toMatchObject({ code: 'bad_request' });
    // The token was not spent by the refused requests.
    expect((await join(body)).statusCode).toBe(201);
  });

  it('refuses an address that keeps presenting bad tokens for a while, even with a good one; others are unaffected', async () => {
    const { token } = await makeToken({ role: 'learner' });
    const bad = formatToken({ ...(parseToken(token) ?? newToken('')), secret: 'B'.repeat(43) });
    for (let i = 0; i < 10; i++) expect(catalogued(await join(await joinBody(bad), '192.0.2.7')).code).toBe('token_invalid');
    const limited = catalogued(await join(await joinBody(token), '192.0.2.7'));
    expect(limited).toMatchObject({ code: 'too_many_requests', details: { limit: 'joinRefusals' } });
    expect((await join(await joinBody(token), '192.0.2.8')).statusCode).toBe(201);
  });
});
