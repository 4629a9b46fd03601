import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../../src/raft/types.ts';
import { dialFromOf } from '../../transport/ws-transport.ts';
import { closedAfterEach, connectAll, makePki, message, type Node, normalEntry, type Pki, sleep, startNode, waitFor } from './helpers.ts';

let pki: Pki;
let otherPki: Pki;
const open = closedAfterEach();

async function node(...args: Parameters<typeof startNode>): Promise<Node> {
  const n = await startNode(...args);
  open.push(n);
  return n;
}

beforeAll(async () => {
  pki = await makePki(['a', 'b', 'c']);
  otherPki = await makePki(['b']);
});

describe('WsTransport', { timeout: 15_000 }, () => {
  it('exchanges messages both ways, with entry data as Uint8Array', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    connectAll(a, b);
    const data = new Uint8Array([0, 1, 2, 254, 255]);
    const sent: Message = message('a', 'b', {
      term: 3, index: 7, logTerm: 1, commit: 6,
      entries: [normalEntry(8, data), normalEntry(9, new Uint8Array(0)), {
        kind: 'conf', term: 3, index: 10, change: { changes: [{ type: 'addLearner', node: 'c' }], context: 'ctx' },
      }],
    });
    a.t.send(sent);
    b.t.send(message('b', 'a', { type: 'appResp', term: 3, index: 10 }));
    await waitFor('both deliveries', () => b.received.length === 1 && a.received.length === 1);
    expect(b.received[0]).toEqual(sent);
    const e = b.received[0]?.entries[0];
    expect(e?.kind === 'normal' && e.data.constructor).toBe(Uint8Array);
    expect(a.received[0]).toMatchObject({ type: 'appResp', from: 'b', to: 'a', index: 10 });
    expect(a.t.stats()).toHaveLength(1);
    await waitFor('the write to complete', () => a.t.stats()[0]?.sent === 1);
    expect(a.t.stats()[0]).toMatchObject({ id: 'b', connected: true, sent: 1, received: 1, softwareVersion: '0.1.0-test', protocolVersion: 1 });
  });

  it('keeps order and delivers a burst', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    connectAll(a, b);
    for (let i = 1; i <= 500; i++) a.t.send(message('a', 'b', { index: i }));
    await waitFor('500 messages', () => b.received.length === 500);
    expect(b.received.map((m) => m.index)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
  });

  it('refuses a peer whose certificate comes from another CA', async () => {
    const a = await node(pki, 'a');
    const intruder = await node(otherPki, 'b');
    connectAll(a, intruder);
    intruder.t.send(message('b', 'a'));
    a.t.send(message('a', 'b'));
    await waitFor('the TLS refusal in the log', () => a.log.warned(/refused a TLS connection/) && a.log.warned(/cannot connect to peer b/));
    await sleep(200);
    expect(a.received).toEqual([]);
    expect(intruder.received).toEqual([]);
    expect(a.t.stats()[0]?.connected).toBe(false);
  });

  it('refuses to talk to a listener whose certificate names another node than the one dialled', async () => {
    const a = await node(pki, 'a');
    const c = await node(pki, 'c');
    a.t.setPeers([{ id: 'b', address: c.t.address }]);
    a.t.send(message('a', 'b'));
    await waitFor('the refusal', () => a.log.warned(/cannot connect to peer b .*certificate names node 'c', expected 'b'/));
    await sleep(100);
    expect(c.received).toEqual([]);
  });

  it('refuses a peer of another cluster id, naming the reason on both sides', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b', { clusterId: 'other-cluster' });
    connectAll(a, b);
    b.t.send(message('b', 'a'));
    await waitFor('the refusal', () => a.log.warned(/refused peer b .*cluster_mismatch/) && b.log.warned(/refused .*cluster_mismatch/));
    expect(a.log.warned(/'other-cluster'/)).toBe(true);
    await sleep(200);
    expect(a.received).toEqual([]);
    expect(b.received).toEqual([]);
  });

  it('refuses a peer speaking an unsupported protocol version', async () => {
    const a = await node(pki, 'a', { protocolVersion: 2, protocolVersionsSupported: { min: 1, max: 2 } });
    const b = await node(pki, 'b', { protocolVersion: 3, protocolVersionsSupported: { min: 3, max: 4 } });
    connectAll(a, b);
    b.t.send(message('b', 'a'));
    a.t.send(message('a', 'b'));
    // Each side names the range the other offered (a dialler offers its whole range).
    await waitFor('the refusals', () => a.log.warned(/protocol_unsupported: peer speaks protocol 3\.\.4/) && b.log.warned(/protocol_unsupported: peer speaks protocol 1\.\.2/));
    await sleep(200);
    expect(a.received).toEqual([]);
    expect(b.received).toEqual([]);
  });

  it('accepts a peer of another protocol version inside the supported range', async () => {
    const a = await node(pki, 'a', { protocolVersion: 2, protocolVersionsSupported: { min: 1, max: 2 }, softwareVersion: '0.2.0' });
    const b = await node(pki, 'b', { protocolVersion: 1, protocolVersionsSupported: { min: 1, max: 2 } });
    connectAll(a, b);
    a.t.send(message('a', 'b'));
    await waitFor('delivery', () => b.received.length === 1);
    await waitFor('b connected to a', () => b.t.stats()[0]?.connected === true);
    expect(b.t.stats()[0]).toMatchObject({ protocolVersion: 2, softwareVersion: '0.2.0' });
    expect(a.t.stats()[0]).toMatchObject({ protocolVersion: 1 });
  });

  it('reconnects when a peer goes away and comes back on the same port', async () => {
    const a = await node(pki, 'a');
    const b1 = await startNode(pki, 'b');
    connectAll(a, b1);
    a.t.send(message('a', 'b', { index: 1 }));
    await waitFor('first delivery', () => b1.received.length === 1);
    const address = b1.t.address;
    const port = Number(address.split(':')[1]);
    await b1.t.close();
    await waitFor('a to notice', () => a.t.stats()[0]?.connected === false);
    await waitFor('the unreachable report', () => a.unreachable.includes('b'));
    // A closed connection, which a follower may take for its leader being gone.
    expect(a.unreachableWhy).toContainEqual({ id: 'b', why: 'disconnected' });
    const b2 = await node(pki, 'b', { listen: { host: '127.0.0.1', port } });
    expect(b2.t.address).toBe(address);
    b2.t.setPeers([{ id: 'a', address: a.t.address }]);
    a.t.send(message('a', 'b', { index: 2 }));
    b2.t.send(message('b', 'a', { type: 'appResp', index: 2 }));
    await waitFor('delivery after the restart', () => b2.received.some((m) => m.index === 2) && a.received.length === 1);
    expect(a.t.stats()[0]?.connected).toBe(true);
  });

  it('dials from the address it listens on, so a peer sees its connections come from there; a wildcard listener dials from the route\'s', async () => {
    const a = await node(pki, 'a', { listen: { host: '127.0.0.21', port: 0 } });
    const b = await node(pki, 'b', { listen: { host: '127.0.0.22', port: 0 } });
    connectAll(a, b);
    a.t.send(message('a', 'b', { index: 1 }));
    b.t.send(message('b', 'a', { type: 'appResp', index: 1 }));
    await waitFor('both deliveries', () => b.received.length === 1 && a.received.length === 1);
    const accepted = (n: Node, peer: string) => n.log.lines.filter((l) => l.msg.startsWith(`accepted peer ${peer} from `)).map((l) => l.msg);
    expect(accepted(b, 'a')).toEqual([expect.stringMatching(/ from 127\.0\.0\.21:\d+ /)]);
    expect(accepted(a, 'b')).toEqual([expect.stringMatching(/ from 127\.0\.0\.22:\d+ /)]);
    expect(dialFromOf('0.0.0.0')).toBeUndefined();
    expect(dialFromOf('[::]')).toBeUndefined();
    expect(dialFromOf('localhost')).toBeUndefined();
    expect(dialFromOf('[fd00::2]')).toBe('fd00::2');
  });

  it('follows a peer to a new address', async () => {
    const a = await node(pki, 'a');
    const b1 = await startNode(pki, 'b');
    connectAll(a, b1);
    await waitFor('connected', () => a.t.stats()[0]?.connected === true);
    await b1.t.close();
    const b2 = await node(pki, 'b');
    a.t.setPeers([{ id: 'b', address: b2.t.address }]);
    a.t.send(message('a', 'b'));
    await waitFor('delivery at the new address', () => b2.received.length === 1);
  });

  it('streams a 20 MiB snapshot in chunks and reports it delivered', async () => {
    // A 2 MiB frame bound proves the snapshot cannot have travelled as one frame.
    const limits = { frameBytesMax: 2 * 1024 * 1024, snapshotChunkBytes: 1024 * 1024 };
    const a = await node(pki, 'a', { limits });
    const b = await node(pki, 'b', { limits });
    connectAll(a, b);
    await waitFor('connected', () => a.t.stats()[0]?.connected === true);
    const data = new Uint8Array(randomBytes(20 * 1024 * 1024));
    const meta = { index: 100, term: 4, confState: { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
    a.t.send(message('a', 'b', { type: 'snap', term: 4, snapshot: { meta, data } }));
    a.t.send(message('a', 'b', { type: 'heartbeat', term: 4 }));
    await waitFor('the snapshot', () => b.received.some((m) => m.type === 'snap'), 10_000);
    const got = b.received.find((m) => m.type === 'snap');
    expect(got?.snapshot?.meta).toEqual(meta);
    expect(got?.snapshot?.data.byteLength).toBe(data.byteLength);
    expect(Buffer.from(got?.snapshot?.data ?? []).equals(Buffer.from(data))).toBe(true);
    expect(b.received.some((m) => m.type === 'heartbeat')).toBe(true);
    await waitFor('the status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ id: 'b', ok: true }]);
  });

  it('reports a snapshot failed when the peer goes away mid-stream', async () => {
    const a = await node(pki, 'a');
    const b = await startNode(pki, 'b');
    connectAll(a, b);
    await waitFor('connected', () => a.t.stats()[0]?.connected === true);
    const meta = { index: 5, term: 1, confState: { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
    a.t.send(message('a', 'b', { type: 'snap', snapshot: { meta, data: new Uint8Array(20 * 1024 * 1024) } }));
    await b.t.close();
    await waitFor('the failure status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ id: 'b', ok: false }]);
    expect(b.received).toEqual([]);
  });

  it('refuses a snapshot at once when the peer is not connected', async () => {
    const a = await node(pki, 'a');
    a.t.setPeers([{ id: 'b', address: '127.0.0.1:1' }]);
    const meta = { index: 5, term: 1, confState: { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
    a.t.send(message('a', 'b', { type: 'snap', snapshot: { meta, data: new Uint8Array(10) } }));
    await waitFor('the failure status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ id: 'b', ok: false }]);
  });

  it('drops rather than queues without bound while a peer is down', async () => {
    const a = await node(pki, 'a', { limits: { queuedMessagesMax: 10, queuedBytesMax: 1024 * 1024 } });
    // Port 1 on loopback: nothing listens, every dial fails.
    a.t.setPeers([{ id: 'b', address: '127.0.0.1:1' }]);
    for (let i = 0; i < 25; i++) expect(() => a.t.send(message('a', 'b', { index: i }))).not.toThrow();
    expect(a.t.stats()[0]).toMatchObject({ id: 'b', connected: false, queued: 10, dropped: 15, sent: 0 });
    await waitFor('unreachable', () => a.unreachable.includes('b'));
    // Coalesced: one report per burst, not one per dropped message.
    expect(a.unreachable.length).toBeLessThan(15);
    // Dropped on a full queue; the connection never was up, so none was lost.
    expect(a.unreachableWhy.every((r) => r.why === 'dropped')).toBe(true);
  });

  it('bounds the queue in bytes too', async () => {
    const a = await node(pki, 'a', { limits: { queuedMessagesMax: 1000, queuedBytesMax: 10_000 } });
    a.t.setPeers([{ id: 'b', address: '127.0.0.1:1' }]);
    const entry = normalEntry(1, new Uint8Array(3000));
    for (let i = 0; i < 10; i++) a.t.send(message('a', 'b', { entries: [entry] }));
    expect(a.t.stats()[0]).toMatchObject({ queued: 3, dropped: 7 });
  });

  it('never throws on send to an unknown peer, and reports it unreachable', async () => {
    const a = await node(pki, 'a');
    expect(() => a.t.send(message('a', 'nobody'))).not.toThrow();
    await waitFor('unreachable', () => a.unreachable.includes('nobody'));
    expect(a.unreachableWhy).toEqual([{ id: 'nobody', why: 'dropped' }]);
  });

  it('measures round-trip time', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    connectAll(a, b);
    await waitFor('an rtt sample', () => a.t.stats()[0]?.rttMs != null);
    const rtt = a.t.stats()[0]?.rttMs ?? -1;
    expect(rtt).toBeGreaterThanOrEqual(0);
    expect(rtt).toBeLessThan(1000);
  });

  it('close is idempotent and stops handlers', async () => {
    const a = await node(pki, 'a');
    const b = await node(pki, 'b');
    connectAll(a, b);
    await waitFor('connected', () => a.t.stats()[0]?.connected === true && b.t.stats()[0]?.connected === true);
    await Promise.all([a.t.close(), a.t.close()]);
    await a.t.close();
    expect(() => a.t.send(message('a', 'b'))).not.toThrow();
    await waitFor('b to notice', () => b.t.stats()[0]?.connected === false);
  });
});
