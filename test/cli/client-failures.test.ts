// Failures that name their cause (src/cli/no-answer.ts, failure-report.ts), against one real
// node in this process serving HTTPS with authentication, as `shoal init` makes one: a body over
// the node's limit, a credential of another CA, no credential and a refused one, and a port
// where nothing listens, each with what to do. Then `shoal login --local` against the node's
// real data directory: a voter's signs, a learner's (no CA key) is refused. A scripted server
// stands in for the one cause one node cannot show cheaply: a CA retired by a rotation.
// Heavy (a node with its transport): run under `flock /tmp/shoal-heavy.lock`.

import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { freePort } from '../../bench/lib/proc.ts';
import { CliFailure, UnreachableError } from '../../src/cli/client.ts';
import { useCredentialFlags, writeCredential, type CredentialFile } from '../../src/cli/credential-file.ts';
import { labelProblems } from '../../src/cli/node.ts';
import { explainNoAnswer, probeWithoutBody } from '../../src/cli/no-answer.ts';
import { loadConfig } from '../../src/server/config.ts';
import { initNode } from '../../src/node/identity.ts';
import { startNode, type RunningNode } from '../../src/server/server.ts';
import { silentLogger } from '../../src/log.ts';
import { fingerprintOf } from '../../src/security/authority.ts';
import { createCa, issueNodeCert, type PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { waitFor } from '../transport/helpers.ts';
import { inProcess } from './in-process.ts';

/** The node's body limit, small so that a body over it is cheap to send. */
const bodyBytesMax = 4096;

let root: string;
let dataDir: string;
let node: RunningNode;
let addr: string;
let ca: PemPair;
let adminFile: string;

const credentialOf = (more: Partial<CredentialFile>): CredentialFile => ({
  version: 1, clusterId: node.identity.clusterId, ca: ca.certPem, addresses: [addr], principal: 'alice', role: 'admin', ...more,
});

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'shoal-failures-'));
  dataDir = path.join(root, 'n1');
  const identity = await initNode({ dataDir, name: 'n1' });
  addr = `127.0.0.1:${await freePort()}`;
  const peer = `127.0.0.1:${await freePort()}`;
  writeFileSync(path.join(dataDir, 'shoal.yaml'), stringify({
    dataDir, api: { listen: addr }, peer: { listen: peer }, bootstrap: [{ id: identity.id, name: 'n1', apiAddress: addr, peerAddress: peer }],
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200 }, runtime: { kind: 'none' }, limits: { bodyBytesMax },
  }));
  node = await startNode(loadConfig(path.join(dataDir, 'shoal.yaml')), silentLogger);
  await waitFor('a leader', () => node.node.isLeader, 20_000);
  ca = { certPem: readFileSync(path.join(dataDir, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(dataDir, 'tls', 'ca.key'), 'utf8') };
  const admin = await issueClientCert(ca, { principal: 'alice', role: 'admin' });
  adminFile = path.join(root, 'admin.json');
  writeCredential(adminFile, credentialOf({ cert: admin.certPem, key: admin.keyPem }));
}, 60_000);

afterAll(async () => {
  useCredentialFlags({});
  await node?.stop();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

beforeEach(() => {
  // Each case picks its credential; none is found by itself unless the case says so.
  process.env.SHOAL_CONFIG = mkdtempSync(path.join(os.tmpdir(), 'shoal-failures-config-'));
  useCredentialFlags({});
});

const jsonError = (stderr: string): { code: string; message: string; hint?: string } & Record<string, unknown> =>
  (JSON.parse(stderr) as { error: { code: string; message: string; hint?: string } }).error;

describe('a body over the node\'s limit', () => {
  it('is named as such, with its size, the limit, and how to split it or raise the limit (exit 1)', async () => {
    const big = JSON.stringify({ blob: 'x'.repeat(bodyBytesMax + 500) });
    const r = await inProcess('doc', 'put', 'notes', 'big', '--data', big, '--credential', adminFile);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('payload_too_large');
    expect(r.stderr).toContain(`the body sent was ${Buffer.byteLength(big)} bytes, over ${addr}'s limits.bodyBytesMax (${bodyBytesMax} bytes)`);
    expect(r.stderr).toContain("Split it: fewer documents or specs per request (apply several smaller files); or raise limits.bodyBytesMax in every node's config");
    expect(r.stderr).not.toContain('cannot reach');
  });

  it('is found by sending the request head alone when the connection broke while the body was sent (EPIPE)', async () => {
    useCredentialFlags({ credential: adminFile });
    const { activeCredential } = await import('../../src/cli/credential-file.ts');
    const sent = { method: 'PUT', target: '/v1/docs/notes/big', headers: { 'content-type': 'application/json' }, bodyBytes: bodyBytesMax + 1 };
    const answer = await probeWithoutBody(addr, sent, activeCredential());
    expect(answer).toMatchObject({ status: 413, code: 'payload_too_large', requestBytes: bodyBytesMax + 1, body: { details: { limit: 'bodyBytesMax', max: bodyBytesMax } } });
    // What a broken pipe becomes: the node's own answer to the head.
    const epipe = Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }) });
    expect(await explainNoAnswer(addr, sent, epipe)).toMatchObject({ code: 'payload_too_large' });
    // A body within the limit: the node waits for it, so the probe says nothing and sends nothing more.
    expect(await probeWithoutBody(addr, { ...sent, bodyBytes: 100 }, activeCredential(), 300)).toBeUndefined();
    expect(node.store.get('notes', 'big')).toBeUndefined();
  });
});

describe('a node whose certificate is not of the pinned CA', () => {
  it('names both clusters and the file, and says to pick the right context (exit 1, ca_mismatch)', async () => {
    const other = await createCa('0ther0c1u5ter0id');
    const foreign = await issueClientCert(other, { principal: 'alice', role: 'admin' });
    const file = path.join(root, 'other-cluster.json');
    writeCredential(file, { ...credentialOf({ cert: foreign.certPem, key: foreign.keyPem }), clusterId: '0ther0c1u5ter0id', ca: other.certPem });
    const r = await inProcess('status', '--credential', file, '--json');
    expect(r.code, r.stderr).toBe(1);
    const e = jsonError(r.stderr);
    expect(e).toMatchObject({ code: 'ca_mismatch', reason: 'other_cluster', addr, file, clusterId: node.identity.clusterId, pinnedClusterId: '0ther0c1u5ter0id' });
    expect(e.message).toBe(`${addr} is a node of cluster ${node.identity.clusterId}, but ${file} (--credential) is a credential for cluster 0ther0c1u5ter0id: its certificate is not signed by the CA that credential pins (SELF_SIGNED_CERT_IN_CHAIN); nothing was sent`);
    expect(e.hint).toContain('shoal context ls');
  });
});

describe('credentials', () => {
  it('none at all, to an HTTPS node: says so and how to get one, instead of "cannot reach" (exit 1)', async () => {
    const r = await inProcess('status', '--addr', addr);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`shoal status: ${addr} serves HTTPS, and this command has no credential to call it with`);
    expect(r.stderr).toContain('shoal login --local --data <its data directory>');
    expect(r.stderr).not.toContain('cannot reach');
    expect(jsonError((await inProcess('status', '--addr', addr, '--json')).stderr)).toMatchObject({ code: 'unauthenticated', reason: 'missing', addr });
  });

  it('a refused bearer token names the file it came from and the API\'s reason, never "found no credential"', async () => {
    const file = path.join(root, 'bad-token.json');
    writeCredential(file, credentialOf({ token: `shoal_0123456789abcdef.${'b'.repeat(43)}` }));
    const r = await inProcess('doc', 'get', 'notes', 'a', '--credential', file);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('unauthenticated: the bearer token is malformed, unknown or revoked');
    expect(r.stderr).toContain(`the node refused the credential ${file} (--credential): alice, admin; its bearer token is unknown to this cluster, revoked, or mistyped`);
    expect(r.stderr).not.toContain('found no credential');
  });
});

describe('nothing listening', () => {
  it('is "cannot reach", with connection refused and the advice to start a node (exit 3)', async () => {
    const port = await freePort();
    const r = await inProcess('status', '--addr', `127.0.0.1:${port}`, '--credential', adminFile, '--json');
    expect(r.code).toBe(3);
    expect(jsonError(r.stderr)).toMatchObject({ code: 'unreachable', kind: 'refused', message: `cannot reach 127.0.0.1:${port}: nothing listens there (connection refused)` });
    expect(jsonError(r.stderr).hint).toMatch(/^is a node running there\?/);
  });
});

describe('shoal login --local', () => {
  it('on the founding voter: the node signs an admin certificate, records it, and it becomes the current context', async () => {
    const r = await inProcess('login', '--local', '--data', dataDir, '--name', 'root-n1', '--json');
    expect(r.code, r.stderr).toBe(0);
    const done = JSON.parse(r.stdout) as { clusterId: string; principal: string; context: string; credential: string; serial: string; addresses: string[] };
    expect(done).toMatchObject({ clusterId: node.identity.clusterId, principal: 'root-n1', context: 'n1', addresses: [addr] });
    expect(done.credential).toBe(path.join(process.env.SHOAL_CONFIG ?? '', 'contexts', 'n1.json'));
    // The CLI finds it by itself now.
    useCredentialFlags({});
    const status = await inProcess('status', '--json');
    expect(status.code, status.stderr).toBe(0);
    await waitFor('the certificate.issued event', () => node.events.clusterSince(0, ['certificate.issued']).some((e) => e.subject === 'root-n1'), 5_000);
    expect(node.events.clusterSince(0, ['certificate.issued']).find((e) => e.subject === 'root-n1')).toMatchObject({ details: { role: 'admin', serial: done.serial, by: node.identity.id } });
  });

  it('on a node without the CA key (a learner): refused with what to do, and nothing written', async () => {
    const learner = path.join(root, 'learner');
    cpSync(dataDir, learner, { recursive: true, filter: (src) => !src.endsWith('ca.key') && !src.includes(`${path.sep}raft`) });
    const r = await inProcess('login', '--local', '--data', learner);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${learner} holds no cluster CA key (tls/ca.key): node n1 is a learner, or a voter that has not received the key yet`);
    expect(r.stderr).toContain('shoal token create --role client --client-role admin');
    expect(existsSync(path.join(process.env.SHOAL_CONFIG ?? '', 'contexts'))).toBe(false);
  });

  it('with the node not running: refused (exit 3), nothing written', async () => {
    const stopped = path.join(root, 'stopped');
    cpSync(dataDir, stopped, { recursive: true, filter: (src) => !src.includes(`${path.sep}raft`) });
    const config = parseYaml(readFileSync(path.join(stopped, 'shoal.yaml'), 'utf8')) as { api: { listen: string } };
    config.api.listen = `127.0.0.1:${await freePort()}`;
    writeFileSync(path.join(stopped, 'shoal.yaml'), stringify(config));
    const r = await inProcess('login', '--local', '--data', stopped);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('did not answer: nothing listens there (connection refused). login --local has the node sign and record the credential, so the node must run; nothing was written');
    expect(existsSync(path.join(process.env.SHOAL_CONFIG ?? '', 'contexts'))).toBe(false);
  });

  it('refuses a directory that is not a node\'s', async () => {
    const r = await inProcess('login', '--local', '--data', root);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("not a node's data directory (no node.json there)");
  });
});

describe('without a node', () => {
  it('a CA retired by a rotation: says the file still pins it and to sign in again', async () => {
    // A node of a new CA that says it retired the one the credential pins (GET /v1/join/ca).
    const oldCa = await createCa('c0ffee0000000001');
    const newCa = await createCa('c0ffee0000000001');
    const leaf = await issueNodeCert(newCa, 'abcdef0123456789', { hosts: ['127.0.0.1'] });
    const server = https.createServer({ key: leaf.keyPem, cert: leaf.certPem }, (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ clusterId: 'c0ffee0000000001', caPem: newCa.certPem, fingerprint: fingerprintOf(newCa.certPem), retiredFingerprints: [fingerprintOf(oldCa.certPem)] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const at = `127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const file = path.join(root, 'old-ca.json');
      const cert = await issueClientCert(oldCa, { principal: 'alice', role: 'admin' });
      writeCredential(file, { version: 1, clusterId: 'c0ffee0000000001', ca: oldCa.certPem, addresses: [at], principal: 'alice', role: 'admin', cert: cert.certPem, key: cert.keyPem });
      const r = await inProcess('status', '--credential', file);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${at} is a node of cluster c0ffee0000000001, whose CA was replaced (shoal ca rotate) after this credential was made: ${file} (--credential) still pins the retired CA`);
      expect(r.stderr).toContain('sign in again: on a member, as root, shoal login --local');
    } finally {
      server.close();
    }
  });

  it('a connection closed with nothing to explain it stays "cannot reach", with its kind', async () => {
    const closed = Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
    useCredentialFlags({ credential: adminFile });
    const port = await freePort();
    const e = await explainNoAnswer(`127.0.0.1:${port}`, { method: 'GET', target: '/v1/cluster', headers: {}, bodyBytes: 0 }, closed);
    expect(e).toBeInstanceOf(UnreachableError);
    expect(e).toMatchObject({ kind: 'closed', message: `cannot reach 127.0.0.1:${port}: the connection was closed before an answer (UND_ERR_SOCKET: other side closed)` });
    const timeout = Object.assign(new Error('timed out'), { name: 'TimeoutError' });
    expect(await explainNoAnswer('127.0.0.1:1', { method: 'GET', target: '/', headers: {}, bodyBytes: 0, timeoutMs: 15_000 }, timeout)).toMatchObject({ kind: 'timeout', timedOut: true, reason: 'no answer in 15 s' });
    expect(e).not.toBeInstanceOf(CliFailure);
  });

  it('node label names the rule a bad key or value breaks, before sending anything (exit 2)', async () => {
    expect(labelProblems({ 'bad key': 'x', ok: 'a b' }, ['-x'])).toEqual([
      "label key 'bad key' (in 'bad key=x'): a label key is 1 to 253 of letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit (disk, example.com/zone)",
      "label value 'a b' (of ok): a value is up to 253 of letters, digits and . _ : / @ + - (no spaces, commas, quotes or parentheses, so constraints name it unquoted)",
      "--remove '-x': a label key is 1 to 253 of letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit (disk, example.com/zone)",
    ]);
    const r = await inProcess('node', 'label', 'n1', 'bad key=x', '--addr', '127.0.0.1:9');
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe("shoal node label: label key 'bad key' (in 'bad key=x'): a label key is 1 to 253 of letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit (disk, example.com/zone)");
  });
});
