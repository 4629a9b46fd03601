// Node-to-node HTTP takes a renewed certificate (src/api/peer-http.ts): after the renewer
// replaces the node's TLS material (src/security/renewal.ts, against a member holding the CA) and
// onRenewed reloads PeerHttp, as server.ts wires it, the next request presents the new
// certificate to the node it calls, here a TLS server that records each client certificate.

import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PeerHttp } from '../../src/api/peer-http.ts';
import { confChangeContext } from '../../src/resources/membership.ts';
import type { Tls } from '../../src/node/identity.ts';
import { silentLogger } from '../../src/log.ts';
import { issueNodeCert, type PemPair } from '../../src/security/certificates.ts';
import { CertRenewer } from '../../src/security/renewal.ts';
import type { SingleNode } from '../api/single-node.ts';
import { caNode } from './ca-node.ts';

let n: SingleNode;
let ca: PemPair;
let caAddr: string;
/** A node's API stand-in: HTTPS that asks for a client certificate and records its serial. */
let server: Server;
let serverAddr: string;
const seen: string[] = [];

beforeAll(async () => {
  ({ n, ca, addr: caAddr } = await caNode());
  const own = await issueNodeCert(ca, 'peer0000', { hosts: ['127.0.0.1'] });
  server = createServer({ ca: ca.certPem, cert: own.certPem, key: own.keyPem, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' }, (req, res) => {
    seen.push((req.socket as TLSSocket).getPeerCertificate().serialNumber.toLowerCase());
    res.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serverAddr = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await n.close();
});

const serialOf = (certPem: string): string => new X509Certificate(certPem).serialNumber.toLowerCase();

/** A learner member of the CA node's cluster with a node certificate, and its data directory. */
async function member(id: string): Promise<{ dir: string; tls: Tls }> {
  await n.node.changeMembership({ changes: [{ type: 'addLearner', node: id }], context: confChangeContext([{ id, name: id, peerAddress: '127.0.0.1:9391', apiAddress: '127.0.0.1:9491' }]) });
  const cert = await issueNodeCert(ca, id, { hosts: [] });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-peer-renew-'));
  mkdirSync(path.join(dir, 'tls'));
  return { dir, tls: { caPem: ca.certPem, ...cert } };
}

async function ask(peer: PeerHttp): Promise<string> {
  const res = await peer.fetch(serverAddr, '/v1/cluster');
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return seen.at(-1) ?? '';
}

describe('node-to-node HTTP after a certificate renewal', () => {
  it('presents the renewed certificate on the next request, without a restart', async () => {
    const m = await member('peer0001');
    const peer = new PeerHttp(m.tls);
    try {
      const before = serialOf(m.tls.certPem);
      expect(await ask(peer)).toBe(before);
      const renewer = new CertRenewer({
        dataDir: m.dir, nodeId: 'peer0001', tls: m.tls, members: () => ({ list: [{ id: 'solo', apiAddress: caAddr }], leader: 'solo' }),
        onRenewed: () => peer.reloadTls(), log: silentLogger, scheme: 'http',
      });
      await renewer.renewNow();
      const after = serialOf(m.tls.certPem);
      expect(after).not.toBe(before);
      // The first request was kept alive: the old agent's connection must not carry this one.
      expect(await ask(peer)).toBe(after);
      expect(await ask(peer)).toBe(after);
    } finally {
      await peer.close();
    }
  });

  it('reloadTls is a no-op for plain HTTP (api.insecureLoopback)', async () => {
    const peer = new PeerHttp(null);
    peer.reloadTls();
    expect(peer.scheme).toBe('http');
    await peer.close();
  });
});
