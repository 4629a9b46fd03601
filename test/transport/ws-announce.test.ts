// What hellos announce (a node's own addresses and its peer hints), who hears it, and the probe
// that finds which node answers at an address (transport/peer-probe.ts).

import { beforeAll, describe, expect, it } from 'vitest';
import type { Announcement } from '../../transport/handshake.ts';
import { createCa, issueNodeCert } from '../../src/security/index.ts';
import { closedAfterEach, makePki, type Pki, sleep, startNode, waitFor } from './helpers.ts';

let pki: Pki;
const open = closedAfterEach();

beforeAll(async () => {
  pki = await makePki(['a', 'b']);
});

describe('WsTransport announcements', { timeout: 10_000 }, () => {
  it("hands each side the other's announcement, under the id its certificate names", async () => {
    const heardByA: [string, Announcement][] = [];
    const heardByB: [string, Announcement][] = [];
    const a = await startNode(pki, 'a', { announce: () => ({ peerAddress: 'a.lan:7200', apiAddress: 'a.lan:7100', peerHints: ['c.lan:7200'] }) });
    const b = await startNode(pki, 'b', { announce: () => ({ peerAddress: 'b.lan:7200' }) });
    open.push(a, b);
    a.t.onAnnounced((id, x) => heardByA.push([id, x]));
    b.t.onAnnounced((id, x) => heardByB.push([id, x]));
    // Only a dials: b hears a's offer, a hears b's answer.
    a.t.setPeers([{ id: 'b', address: b.t.address }]);
    await waitFor('both announcements', () => heardByA.length > 0 && heardByB.length > 0);
    expect(heardByB[0]).toEqual(['a', { peerAddress: 'a.lan:7200', apiAddress: 'a.lan:7100', peerHints: ['c.lan:7200'] }]);
    expect(heardByA[0]).toEqual(['b', { peerAddress: 'b.lan:7200' }]);
  });

  it('hands on nothing from a peer it refuses (not a member)', async () => {
    const heardByB: string[] = [];
    const a = await startNode(pki, 'a', { announce: () => ({ peerAddress: 'a.lan:7200' }) });
    const b = await startNode(pki, 'b', { authorizePeer: () => 'not_member' });
    open.push(a, b);
    b.t.onAnnounced((id) => heardByB.push(id));
    a.t.setPeers([{ id: 'b', address: b.t.address }]);
    await waitFor('the refusal', () => b.log.warned(/peer_not_authorized/));
    await sleep(50);
    expect(heardByB).toEqual([]);
  });

  it('identify() names the node whose certificate answers at an address', async () => {
    const a = await startNode(pki, 'a');
    const b = await startNode(pki, 'b');
    open.push(a, b);
    expect(await a.t.identify(b.t.address)).toBe('b');
    // The listener saw a connection end, nothing it warns about.
    await sleep(100);
    expect(b.log.warned(/refused|TLS/)).toBe(false);
  });

  it('identify() refuses a listener of another CA, and an address where nothing listens', async () => {
    const otherCa = await createCa('other');
    const stranger = await issueNodeCert(otherCa, 'b', { hosts: ['127.0.0.1'] });
    const a = await startNode(pki, 'a');
    const s = await startNode({ ca: otherCa, nodes: new Map([['b', stranger]]) }, 'b');
    open.push(a, s);
    await expect(a.t.identify(s.t.address)).rejects.toThrow();
    const closed = await startNode(pki, 'b');
    const address = closed.t.address;
    await closed.t.close();
    await expect(a.t.identify(address)).rejects.toThrow();
  });
});
