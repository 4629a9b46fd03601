// The peers' wall clocks as the transport measures them (transport/clock-offset.ts): a pong
// answering this node's 16-byte ping carries the peer's Date.now(), and contact() gives the
// offset. Payloads of the first release (an 8-byte ping, a pong that echoes the ping) still work
// both ways.

import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ClockOffsetEstimate, clockSamplesMax } from '../../transport/clock-offset.ts';
import { pingPayload, pongPayloadFor, readPong, rttFromPong } from '../../transport/socket-util.ts';
import { closedAfterEach, makePki, type Pki, startNode, waitFor } from './helpers.ts';
import { RawPeer } from './raw-peer.ts';

describe('ping and pong payloads', () => {
  it('a 16-byte ping gets the answerer\'s wall clock; the rtt reads as before', () => {
    const ping = pingPayload(1_000);
    expect(ping.byteLength).toBe(16);
    const pong = pongPayloadFor(ping, 1_700_000_000_000);
    expect(readPong(pong, 1_004)).toEqual({ rttMs: 4, remoteWallMs: 1_700_000_000_000 });
    expect(rttFromPong(pong, 1_004)).toBe(4);
  });

  it('a first-release peer echoes our ping: the rtt, and no clock', () => {
    const echoed = pingPayload(1_000);
    expect(readPong(echoed, 1_010)).toEqual({ rttMs: 10, remoteWallMs: null });
  });

  it('a first-release ping (8 bytes) is echoed as it came, which its sender checks byte for byte', () => {
    const old = Buffer.alloc(8);
    old.writeDoubleLE(123.5, 0);
    const pong = pongPayloadFor(old, 1_700_000_000_000);
    expect(pong.equals(old)).toBe(true);
    expect(readPong(pong, 124.5)).toEqual({ rttMs: 1, remoteWallMs: null });
  });

  it('other payloads are echoed and read as nothing', () => {
    const odd = Buffer.from('hello');
    expect(pongPayloadFor(odd, 5).equals(odd)).toBe(true);
    expect(readPong(odd, 5)).toEqual({ rttMs: null, remoteWallMs: null });
    expect(readPong(pingPayload(10), 5)).toEqual({ rttMs: null, remoteWallMs: null });
  });
});

describe('ClockOffsetEstimate', () => {
  it('offset = remote − (local − rtt/2), the median of the last few samples', () => {
    const e = new ClockOffsetEstimate();
    expect(e.current()).toBeUndefined();
    e.add(10_050, 10_000, 20, 1); // the peer answered at our 9_990: +60
    expect(e.current()).toEqual({ offsetMs: 60, sampledAt: 1 });
    e.add(10_000, 10_000, 0, 2); // 0
    e.add(99_000, 10_000, 0, 3); // one delayed outlier
    expect(e.current()?.offsetMs).toBe(60);
    for (let i = 0; i < clockSamplesMax; i++) e.add(40_000, 10_000, 0, 10 + i); // the clock was stepped
    expect(e.current()).toEqual({ offsetMs: 30_000, sampledAt: 10 + clockSamplesMax - 1 });
  });
});

describe('WsTransport: peers\' clocks', { timeout: 15_000 }, () => {
  let pki: Pki;
  const open = closedAfterEach();
  const peers: RawPeer[] = [];
  beforeAll(async () => {
    pki = await makePki(['a', 'b']);
  });
  afterEach(() => {
    for (const p of peers.splice(0)) p.close();
  });

  it('each side sees the other\'s clock offset, one shifted 47 s ahead', async () => {
    const a = await startNode(pki, 'a');
    const b = await startNode(pki, 'b', { wallClock: () => Date.now() + 47_000 });
    open.push(a, b);
    const list = [{ id: 'a', address: a.t.address }, { id: 'b', address: b.t.address }];
    a.t.setPeers(list);
    b.t.setPeers(list);
    await waitFor('clock offsets both ways', () => a.t.contact('b').clockOffsetMs !== undefined && b.t.contact('a').clockOffsetMs !== undefined);
    const ab = a.t.contact('b');
    expect(Math.abs((ab.clockOffsetMs ?? 0) - 47_000)).toBeLessThan(1_000);
    expect(ab.clockSampledAgoMs).toBeGreaterThanOrEqual(0);
    expect(Math.abs((b.t.contact('a').clockOffsetMs ?? 0) + 47_000)).toBeLessThan(1_000);
    expect(a.t.contact('nobody').clockOffsetMs).toBeUndefined();
  });

  it('answers a first-release peer\'s 8-byte ping with the same 8 bytes, and a 16-byte one with its clock', async () => {
    const a = await startNode(pki, 'a', { wallClock: () => 1_700_000_000_000 });
    open.push(a);
    const b = pki.nodes.get('b');
    if (b === undefined) throw new Error('no cert');
    const p = await RawPeer.connect({ address: a.t.address, tls: { caPem: pki.ca.certPem, ...b }, clusterId: 'test-cluster', nodeId: 'b', peerId: 'a', protocolMax: 1 });
    peers.push(p);
    const old = Buffer.alloc(8);
    old.writeDoubleLE(42, 0);
    expect((await p.ping(old)).equals(old)).toBe(true);
    const pong = await p.ping(pingPayload(42));
    expect(pong.byteLength).toBe(16);
    expect(pong.readDoubleLE(0)).toBe(42);
    expect(pong.readDoubleLE(8)).toBe(1_700_000_000_000);
  });
});
