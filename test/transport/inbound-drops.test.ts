// Messages from peers that never reach the node, on both transports: counted by reason, logged,
// and, for a snapshot, reported failed to its sender. And the node's own refusal of a message
// (a snapshot whose payload does not decode) counted with them.

import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../../src/raft/types.ts';
import { encodeFrame } from '../../transport/codec.ts';
import { Registry } from '../../src/base/metrics.ts';
import { INBOUND_DROP_REASONS, PEER_MESSAGES_DROPPED_METRIC, inboundDropSamples } from '../../transport/inbound-drops.ts';
import { MemoryNetwork, type MemoryTransport } from '../../transport/memory-transport.ts';
import { makePki, message, startNode, waitFor, type Node, type Pki } from './helpers.ts';
import { RawPeer } from './raw-peer.ts';

const confState = { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false };
const snap = (from: string, to: string, data: Uint8Array, meta: Partial<typeof baseMeta> = {}): Message =>
  message(from, to, { type: 'snap', snapshot: { meta: { ...baseMeta, ...meta }, data } });
const baseMeta = { index: 5, term: 1, confState };

describe('the in-memory transport', () => {
  let net: MemoryNetwork;
  let a: MemoryTransport;
  let b: MemoryTransport;
  let received: Message[];
  const statuses: boolean[] = [];

  async function pair(refuse?: (m: Message) => boolean): Promise<void> {
    net = new MemoryNetwork({ manual: true });
    a = net.transport('a');
    b = net.transport('b');
    await a.start();
    await b.start();
    a.setPeers([{ id: 'b', address: 'memory:b' }]);
    b.setPeers([{ id: 'a', address: 'memory:a' }]);
    received = [];
    statuses.length = 0;
    b.onMessage((m) => {
      if (refuse?.(m) === true) return { reason: 'bad_snapshot_data', detail: 'refused by the test' };
      received.push(m);
      return undefined;
    });
    a.onSnapshotStatus((_id, ok) => statuses.push(ok));
  }

  it('checks injected values and bytes as the real transport checks the wire, and counts each drop', async () => {
    await pair();
    expect(b.injectValue('a', message('a', 'b', { index: 3 }))).toBeUndefined();
    expect(b.injectValue('a', { ...message('a', 'b'), term: -1 })).toBe('malformed');
    expect(b.injectValue('a', message('c', 'b'))).toBe('wrong_sender');
    expect(b.injectValue('a', message('a', 'c'))).toBe('misaddressed');
    expect(b.injectValue('a', message('a', 'b', { type: 'snap' }))).toBe('bad_snapshot');
    expect(b.injectValue('a', message('a', 'b', { type: 'prop', term: 0 }))).toBe('bad_entries');
    expect(b.injectValue('a', message('a', 'b', { type: 'vote', term: 0 }))).toBe('bad_term');
    expect(b.injectBytes('a', new Uint8Array([0xc1]))).toEqual(['malformed']);
    expect(b.injectBytes('a', encodeFrame({ t: 'snapAck', id: 1, ok: true }))).toEqual(['unexpected_frame']);
    const two = Buffer.concat([encodeFrame({ t: 'msg', m: message('a', 'b', { index: 4 }) }), encodeFrame({ t: 'msg', m: message('a', 'b', { context: 'x'.repeat(5000) }) })]);
    expect(b.injectBytes('a', two)).toEqual([undefined, 'bad_context']);
    expect(received.map((m) => m.index)).toEqual([3, 4]);
    expect(b.inboundDrops()).toEqual({
      malformed: 2, unexpected_frame: 1, wrong_sender: 1, misaddressed: 1, bad_term: 1, bad_entries: 1, bad_snapshot: 1,
      bad_context: 1, bad_snapshot_stream: 0, bad_snapshot_data: 0,
    });
    expect(b.stats()[0]?.received).toBe(2);
  });

  it('checks what cores send too, and reports a snapshot the receiving node refused as failed', async () => {
    await pair((m) => m.type === 'snap' && m.snapshot?.data[0] === 0xff);
    a.send(message('a', 'b', { index: 2, logTerm: 0 })); // index 2 of term 0: no core sends it
    a.send(snap('a', 'b', new Uint8Array([1])));
    a.send(snap('a', 'b', new Uint8Array([0xff])));
    net.flush();
    await Promise.resolve();
    expect(received.map((m) => m.type)).toEqual(['snap']);
    expect(statuses).toEqual([true, false]);
    expect(b.inboundDrops()).toMatchObject({ bad_term: 1, bad_snapshot_data: 1 });
  });

  it('gives every reason a sample, zeros included, for the node\'s metric registry', async () => {
    await pair();
    b.injectValue('a', 'not a message');
    const metrics = new Registry();
    metrics.gauge({ ...PEER_MESSAGES_DROPPED_METRIC, type: 'counter', read: () => inboundDropSamples(b.inboundDrops()) });
    const text = await metrics.render();
    expect(text).toContain('# TYPE shoal_peer_messages_dropped_total counter');
    expect(text).toContain('shoal_peer_messages_dropped_total{reason="malformed"} 1');
    for (const reason of INBOUND_DROP_REASONS) expect(text).toContain(`shoal_peer_messages_dropped_total{reason="${reason}"}`);
  });
});

describe('the WebSocket transport', { timeout: 15_000 }, () => {
  let pki: Pki;
  const open: Node[] = [];
  const peers: RawPeer[] = [];
  beforeAll(async () => {
    pki = await makePki(['a', 'b']);
  });
  afterEach(async () => {
    for (const p of peers.splice(0)) p.close();
    await Promise.all(open.splice(0).map((n) => n.t.close()));
  });

  async function target(limits = {}): Promise<Node> {
    const n = await startNode(pki, 'a', { limits });
    open.push(n);
    return n;
  }
  async function peerB(a: Node): Promise<RawPeer> {
    const b = pki.nodes.get('b');
    if (b === undefined) throw new Error('no cert');
    const p = await RawPeer.connect({ address: a.t.address, tls: { caPem: pki.ca.certPem, ...b }, clusterId: 'test-cluster', nodeId: 'b', peerId: 'a', protocolMax: 1 });
    peers.push(p);
    return p;
  }
  const begin = (id: number, bytes: number, m: Message) => encodeFrame({ t: 'snapBegin', id, bytes, m });

  it('refuses a snapshot stream whose message is meaningless at its first frame, and says so to the sender', async () => {
    const a = await target();
    const p = await peerB(a);
    p.send(begin(3, 4, snap('b', 'a', new Uint8Array(0), { index: 0 })));
    p.send(encodeFrame({ t: 'snapChunk', id: 3, offset: 0, data: new Uint8Array(4) }));
    await waitFor('the ack', () => p.received.length === 1);
    expect(p.received[0]).toMatchObject({ t: 'snapAck', id: 3, ok: false, reason: expect.stringMatching(/refused/) });
    expect(a.received).toEqual([]);
    expect(a.t.inboundDrops()).toMatchObject({ bad_snapshot: 1 });
    expect(a.log.warned(/dropped a 'snap' message from b .*bad_snapshot: .*index 0/)).toBe(true);
  });

  it('counts a stream that breaks its rules, and a frame the connection does not carry', async () => {
    const a = await target({ snapshotBytesMax: 10 });
    const p = await peerB(a);
    p.send(begin(4, 100, snap('b', 'a', new Uint8Array(0))));
    p.send(encodeFrame({ t: 'snapAck', id: 1, ok: true }));
    await waitFor('the ack', () => p.received.length === 1);
    await waitFor('the count', () => a.t.inboundDrops().unexpected_frame === 1);
    expect(a.t.inboundDrops()).toMatchObject({ bad_snapshot_stream: 1, unexpected_frame: 1 });
  });

  it('acks a streamed snapshot the node refused as failed, and counts the refusal', async () => {
    const a = await target();
    a.t.onMessage((m) => (m.type === 'snap' ? { reason: 'bad_snapshot_data', detail: 'does not decode' } : undefined));
    const p = await peerB(a);
    p.send(begin(5, 3, snap('b', 'a', new Uint8Array(0))));
    p.send(encodeFrame({ t: 'snapChunk', id: 5, offset: 0, data: new Uint8Array([1, 2, 3]) }));
    await waitFor('the ack', () => p.received.length === 1);
    expect(p.received[0]).toMatchObject({ t: 'snapAck', id: 5, ok: false, reason: expect.stringMatching(/bad_snapshot_data: does not decode/) });
    expect(a.t.inboundDrops()).toMatchObject({ bad_snapshot_data: 1 });
    expect(a.log.warned(/the node refused a 'snap' message from b/)).toBe(true);
  });

  it('takes a member address it cannot dial as a failed dial, not an exception', async () => {
    const a = await target();
    expect(() => a.t.setPeers([{ id: 'b', address: 'not an address at all' }])).not.toThrow();
    await waitFor('the warning', () => a.log.warned(/bad_address/));
    expect(a.t.stats()).toMatchObject([{ id: 'b', connected: false }]);
  });
});
