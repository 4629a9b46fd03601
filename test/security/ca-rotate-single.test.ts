// `shoal ca rotate` on a one-node TLS cluster: with no other member to ask, the node signs its own
// renewal under the new CA (renewal.ts signLocally), so the rotation finishes there too. Started
// through the API and finished by the CLI (it resumes), with a bearer token's credential file.
// Heavy (a node with its transport): run under `flock /tmp/shoal-heavy.lock`.

import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCredential, writeCredential } from '../../src/cli/credential-file.ts';
import { certFingerprint, issuerIn, joinPem, splitPem } from '../../src/security/ca-bundle.ts';
import type { PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { inProcess } from '../cli/in-process.ts';
import { call, type ClientCredential } from './tls-node.ts';
import { rotationCluster, type Member } from './ca-rotate-cluster.ts';

let root: string;
let only: Member;
let oldCa: PemPair;

beforeAll(async () => {
  const c = await rotationCluster(1);
  root = c.root;
  only = c.members[0] as Member;
  oldCa = c.oldCa;
}, 60_000);
afterAll(async () => {
  await only?.node.stop();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

describe('rotating the CA of a one-node cluster', () => {
  it('goes through every phase, and the node ends on a certificate of the new CA', async () => {
    const admin = await issueClientCert(oldCa, { principal: 'alice', role: 'admin' });
    const made = await call(only.node, { caPem: oldCa.certPem, cert: admin }, 'POST', '/v1/credentials', { principal: 'robot', role: 'admin' });
    expect(made.status).toBe(201);
    // A bearer token outlives the CA; its file's pin is what the CLI keeps up to date.
    const cred: ClientCredential = { caPem: oldCa.certPem, token: String(made.body.token) };
    // Started through the API, then interrupted: the command resumes it, without asking.
    const started = await call(only.node, cred, 'POST', '/v1/ca/rotate', {});
    expect(started.body).toMatchObject({ did: 'started', rotation: { phase: 'add' } });
    const file = path.join(root, 'robot.json');
    writeCredential(file, { version: 1, clusterId: only.node.identity.clusterId, ca: oldCa.certPem, addresses: [only.node.apiAddress], principal: 'robot', role: 'admin', token: cred.token ?? '' });
    const run = await inProcess('ca', 'rotate', '--credential', file, '--timeout', '1m');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^resuming rotation [0-9a-f]{16} at phase add/);
    for (const phase of ['reissue', 'retire', 'done']) expect(run.stdout).toContain(`phase ${phase}`);
    // The token's file now pins the new CA alone.
    expect(splitPem(readCredential({ file, source: '--credential' }).ca)).toHaveLength(1);
    const newCaPem = readFileSync(path.join(only.dir, 'tls', 'ca.crt'), 'utf8');
    expect(splitPem(newCaPem)).toHaveLength(1);
    expect(issuerIn(readFileSync(path.join(only.dir, 'tls', 'node.crt'), 'utf8'), newCaPem)).toBeDefined();
    expect(issuerIn(readFileSync(path.join(only.dir, 'tls', 'node.crt'), 'utf8'), oldCa.certPem)).toBeUndefined();
    // The old CA's admin certificate is refused now; the token, pinned to the new CA, still works.
    expect((await call(only.node, { caPem: joinPem([newCaPem]), cert: admin }, 'GET', '/v1/cluster')).status).toBe(401);
    expect((await call(only.node, { caPem: newCaPem, token: cred.token ?? '' }, 'GET', '/v1/cluster')).status).toBe(200);
  }, 90_000);

  it('rotates again from a finished rotation, and remembers both retired CAs', async () => {
    const file = path.join(root, 'robot.json');
    const before = readCredential({ file, source: '--credential' }).ca;
    const run = await inProcess('ca', 'rotate', '--yes', '--credential', file, '--timeout', '1m');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).not.toMatch(/resuming/);
    const after = readCredential({ file, source: '--credential' }).ca;
    expect(splitPem(after)).toHaveLength(1);
    expect(after).not.toBe(before);
    const shown = await call(only.node, { caPem: after }, 'GET', '/v1/join/ca');
    expect(shown.body.retiredFingerprints).toEqual([certFingerprint(oldCa.certPem), certFingerprint(before)]);
  }, 90_000);
});
