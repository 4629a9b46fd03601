// The peer transport refuses a certificate whose serial is revoked, in both directions, and
// closes the connections already open with it when the deny-list grows (closeRevoked).

import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RefusalReason } from '../../transport/handshake.ts';
import { serialKey } from '../../src/security/revoked-serials.ts';
import { closedAfterEach, makePki, message, type Node, type Pki, startNode, waitFor } from './helpers.ts';

let pki: Pki;
const open = closedAfterEach();

beforeAll(async () => {
  pki = await makePki(['a', 'b']);
});

function serialOf(id: string): string {
  const pair = pki.nodes.get(id);
  if (pair === undefined) throw new Error(`no cert for ${id}`);
  return new X509Certificate(pair.certPem).serialNumber;
}

/** A transport whose deny-list is `revoked` (serialKey form), changed by the test. */
async function node(id: string, revoked: Set<string>): Promise<Node & { refused: [string, RefusalReason][] }> {
  const n = await startNode(pki, id, { isRevoked: (serial) => revoked.has(serialKey(serial)) });
  open.push(n);
  const refused: [string, RefusalReason][] = [];
  n.t.onRefused((peer, reason) => refused.push([peer, reason]));
  return Object.assign(n, { refused });
}

describe('WsTransport and revoked certificates', { timeout: 10_000 }, () => {
  it('closes an open inbound connection once its serial is revoked, and refuses the redial with revoked', async () => {
    const deniedByA = new Set<string>();
    const a = await node('a', deniedByA);
    const b = await node('b', new Set());
    b.t.setPeers([{ id: 'a', address: a.t.address }]);
    b.t.send(message('b', 'a'));
    await waitFor('the first message', () => a.received.length === 1);

    deniedByA.add(serialKey(serialOf('b')));
    a.t.closeRevoked();
    await waitFor('b hears the refusal', () => b.refused.length > 0);
    expect(b.refused[0]).toEqual(['a', 'revoked']);
    // b redials; every handshake is refused, so nothing more gets through.
    await waitFor('a second refusal (the redial)', () => b.refused.length > 1);
    b.t.send(message('b', 'a', { index: 0, term: 1 }));
    expect(b.refused.every(([, r]) => r === 'revoked')).toBe(true);
    expect(a.received).toHaveLength(1);
    expect(a.log.warned(/revoked/)).toBe(true);
  });

  it('refuses a listener whose certificate is revoked (the dialling side checks too)', async () => {
    const a = await node('a', new Set([serialKey(serialOf('b'))]));
    const b = await node('b', new Set());
    a.t.setPeers([{ id: 'b', address: b.t.address }]);
    a.t.send(message('a', 'b'));
    await waitFor('a refuses b', () => a.log.warned(/refused peer b .*revoked/));
    expect(b.received).toEqual([]);
  });

  it('leaves connections with certificates not revoked alone', async () => {
    const deniedByA = new Set<string>();
    const a = await node('a', deniedByA);
    const b = await node('b', new Set());
    b.t.setPeers([{ id: 'a', address: a.t.address }]);
    b.t.send(message('b', 'a'));
    await waitFor('the first message', () => a.received.length === 1);
    deniedByA.add(serialKey('0123456789abcdef'));
    a.t.closeRevoked();
    b.t.send(message('b', 'a'));
    await waitFor('the second message on the same connection', () => a.received.length === 2);
    expect(b.refused).toEqual([]);
  });
});
