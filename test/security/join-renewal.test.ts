// Certificates that renew themselves, and the CA key for voters, against one in-memory node's API
// on a real port: a member renews with a new key by proving its current one (expired or not); a
// removed node or a forged proof is refused; the CA key goes sealed to a voter only.

import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SingleNode } from '../api/single-node.ts';
import { caNode } from './ca-node.ts';
import { catalogued } from '../api/expect-error.ts';
import { exportKeyPem, generateKeys, issueNodeCert, signNodeKey, type PemPair } from '../../src/security/certificates.ts';
import { createCsr } from '../../src/security/csr.ts';
import { CertRenewer, renewAtMs, renewFractionMax, renewFractionMin } from '../../src/security/renewal.ts';
import { CaKeyFetcher } from '../../src/security/ca-key-fetcher.ts';
import { openWithKey, type SealedBox } from '../../src/security/sealed-box.ts';
import { confChangeContext } from '../../src/resources/membership.ts';
import type { Tls } from '../../src/node/identity.ts';
import { silentLogger } from '../../src/log.ts';
import { proposeCommand } from '../../src/api/token-routes.ts';
import { caHoldersCollection } from '../../src/security/ca-holders.ts';

let n: SingleNode;
let ca: PemPair;
let addr: string;

beforeAll(async () => {
  ({ n, ca, addr } = await caNode());
});
afterAll(async () => { await n.close(); });

let seq = 0;
/** A learner member with a certificate from `opts` (expired, if asked), and its data directory. */
async function member(opts: { expired?: boolean } = {}): Promise<{ id: string; dir: string; tls: Tls }> {
  const id = `member${++seq}`;
  await n.node.changeMembership({ changes: [{ type: 'addLearner', node: id }], context: confChangeContext([{ id, name: id, peerAddress: `127.0.0.1:${9300 + seq}`, apiAddress: `127.0.0.1:${9400 + seq}` }]) });
  const keys = await generateKeys();
  const past = new Date(Date.now() - 10 * 24 * 3600 * 1000);
  const { certPem } = await signNodeKey(ca, id, keys.publicKey, { hosts: [], ...(opts.expired === true ? { now: past, validDays: 1 } : {}) });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-renew-'));
  mkdirSync(path.join(dir, 'tls'));
  return { id, dir, tls: { caPem: ca.certPem, certPem, keyPem: await exportKeyPem(keys.privateKey) } };
}

const renewer = (m: { id: string; dir: string; tls: Tls }, onRenewed: (tls: Tls) => void = () => {}): CertRenewer => new CertRenewer({
  dataDir: m.dir, nodeId: m.id, tls: m.tls, members: () => ({ list: [{ id: 'solo', apiAddress: addr }], leader: 'solo' }), onRenewed, log: silentLogger, scheme: 'http',
});

describe('certificate renewal', () => {
  it('plans the renewal between 1/2 and 4/5 of the lifetime', () => {
    expect(renewAtMs(1000, 2000, 0)).toBe(1000 + 1000 * renewFractionMin);
    expect(renewAtMs(1000, 2000, 0.999_999)).toBeCloseTo(1000 + 1000 * renewFractionMax, 2);
    expect(renewAtMs(0, 100, 0.5)).toBe(65);
  });

  it('renews with a new key, proven by the current one, writes both and hands them over', async () => {
    const m = await member();
    const before = { ...m.tls };
    let handed: Tls | undefined;
    await renewer(m, (tls) => { handed = tls; }).renewNow();
    expect(m.tls.keyPem).not.toBe(before.keyPem);
    const cert = new X509Certificate(m.tls.certPem);
    expect(cert.serialNumber).not.toBe(new X509Certificate(before.certPem).serialNumber);
    expect(cert.subject).toContain(`CN=${m.id}`);
    expect(readFileSync(path.join(m.dir, 'tls', 'node.crt'), 'utf8')).toBe(m.tls.certPem);
    expect(readFileSync(path.join(m.dir, 'tls', 'node.key'), 'utf8')).toBe(m.tls.keyPem);
    expect(handed).toBe(m.tls);
  });

  it('renews a certificate that has expired (the node was off), as long as the node is a member', async () => {
    const m = await member({ expired: true });
    expect(Date.parse(new X509Certificate(m.tls.certPem).validTo)).toBeLessThan(Date.now());
    await renewer(m).renewNow();
    expect(Date.parse(new X509Certificate(m.tls.certPem).validTo)).toBeGreaterThan(Date.now());
  });

  it('renews at once, by itself, a certificate whose renewal point has passed (a short lifetime)', async () => {
    const m = await member();
    const keys = await generateKeys();
    // Valid for about a tenth of a second (and backdated five minutes): half its life is past.
    m.tls.certPem = (await signNodeKey(ca, m.id, keys.publicKey, { hosts: [], validDays: 1e-6 })).certPem;
    m.tls.keyPem = await exportKeyPem(keys.privateKey);
    const renewed = new Promise<Tls>((resolve) => { renewer(m, resolve).start(); });
    const tls = await renewed;
    expect(Date.parse(new X509Certificate(tls.certPem).validTo)).toBeGreaterThan(Date.now() + 24 * 3600 * 1000);
  });

  it('refuses a forged proof and a removed node, and changes nothing', async () => {
    const m = await member();
    const { csrPem } = await createCsr(m.id);
    const forged = catalogued(await n.app.inject({ method: 'POST', url: '/v1/join/renew', payload: { nodeId: m.id, certPem: m.tls.certPem, csr: csrPem, proof: Buffer.from('nope').toString('base64') } }));
    expect(forged).toMatchObject({ code: 'certificate_refused', details: { reason: 'bad_proof' } });
    const other = await issueNodeCert(ca, 'stranger', { hosts: [] });
    expect(catalogued(await n.app.inject({ method: 'POST', url: '/v1/join/renew', payload: { nodeId: 'stranger', certPem: other.certPem, csr: csrPem, proof: 'AA==' } })))
      .toMatchObject({ code: 'certificate_refused', details: { reason: 'not_member' } });
    await n.node.changeMembership({ changes: [{ type: 'removeNode', node: m.id }] });
    const certBefore = m.tls.certPem;
    await expect(renewer(m).renewNow()).rejects.toThrow(/removed/);
    expect(m.tls.certPem).toBe(certBefore);
  });
});

describe('the CA key for voters', () => {
  it('goes to a voter sealed to its certificate, and is refused to a learner', async () => {
    const solo = await issueNodeCert(ca, 'solo', { hosts: [] });
    const res = await n.app.inject({ method: 'POST', url: '/v1/join/ca-key', payload: { nodeId: 'solo', certPem: solo.certPem } });
    expect(res.statusCode, res.body).toBe(200);
    const sealed = (res.json() as { sealed: SealedBox }).sealed;
    expect(JSON.stringify(sealed)).not.toContain('PRIVATE KEY');
    expect(openWithKey(solo.keyPem, sealed)).toBe(ca.keyPem);
    const learner = await member();
    expect(catalogued(await n.app.inject({ method: 'POST', url: '/v1/join/ca-key', payload: { nodeId: learner.id, certPem: learner.tls.certPem } })))
      .toMatchObject({ code: 'certificate_refused', details: { reason: 'not_voter' } });
  });

  it('is fetched by a voter that lacks it, checked against the CA certificate, and written 0600', async () => {
    const solo = await issueNodeCert(ca, 'solo', { hosts: [] });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-cakey-'));
    mkdirSync(path.join(dir, 'tls'));
    const fetcher = new CaKeyFetcher({
      dataDir: dir, nodeId: 'solo', tls: { caPem: ca.certPem, ...solo }, isVoter: () => true,
      members: () => ({ list: [{ id: 'elsewhere', apiAddress: addr }], leader: 'elsewhere' }), log: silentLogger, scheme: 'http',
    });
    expect(await fetcher.maybeFetch()).toBe(true);
    expect(readFileSync(path.join(dir, 'tls', 'ca.key'), 'utf8')).toBe(ca.keyPem);
  });
});

describe('removing a member that held the CA key', () => {
  it('answers with a warning to rotate the CA; removing one that did not, without', async () => {
    const holder = await member();
    const plain = await member();
    await proposeCommand(n.ctx, 'test', { op: 'put', collection: caHoldersCollection, id: holder.id, doc: { since: 1 } });
    const removed = await n.app.inject({ method: 'DELETE', url: `/v1/cluster/members/${holder.id}` });
    expect(removed.statusCode, removed.body).toBe(200);
    expect((removed.json() as { warning?: string }).warning).toMatch(/held the cluster CA key.*shoal ca rotate/);
    const other = await n.app.inject({ method: 'DELETE', url: `/v1/cluster/members/${plain.id}` });
    expect(other.json()).not.toHaveProperty('warning');
  });
});
