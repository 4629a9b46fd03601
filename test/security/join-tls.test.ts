// shoal join and login against a real node serving its API over HTTPS with authentication (in
// this process): the CA is fetched over TLS trusting nothing, the token sent over TLS pinned to
// it; an admin makes the token with a client certificate, and a reader may not.

import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { loadIdentity } from '../../src/node/identity.ts';
import { inProcess } from '../cli/in-process.ts';
import { call, tlsCluster, type ClientCredential, type TlsCluster } from './tls-node.ts';

let c: TlsCluster;
let admin: ClientCredential;
const tmp = (): string => mkdtempSync(path.join(os.tmpdir(), 'shoal-join-tls-'));

beforeAll(async () => {
  c = await tlsCluster(1);
  admin = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'alice', role: 'admin' }) };
});
afterAll(async () => { await c.close(); });

describe('joining over TLS', () => {
  it('needs an admin to make a token; joins with it over TLS; a second use is refused', async () => {
    const node = c.nodes[0];
    if (node === undefined) throw new Error('no node');
    const reader = { caPem: c.ca.certPem, cert: await issueClientCert(c.ca, { principal: 'rita', role: 'reader' }) };
    expect((await call(node, reader, 'POST', '/v1/tokens', { role: 'voter' })).status).toBe(403);
    const made = await call(node, admin, 'POST', '/v1/tokens', { role: 'learner' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const token = made.body.token as string;
    const dir = path.join(tmp(), 'n2');
    const r = await inProcess('join', node.apiAddress, '--token', token, '--name', 'n2', '--data', dir, '--api', '127.0.0.1:7401', '--peer', '127.0.0.1:7501', '--no-start', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(loadIdentity(dir)).toMatchObject({ name: 'n2', clusterId: node.identity.clusterId });
    expect(node.node.confState().learners).toContain(loadIdentity(dir).id);
    const again = path.join(tmp(), 'n3');
    const replay = await inProcess('join', node.apiAddress, '--token', token, '--name', 'n3', '--data', again, '--no-start', '--json');
    expect(JSON.parse(replay.stderr)).toMatchObject({ error: { code: 'token_invalid', details: { reason: 'used' } } });
    expect(existsSync(again)).toBe(false);
  });

  it('logs in with a client token over TLS, and the credential it writes works', async () => {
    const node = c.nodes[0];
    if (node === undefined) throw new Error('no node');
    const made = await call(node, admin, 'POST', '/v1/tokens', { role: 'client', clientRole: 'reader' });
    const r = await inProcess('login', node.apiAddress, '--token', made.body.token as string, '--name', 'bob', '--json');
    expect(r.code, r.stderr).toBe(0);
    const written = JSON.parse(r.stdout) as { principal: string; role: string; credential: string };
    expect(written).toMatchObject({ principal: 'bob', role: 'reader' });
    // The CLI reads with it (a reader may list the members) ...
    const members = await inProcess('cluster', 'members', '--credential', written.credential, '--json');
    expect(members.code, members.stderr).toBe(0);
    expect((JSON.parse(members.stdout) as { name: string }[]).map((m) => m.name)).toContain('n1');
    // ... and may not make tokens.
    const denied = await inProcess('token', 'create', '--role', 'voter', '--credential', written.credential, '--json');
    expect(JSON.parse(denied.stderr)).toMatchObject({ error: { code: 'forbidden' } });
  });
});
