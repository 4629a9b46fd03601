// `shoal ca rotate` on a real three-node TLS cluster (issue 23): the CLI drives the rotation with
// its credential file while a client keeps writing; afterwards every node serves a certificate of
// the new CA, no voter keeps the old CA key, what the old CA signed is refused at the API and at
// the peer handshake, tokens made before are refused and new ones work, and the CLI still works.
// Heavy (a cluster): run under `flock /tmp/shoal-heavy.lock`.

import { existsSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:tls';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCredential, writeCredential, type CredentialFile } from '../../src/cli/credential-file.ts';
import { certFingerprint, issuerIn, splitPem } from '../../src/security/ca-bundle.ts';
import { issueNodeCert, type PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { createCsr } from '../../src/security/csr.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';
import { inProcess } from '../cli/in-process.ts';
import { waitFor } from '../transport/helpers.ts';
import { call, type ClientCredential } from './tls-node.ts';
import { rotationCluster, type Member } from './ca-rotate-cluster.ts';

let members: Member[] = [];
let root: string;
let oldCa: PemPair;
let credFile: string;

beforeAll(async () => {
  ({ root, members, oldCa } = await rotationCluster(3));
  const admin = await issueClientCert(oldCa, { principal: 'alice', role: 'admin' });
  credFile = path.join(root, 'credential.json');
  const cred: CredentialFile = {
    version: 1, clusterId: members[0]?.node.identity.clusterId ?? '', ca: oldCa.certPem, addresses: members.map((m) => m.node.apiAddress),
    principal: 'alice', role: 'admin', cert: admin.certPem, key: admin.keyPem,
  };
  writeCredential(credFile, cred);
}, 60_000);
afterAll(async () => {
  await Promise.all(members.map((m) => m.node.stop()));
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

/** What the credential file holds now, as a client of tls-node.ts uses it (re-read each time, as the CLI does). */
function fromFile(): ClientCredential {
  const c = readCredential({ file: credFile, source: '--credential' });
  return { caPem: c.ca, cert: { certPem: c.cert ?? '', keyPem: c.key ?? '' } };
}

/** A TLS handshake to `addr` that presents `cert` and trusts `caPem`; the error, or 'ok' once the server answered something. */
async function peerHandshake(addr: string, cert: PemPair, caPem: string): Promise<string> {
  const [host, port] = addr.split(':') as [string, string];
  const socket = connect({ host, port: Number(port), ca: caPem, cert: cert.certPem, key: cert.keyPem, checkServerIdentity: checkNodeServerIdentity });
  try {
    return await new Promise<string>((resolve) => {
      socket.once('error', (e) => resolve(e.message));
      // TLS 1.3: the server checks the client certificate after the client's Finished; a refusal is an alert read next.
      socket.once('secureConnect', () => { socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n'); });
      socket.once('data', () => resolve('ok'));
      socket.once('close', () => resolve('closed'));
    });
  } finally {
    socket.destroy();
  }
}

describe('shoal ca rotate on a three-node TLS cluster', () => {
  let oldToken = '';
  const failures: string[] = [];
  let writes = 0;

  it('rotates while writes keep succeeding, and keeps its credential file working', async () => {
    const leader = members.find((m) => m.node.node.isLeader) ?? members[0];
    const made = await call(leader!.node, fromFile(), 'POST', '/v1/tokens', { role: 'client', clientRole: 'reader', uses: 2 });
    expect(made.status).toBe(201);
    oldToken = String(made.body.token);
    let writing = true;
    const writer = (async () => {
      while (writing) {
        const m = members[writes % members.length] as Member;
        const r = await call(m.node, fromFile(), 'PUT', `/v1/docs/rot/w${writes}`, { n: writes });
        if (r.status !== 200) failures.push(`${m.node.identity.name}: ${r.status} ${JSON.stringify(r.body)}`);
        writes++;
      }
    })();
    const run = await inProcess('ca', 'rotate', '--yes', '--credential', credFile, '--timeout', '2m');
    writing = false;
    await writer;
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/phase reissue/);
    expect(run.stdout).toMatch(/phase done/);
    expect(failures).toEqual([]);
    expect(writes).toBeGreaterThan(10);
    const status = await inProcess('ca', 'rotate', '--status', '--credential', credFile, '--json');
    expect(status.code).toBe(0);
    const rotation = (JSON.parse(status.stdout) as { rotation: { phase: string; newFingerprint: string } }).rotation;
    expect(rotation.phase).toBe('done');
    // The CLI pinned the new CA alone, and its client certificate is the new CA's.
    const cred = readCredential({ file: credFile, source: '--credential' });
    expect(splitPem(cred.ca).map(certFingerprint)).toEqual([rotation.newFingerprint]);
    expect(issuerIn(cred.cert ?? '', cred.ca)).toBeDefined();
    const get = await inProcess('doc', 'get', 'rot', 'w0', '--credential', credFile);
    expect(get.code).toBe(0);
  }, 180_000);

  it('leaves every node on a certificate of the new CA, and no voter with the old CA key', async () => {
    const newCaPem = readCredential({ file: credFile, source: '--credential' }).ca;
    for (const m of members) {
      const tls = path.join(m.dir, 'tls');
      await waitFor(`${m.node.identity.name} serves a certificate of the new CA alone`, () => splitPem(readFileSync(path.join(tls, 'node.crt'), 'utf8')).length === 1, 10_000);
      expect(issuerIn(readFileSync(path.join(tls, 'node.crt'), 'utf8'), newCaPem)).toBeDefined();
      expect(readFileSync(path.join(tls, 'ca.crt'), 'utf8').trim()).toBe(newCaPem.trim());
      expect(readFileSync(path.join(tls, 'ca.key'), 'utf8')).not.toBe(oldCa.keyPem);
      expect(existsSync(path.join(tls, 'ca-next.key'))).toBe(false);
      // The API answers with the new CA's chain: a client pinning only the old CA is refused.
      const own = { certPem: readFileSync(path.join(tls, 'node.crt'), 'utf8'), keyPem: readFileSync(path.join(tls, 'node.key'), 'utf8') };
      expect(await peerHandshake(m.node.apiAddress, own, newCaPem)).toBe('ok');
      expect(await peerHandshake(m.node.apiAddress, own, oldCa.certPem)).toMatch(/verify|certificate/);
    }
  });

  it('refuses a node certificate of the old CA at the API and at the peer handshake', async () => {
    const newCaPem = readCredential({ file: credFile, source: '--credential' }).ca;
    const victim = members[1] as Member;
    const stale = await issueNodeCert(oldCa, victim.node.identity.id, { hosts: ['127.0.0.1'] });
    const api = await call(members[0]!.node, { caPem: newCaPem, cert: stale }, 'GET', '/v1/cluster');
    expect(api.status).toBe(401);
    expect(api.body).toMatchObject({ code: 'unauthenticated' });
    for (const m of members) {
      // The same request with the member's own certificate of the new CA is answered: the refusal is the old CA's.
      const tls = path.join(victim.dir, 'tls');
      const own = { certPem: readFileSync(path.join(tls, 'node.crt'), 'utf8'), keyPem: readFileSync(path.join(tls, 'node.key'), 'utf8') };
      expect(await peerHandshake(m.peerAddress, own, newCaPem)).toBe('ok');
      expect(await peerHandshake(m.peerAddress, stale, newCaPem)).not.toBe('ok');
    }
  });

  it('refuses a join token made before the rotation (ca_rotated); a new one works', async () => {
    const leader = members.find((m) => m.node.node.isLeader) ?? members[0];
    const { csrPem } = await createCsr('bob');
    const newCaPem = readCredential({ file: credFile, source: '--credential' }).ca;
    const old = await call(leader!.node, { caPem: newCaPem }, 'POST', '/v1/join', { kind: 'client', token: oldToken, csr: csrPem, name: 'bob' });
    expect(old.status).toBe(401);
    expect(old.body).toMatchObject({ code: 'token_invalid', details: { reason: 'ca_rotated' } });
    const made = await call(leader!.node, fromFile(), 'POST', '/v1/tokens', { role: 'client', clientRole: 'reader' });
    expect(String(made.body.token)).toContain(certFingerprint(newCaPem));
    const joined = await call(leader!.node, { caPem: newCaPem }, 'POST', '/v1/join', { kind: 'client', token: made.body.token, csr: csrPem, name: 'bob' });
    expect(joined.status).toBe(201);
    expect(issuerIn(String(joined.body.certPem), newCaPem)).toBeDefined();
  });
});
