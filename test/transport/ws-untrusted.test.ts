// After the trust bundle changes (a CA rotation's retire: reloadTls with a bundle without the old
// CA), the peer transport closes the connections opened with a certificate of the retired CA, both
// the ones it accepted and the ones it dialled, and keeps those of a CA still trusted.

import { beforeAll, describe, expect, it } from 'vitest';
import { createCa, issueNodeCert, type PemPair } from '../../src/security/index.ts';
import { issuedByBundle } from '../../src/security/ca-bundle.ts';
import { closedAfterEach, makePki, message, type Node, type Pki, startNode, waitFor } from './helpers.ts';
import { X509Certificate } from 'node:crypto';

let oldPki: Pki;
let newCa: PemPair;
const open = closedAfterEach();

beforeAll(async () => {
  oldPki = await makePki(['a', 'b']);
  newCa = await createCa('test-cluster');
});

/** A transport holding its certificate of the old CA and trusting both CAs (the add and reissue phases). */
async function node(id: string): Promise<Node & { tls: { caPem: string; certPem: string; keyPem: string } }> {
  const cert = oldPki.nodes.get(id);
  if (cert === undefined) throw new Error(`no certificate for ${id}`);
  const tls = { caPem: `${oldPki.ca.certPem.trim()}\n${newCa.certPem.trim()}\n`, certPem: cert.certPem, keyPem: cert.keyPem };
  const n = await startNode(oldPki, id, { tls });
  open.push(n);
  return Object.assign(n, { tls });
}

/** The node renews under the new CA and then trusts only it (retire), in place as the rotation agent does. */
async function retire(n: Node & { tls: { caPem: string; certPem: string; keyPem: string } }): Promise<void> {
  const renewed = await issueNodeCert(newCa, n.id, { hosts: ['127.0.0.1', 'localhost'] });
  n.tls.certPem = renewed.certPem;
  n.tls.keyPem = renewed.keyPem;
  n.tls.caPem = `${newCa.certPem.trim()}\n`;
  n.t.reloadTls();
}

describe('WsTransport after the trust bundle changed', { timeout: 15_000 }, () => {
  it('issuedByBundle: a certificate is trusted by the bundle holding its CA only', () => {
    const der = new X509Certificate(oldPki.nodes.get('a')?.certPem ?? '').raw;
    expect(issuedByBundle(der, oldPki.ca.certPem)).toBe(true);
    expect(issuedByBundle(der, `${newCa.certPem}\n${oldPki.ca.certPem}`)).toBe(true);
    expect(issuedByBundle(der, newCa.certPem)).toBe(false);
    expect(issuedByBundle(Buffer.from('not a certificate'), oldPki.ca.certPem)).toBe(false);
  });

  it('closes connections opened with a certificate of the retired CA, both ways, and they come back once both sides renewed', async () => {
    const a = await node('a');
    const b = await node('b');
    a.t.setPeers([{ id: 'b', address: b.t.address }]);
    b.t.setPeers([{ id: 'a', address: a.t.address }]);
    a.t.send(message('a', 'b'));
    b.t.send(message('b', 'a'));
    await waitFor('a message each way', () => a.received.length === 1 && b.received.length === 1);

    // a retires the old CA first: b's certificates on both connections are of the old CA.
    await retire(a);
    await waitFor('a drops both connections', () => a.log.warned(/closing the connection from b: its certificate is from a CA this node no longer trusts/)
      && a.log.warned(/dropping the connection to peer b .* no longer trusts/));
    // Until b has a certificate of the new CA, nothing more gets through to a.
    a.t.send(message('a', 'b', { index: 0, term: 1 }));
    b.t.send(message('b', 'a', { index: 0, term: 1 }));
    await new Promise((r) => setTimeout(r, 500));
    expect(a.received).toHaveLength(1);

    await retire(b);
    await waitFor('messages flow again both ways', () => {
      a.t.send(message('a', 'b', { index: 0, term: 2 }));
      b.t.send(message('b', 'a', { index: 0, term: 2 }));
      return a.received.length > 1 && b.received.length > 1;
    });
  });

  it('keeps connections whose certificates a CA of the new bundle issued', async () => {
    const a = await node('a');
    const b = await node('b');
    b.t.setPeers([{ id: 'a', address: a.t.address }]);
    b.t.send(message('b', 'a'));
    await waitFor('the first message', () => a.received.length === 1);
    // The bundle loses the new CA instead: b's certificate (old CA) is still trusted.
    a.tls.caPem = `${oldPki.ca.certPem.trim()}\n`;
    a.t.reloadTls();
    b.t.send(message('b', 'a'));
    await waitFor('the second message on the same connection', () => a.received.length === 2);
    expect(a.log.warned(/no longer trusts/)).toBe(false);
  });
});
