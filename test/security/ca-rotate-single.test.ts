// `shoal ca rotate` on a one-node TLS cluster: with no other member to ask, the node signs its own
// renewal under the new CA (renewal.ts signLocally), so the rotation finishes there too; driven
// through the API with a bearer token, whose pin the client follows by hand.
// Heavy (a node with its transport): run under `flock /tmp/shoal-heavy.lock`.

import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issuerIn, joinPem, splitPem } from '../../src/security/ca-bundle.ts';
import type { PemPair } from '../../src/security/certificates.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
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
    // A bearer token outlives the CA; the client pins both CAs once the node shows both.
    const cred: ClientCredential = { caPem: oldCa.certPem, token: String(made.body.token) };
    const phases: string[] = [];
    for (let round = 0; phases.at(-1) !== 'done'; round++) {
      expect(round, `rounds (phases so far: ${phases.join(', ')})`).toBeLessThan(600);
      const step = await call(only.node, cred, 'POST', '/v1/ca/rotate', {});
      expect(step.status).toBe(200);
      const phase = String((step.body.rotation as { phase: string }).phase);
      if (phases.at(-1) !== phase) phases.push(phase);
      const status = await call(only.node, cred, 'GET', '/v1/ca/rotation');
      if (splitPem(String(status.body.caPem)).length === 2) cred.caPem = String(status.body.caPem);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(phases).toEqual(['add', 'reissue', 'retire', 'done']);
    const newCaPem = readFileSync(path.join(only.dir, 'tls', 'ca.crt'), 'utf8');
    expect(splitPem(newCaPem)).toHaveLength(1);
    expect(issuerIn(readFileSync(path.join(only.dir, 'tls', 'node.crt'), 'utf8'), newCaPem)).toBeDefined();
    expect(issuerIn(readFileSync(path.join(only.dir, 'tls', 'node.crt'), 'utf8'), oldCa.certPem)).toBeUndefined();
    // The old CA's admin certificate is refused now; the token, pinned to the new CA, still works.
    expect((await call(only.node, { caPem: joinPem([newCaPem]), cert: admin }, 'GET', '/v1/cluster')).status).toBe(401);
    expect((await call(only.node, { caPem: newCaPem, token: cred.token ?? '' }, 'GET', '/v1/cluster')).status).toBe(200);
  }, 90_000);
});
