// Revoking one certificate by serial, on a real node serving HTTPS (issue 23): the certificate
// works, is revoked, is then refused with 401 (reason revoked), a connection kept open with it
// is closed at once, and a revoked node certificate is not renewed.

import { X509Certificate, sign } from 'node:crypto';
import { once } from 'node:events';
import { connect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueNodeCert, type PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { createCsr } from '../../src/security/csr.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from './tls-node.ts';

let c: TlsCluster;
let admin: ClientCredential;
let bob: ClientCredential & { cert: PemPair };

beforeAll(async () => {
  c = await tlsCluster(1);
  admin = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'alice', role: 'admin' }) };
  bob = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'bob', role: 'operator' }) };
}, 30_000);
afterAll(async () => { await c?.close(); });

const node = () => c.nodes[0]!;

/** A TLS connection with bob's certificate that has answered one keep-alive request and stays open. */
async function keptAliveConnection(): Promise<TLSSocket> {
  const [host, port] = node().apiAddress.split(':') as [string, string];
  const socket = connect({ host, port: Number(port), ca: bob.caPem, cert: bob.cert.certPem, key: bob.cert.keyPem, checkServerIdentity: checkNodeServerIdentity });
  await once(socket, 'secureConnect');
  socket.write(`GET /v1/docs/sec/kept HTTP/1.1\r\nhost: ${host}\r\nconnection: keep-alive\r\n\r\n`);
  let text = '';
  socket.setEncoding('utf8');
  while (!/\r\n\r\n[\s\S]*\}/.test(text)) {
    const [chunk] = (await once(socket, 'data')) as [string];
    text += chunk;
  }
  expect(text).toMatch(/^HTTP\/1\.1 200/);
  expect(text.toLowerCase()).not.toContain('connection: close');
  return socket;
}

describe('revoking a client certificate', () => {
  it('works until revoked; then 401 revoked, and its open connection is closed at once', async () => {
    expect((await call(node(), bob, 'PUT', '/v1/docs/sec/kept', { a: 1 })).status).toBe(200);
    const socket = await keptAliveConnection();
    const closed = once(socket, 'close');

    const serial = new X509Certificate(bob.cert.certPem).serialNumber.toLowerCase();
    const r = await call(node(), admin, 'POST', '/v1/certificates/revoked', { certPem: bob.cert.certPem, reason: 'laptop stolen' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ serial, kind: 'client', revokedBy: 'alice', reason: 'laptop stolen', added: true });
    // A client certificate's entry goes when the certificate would have expired.
    expect(r.body.expiresAtMs).toBe(Date.parse(new X509Certificate(bob.cert.certPem).validTo));

    await closed;
    const before = node().store.get('sec', 'kept')?.rev;
    const refused = await call(node(), bob, 'PUT', '/v1/docs/sec/kept', { a: 2 });
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'revoked' } });
    // Nothing written (the node's own loops may write meanwhile, so not the store's revision).
    expect(node().store.get('sec', 'kept')).toMatchObject({ rev: before, doc: { a: 1 } });
  });

  it('lists it, and a second revocation of the same serial (any case) keeps the first entry', async () => {
    const serial = new X509Certificate(bob.cert.certPem).serialNumber;
    const again = await call(node(), admin, 'POST', '/v1/certificates/revoked', { serial });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ added: false, reason: 'laptop stolen' });
    const list = await call(node(), admin, 'GET', '/v1/certificates/revoked');
    expect(list.status).toBe(200);
    expect(list.body.items).toEqual([expect.objectContaining({ serial: serial.toLowerCase(), kind: 'client' })]);
  });

  it('is for admins only: an operator may neither revoke nor read the list', async () => {
    const carol = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'carol', role: 'operator' }) };
    expect((await call(node(), carol, 'POST', '/v1/certificates/revoked', { serial: 'abcd' })).status).toBe(403);
    expect((await call(node(), carol, 'GET', '/v1/certificates/revoked')).status).toBe(403);
    expect((await call(node(), carol, 'GET', '/v1/docs/shoal.revoked-certs/serials')).status).toBe(403);
  });

  it('refuses a body with neither or both of serial and certPem, and a serial that is not hex', async () => {
    for (const body of [{}, { serial: 'ab', certPem: bob.cert.certPem }, { serial: 'xyz' }, { certPem: c.ca.certPem }]) {
      const r = await call(node(), admin, 'POST', '/v1/certificates/revoked', body);
      expect(r.status, JSON.stringify(body).slice(0, 40)).toBe(400);
      expect(r.body.code).toBe('bad_request');
    }
  });
});

describe('revoking a node certificate', () => {
  it('is not renewed: POST /v1/join/renew answers certificate_refused (revoked)', async () => {
    const id = node().identity.id;
    const old = await issueNodeCert(c.ca, id, { hosts: ['127.0.0.1'] });
    const revoked = await call(node(), admin, 'POST', '/v1/certificates/revoked', { certPem: old.certPem });
    expect(revoked.status).toBe(201);
    // A node certificate renews past its own expiry, so its entry stays until the CA's.
    expect(revoked.body).toMatchObject({ kind: 'node', expiresAtMs: Date.parse(new X509Certificate(c.ca.certPem).validTo) });
    const { csrPem } = await createCsr(id);
    const proof = sign('sha256', Buffer.from(csrPem), old.keyPem).toString('base64');
    const r = await call(node(), { caPem: c.ca.certPem }, 'POST', '/v1/join/renew', { nodeId: id, certPem: old.certPem, csr: csrPem, proof });
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ code: 'certificate_refused', details: { reason: 'revoked' } });
  });
});
