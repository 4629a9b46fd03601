// Node-to-node HTTP over TLS: a follower forwards a cluster change to the leader with its node
// certificate, naming the original caller; the caller's role is checked before anything is
// forwarded, and the leader takes the forwarded principal only from a node.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { issueNodeCert } from '../../src/security/certificates.ts';
import { waitFor } from '../transport/helpers.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from './tls-node.ts';

let c: TlsCluster;
let admin: ClientCredential;

beforeAll(async () => {
  c = await tlsCluster(3);
  admin = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'alice', role: 'admin' }) };
}, 60_000);
afterAll(async () => { await c?.close(); });

const leader = () => c.nodes.find((n) => n.node.isLeader)!;
const follower = () => c.nodes.find((n) => !n.node.isLeader)!;

describe('forwarding between nodes over TLS', () => {
  it("answers GET /v1/cluster on a follower with the leader's view, fetched over TLS", async () => {
    const r = await call(follower(), admin, 'GET', '/v1/cluster');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ leader: leader().identity.id, node: leader().identity.id });
  });

  it('refuses a reader at a follower before forwarding, and an operator too', async () => {
    const reader = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'rita', role: 'reader' }) };
    const operator = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'olga', role: 'operator' }) };
    const before = leader().identity.id;
    for (const cred of [reader, operator]) {
      const r = await call(follower(), cred, 'POST', '/v1/cluster/leader', {});
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ code: 'forbidden', details: { needed: 'admin' } });
    }
    expect(leader().identity.id).toBe(before);
  });

  it("forwards an admin's leadership transfer from a follower to the leader", async () => {
    const from = follower();
    const old = leader().identity.id;
    const r = await call(from, admin, 'POST', '/v1/cluster/leader', { to: from.identity.id });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await waitFor('the new leader', () => from.node.isLeader, 15_000);
    expect(leader().identity.id).not.toBe(old);
  });

  it('takes X-Shoal-Principal from a node certificate of this cluster, and never its role beyond what it says', async () => {
    // What a follower sends when it forwards a reader's request: the leader applies the reader's role.
    const nodeCert = await issueNodeCert(c.ca, 'node-like-peer', { hosts: ['127.0.0.1'] });
    const asNode = { caPem: c.ca.certPem, cert: nodeCert, headers: { 'x-shoal-principal': 'rita', 'x-shoal-role': 'reader' } };
    const r = await call(leader(), asNode, 'PUT', '/v1/docs/fwd/x', { a: 1 });
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ code: 'forbidden', details: { role: 'reader', needed: 'operator' } });
    const w = await call(leader(), { ...asNode, headers: { 'x-shoal-principal': 'olga', 'x-shoal-role': 'operator' } }, 'PUT', '/v1/docs/fwd/x', { a: 1 });
    expect(w.status).toBe(200);
    // A forwarded principal without a role is refused: a node must say which role it vouches for.
    const n = await call(leader(), { ...asNode, headers: { 'x-shoal-principal': 'olga' } }, 'PUT', '/v1/docs/fwd/y', { a: 1 });
    expect(n.status).toBe(401);
    expect(n.body).toMatchObject({ code: 'unauthenticated', details: { reason: 'forwarded_role' } });
  });
});
