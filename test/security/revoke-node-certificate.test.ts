// Revoking the certificate a member uses, on a real three-node cluster (issue 23): the revocation
// reaches the peer transports (src/server/server.ts wires the deny-list in), which cut the node off
// in both directions at once. Unlike a removed node it does not halt; the other two keep quorum.

import { once } from 'node:events';
import { connect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueNodeCert, type PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';
import type { RunningNode } from '../../src/server/server.ts';
import { waitFor } from '../transport/helpers.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from './tls-node.ts';

let c: TlsCluster;
let admin: ClientCredential;
/** The member whose certificate the first test revokes; the second removes it. */
let victim: RunningNode | undefined;

beforeAll(async () => {
  c = await tlsCluster(3);
  admin = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'alice', role: 'admin' }) };
}, 60_000);
afterAll(async () => { await c?.close(); });

/** The serial of the node certificate a node serves its API with (the one its peers see too). */
async function servedSerial(n: RunningNode): Promise<string> {
  const [host, port] = n.apiAddress.split(':') as [string, string];
  const socket = connect({ host, port: Number(port), ca: c.ca.certPem, checkServerIdentity: checkNodeServerIdentity });
  await once(socket, 'secureConnect');
  const serial = socket.getPeerCertificate().serialNumber;
  socket.destroy();
  return serial;
}

/** A TLS connection with `cert` to `n`'s API that has answered one keep-alive request and stays open. */
async function keptAliveConnection(n: RunningNode, cert: PemPair): Promise<TLSSocket> {
  const [host, port] = n.apiAddress.split(':') as [string, string];
  const socket = connect({ host, port: Number(port), ca: c.ca.certPem, cert: cert.certPem, key: cert.keyPem, checkServerIdentity: checkNodeServerIdentity });
  await once(socket, 'secureConnect');
  socket.write(`GET /v1/cluster HTTP/1.1\r\nhost: ${host}\r\nconnection: keep-alive\r\n\r\n`);
  let text = '';
  socket.setEncoding('utf8');
  while (!/\r\n\r\n[\s\S]*\}/.test(text)) {
    const [chunk] = (await once(socket, 'data')) as [string];
    text += chunk;
  }
  expect(text).toMatch(/^HTTP\/1\.1 200/);
  return socket;
}

describe('revoking the certificate a member uses', () => {
  it('cuts that member off from its peers without halting it; the others keep writing', async () => {
    const leader = c.nodes.find((n) => n.node.isLeader)!;
    // Not the founding node: it holds the CA key the last test needs renewals signed with.
    victim = c.nodes.find((n) => !n.node.isLeader && n !== c.nodes[0])!;
    expect(victim.node.leaderId).toBe(leader.node.id);
    const serial = await servedSerial(victim);

    const r = await call(leader, admin, 'POST', '/v1/certificates/revoked', { serial, reason: 'drill' });
    expect(r.status).toBe(201);
    // Heard from no leader any more: its links were closed and its redials are refused.
    const cut = victim;
    await waitFor('the victim loses its leader', () => cut.node.leaderId === '', 10_000);
    expect(cut.node.failure).toBeUndefined();

    const w = await call(leader, admin, 'PUT', '/v1/docs/sec/after', { a: 1 });
    expect(w.status).toBe(200);
    expect(cut.store.get('sec', 'after')).toBeUndefined();
  });
});

describe('removing a member', () => {
  it('makes the API refuse its node certificate (it was admin there), and closes its open API connection', async () => {
    const leader = c.nodes.find((n) => n.node.isLeader)!;
    // The member cut off above: removing it leaves the other two, a quorum.
    const gone = victim!;
    const goneCert = await issueNodeCert(c.ca, gone.identity.id, { hosts: ['127.0.0.1'] });
    const socket = await keptAliveConnection(leader, goneCert);
    const closed = once(socket, 'close');

    const r = await call(leader, admin, 'DELETE', `/v1/cluster/members/${gone.identity.id}`);
    expect(r.status).toBe(200);
    await closed;
    const refused = await call(leader, { caPem: c.ca.certPem, cert: goneCert }, 'GET', '/v1/cluster');
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'removed' } });
  });
});

describe('renewing a member now and revoking its old certificate', () => {
  it('keeps the member in the cluster: it redials with the new certificate, the old one is refused', async () => {
    const leader = c.nodes.find((n) => n.node.isLeader)!;
    const other = c.nodes.find((n) => n !== leader && n !== victim)!;
    const oldSerial = (await servedSerial(other)).toLowerCase();
    // Only the founding node was given the CA key; the other voter fetches it within seconds
    // (ca_key_unavailable, retryable, until the member asked holds it).
    let r = await call(other, admin, 'POST', '/v1/certificates/renew', { revokeOld: true, reason: 'key leaked' });
    for (let i = 0; i < 40 && r.body.code === 'ca_key_unavailable'; i++) {
      await new Promise((done) => setTimeout(done, 500));
      r = await call(other, admin, 'POST', '/v1/certificates/renew', { revokeOld: true, reason: 'key leaked' });
    }
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ nodeId: other.identity.id, oldSerial, revoked: { serial: oldSerial, kind: 'node', reason: 'key leaked' } });
    expect(r.body.newSerial).not.toBe(oldSerial);
    // Its API serves the new certificate, and the two of them still make a quorum: writes commit
    // and reach it over connections made with the new certificate.
    expect((await servedSerial(other)).toLowerCase()).toBe(r.body.newSerial);
    const w = await call(leader, admin, 'PUT', '/v1/docs/sec/renewed', { a: 1 });
    expect(w.status).toBe(200);
    await waitFor('the write on the renewed member', () => other.store.get('sec', 'renewed') !== undefined, 10_000);
    expect(other.node.failure).toBeUndefined();
  });
});
