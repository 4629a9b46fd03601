// Revoking the certificate a member uses, on a real three-node cluster (issue 23): the revocation
// reaches the peer transports (src/node/server.ts wires the deny-list in), which cut the node off
// in both directions at once. Unlike a removed node it does not halt; the other two keep quorum.

import { once } from 'node:events';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';
import type { RunningNode } from '../../src/node/server.ts';
import { waitFor } from '../transport/helpers.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from './tls-node.ts';

let c: TlsCluster;
let admin: ClientCredential;

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

describe('revoking the certificate a member uses', () => {
  it('cuts that member off from its peers without halting it; the others keep writing', async () => {
    const leader = c.nodes.find((n) => n.node.isLeader)!;
    const victim = c.nodes.find((n) => !n.node.isLeader)!;
    expect(victim.node.leaderId).toBe(leader.node.id);
    const serial = await servedSerial(victim);

    const r = await call(leader, admin, 'POST', '/v1/certificates/revoked', { serial, reason: 'drill' });
    expect(r.status).toBe(201);
    // Heard from no leader any more: its links were closed and its redials are refused.
    await waitFor('the victim loses its leader', () => victim.node.leaderId === '', 10_000);
    expect(victim.node.failure).toBeUndefined();

    const w = await call(leader, admin, 'PUT', '/v1/docs/sec/after', { a: 1 });
    expect(w.status).toBe(200);
    expect(victim.store.get('sec', 'after')).toBeUndefined();
  });
});
