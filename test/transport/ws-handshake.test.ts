// Talks to a WsTransport with a hand-driven WebSocket client, to send what a well-behaved
// transport never would: a lying hello, garbage, misaddressed messages.

import { once } from 'node:events';
import WebSocket from 'ws';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { encodeFrame } from '../../transport/codec.ts';
import { REFUSAL_CODES } from '../../transport/handshake.ts';
import { PEER_PATH } from '../../transport/socket-util.ts';
import type { WsTransportOptions } from '../../transport/ws-transport.ts';
import { decodeFrame, makePki, message, startNode, waitFor, type Node, type Pki } from './helpers.ts';


let pki: Pki;
const open: Node[] = [];
const clients: WebSocket[] = [];

beforeAll(async () => {
  pki = await makePki(['a', 'b']);
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.terminate();
  await Promise.all(open.splice(0).map((n) => n.t.close()));
});

async function target(limits = {}, overrides: Partial<WsTransportOptions> = {}): Promise<Node> {
  const n = await startNode(pki, 'a', { limits, ...overrides });
  open.push(n);
  return n;
}

/** A raw client presenting node b's certificate. */
async function rawClient(address: string): Promise<{ ws: WebSocket; frames: unknown[] }> {
  const b = pki.nodes.get('b');
  if (b === undefined) throw new Error('no cert');
  const ws = new WebSocket(`wss://${address}${PEER_PATH}`, {
    ca: pki.ca.certPem, cert: b.certPem, key: b.keyPem, minVersion: 'TLSv1.3', rejectUnauthorized: true,
  });
  clients.push(ws);
  const frames: unknown[] = [];
  ws.on('message', (data) => {
    const d = decodeFrame(data as Buffer);
    frames.push(d.ok ? d.frame : d.error);
  });
  ws.on('error', () => {});
  await once(ws, 'open');
  return { ws, frames };
}

const hello = (overrides: Record<string, unknown> = {}) => encodeFrame({
  t: 'hello', clusterId: 'test-cluster', nodeId: 'b', protocolVersion: 1, protocolMin: 1, protocolMax: 1, softwareVersion: 'raw',
  ...overrides,
} as Parameters<typeof encodeFrame>[0]);

function closeCode(ws: WebSocket): Promise<number> {
  return once(ws, 'close').then(([code]) => code as number);
}

describe('WsTransport handshake and frame validation', { timeout: 10_000 }, () => {
  it('answers a valid hello with its own', async () => {
    const a = await target();
    const { ws, frames } = await rawClient(a.t.address);
    ws.send(hello());
    await waitFor('the hello', () => frames.length === 1);
    expect(frames[0]).toMatchObject({ t: 'hello', nodeId: 'a', clusterId: 'test-cluster', protocolVersion: 1 });
  });

  it('refuses a node id that does not match the certificate', async () => {
    const a = await target();
    const { ws } = await rawClient(a.t.address);
    const closed = closeCode(ws);
    ws.send(hello({ nodeId: 'mallory' }));
    expect(await closed).toBe(REFUSAL_CODES.node_id_mismatch);
    expect(a.log.warned(/refused peer mallory .*node_id_mismatch.*certificate names 'b'/)).toBe(true);
  });

  it('refuses a first frame that is not a hello', async () => {
    const a = await target();
    const { ws } = await rawClient(a.t.address);
    const closed = closeCode(ws);
    ws.send(encodeFrame({ t: 'msg', m: message('b', 'a') }));
    expect(await closed).toBe(REFUSAL_CODES.bad_handshake);
    expect(a.received).toEqual([]);
  });

  it('refuses a peer that never says hello', async () => {
    const a = await target({ handshakeTimeoutMs: 200 });
    const { ws } = await rawClient(a.t.address);
    expect(await closeCode(ws)).toBe(REFUSAL_CODES.handshake_timeout);
  });

  it('logs and drops malformed and misaddressed frames, and keeps going', async () => {
    const a = await target();
    const { ws, frames } = await rawClient(a.t.address);
    ws.send(hello());
    await waitFor('the hello', () => frames.length === 1);
    ws.send(Buffer.from([0xc1, 0xff, 0x00])); // not msgpack
    ws.send(encodeFrame({ t: 'msg', m: { ...message('b', 'a'), term: -1 } }));
    ws.send(encodeFrame({ t: 'msg', m: { ...message('b', 'a'), type: 'hup' } }));
    ws.send(encodeFrame({ t: 'msg', m: message('b', 'a', { entries: [{ kind: 'normal', term: 1, index: 1, data: 'text' as unknown as Uint8Array }] }) }));
    ws.send('a text frame');
    ws.send(encodeFrame({ t: 'msg', m: message('mallory', 'a') })); // speaks for another node
    ws.send(encodeFrame({ t: 'msg', m: message('b', 'c') })); // addressed past this node
    ws.send(encodeFrame({ t: 'msg', m: message('b', 'a', { index: 42 }) }));
    await waitFor('the valid message', () => a.received.length === 1);
    expect(a.received[0]).toMatchObject({ from: 'b', to: 'a', index: 42 });
    expect(a.log.warned(/dropped a malformed frame/)).toBe(true);
    expect(a.log.warned(/dropped a 'app' message from b .*wrong_sender: .*"mallory"/)).toBe(true);
    expect(a.log.warned(/dropped a 'app' message from b .*misaddressed: .*"c"/)).toBe(true);
    // Counted by reason: four frames that fail the shape check and the text frame; one each of the others.
    expect(a.t.inboundDrops()).toMatchObject({ malformed: 5, wrong_sender: 1, misaddressed: 1, bad_term: 0 });
    expect(ws.readyState).toBe(WebSocket.OPEN);
  });

  it('refuses a snapshot larger than snapshotBytesMax and says so', async () => {
    const a = await target({ snapshotBytesMax: 1000 });
    const { ws, frames } = await rawClient(a.t.address);
    ws.send(hello());
    await waitFor('the hello', () => frames.length === 1);
    const meta = { index: 1, term: 1, confState: { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
    ws.send(encodeFrame({ t: 'snapBegin', id: 7, bytes: 5000, m: message('b', 'a', { type: 'snap', snapshot: { meta, data: new Uint8Array(0) } }) }));
    ws.send(encodeFrame({ t: 'snapChunk', id: 7, offset: 0, data: new Uint8Array(5000) }));
    await waitFor('the ack', () => frames.length === 2);
    expect(frames[1]).toMatchObject({ t: 'snapAck', id: 7, ok: false });
    expect(a.received).toEqual([]);
  });

  it('lets a newer connection from the same node supersede the old one', async () => {
    const a = await target();
    const first = await rawClient(a.t.address);
    first.ws.send(hello());
    await waitFor('the first hello', () => first.frames.length === 1);
    const closed = closeCode(first.ws);
    const second = await rawClient(a.t.address);
    second.ws.send(hello());
    expect(await closed).toBe(REFUSAL_CODES.superseded);
    second.ws.send(encodeFrame({ t: 'msg', m: message('b', 'a') }));
    await waitFor('delivery on the new connection', () => a.received.length === 1);
  });

  it('refuses a valid certificate that authorizePeer says is not a member', async () => {
    const n = await startNode(pki, 'a', { authorizePeer: (id) => (id !== 'b' ? 'member' : 'not_member') });
    open.push(n);
    const { ws } = await rawClient(n.t.address);
    const closed = closeCode(ws);
    ws.send(hello());
    expect(await closed).toBe(REFUSAL_CODES.peer_not_authorized);
  });

  it('refuses a removed node with the reason removed, and the dialler hears it', async () => {
    const a = await startNode(pki, 'a', { authorizePeer: (id) => (id === 'b' ? 'removed' : 'member') });
    open.push(a);
    const b = await startNode(pki, 'b');
    open.push(b);
    const refused: [string, string][] = [];
    b.t.onRefused((id, reason) => refused.push([id, reason]));
    b.t.setPeers([{ id: 'a', address: a.t.address }]);
    await waitFor('the refusal', () => refused.length > 0);
    expect(refused[0]).toEqual(['a', 'removed']);
  });

  it('tells a removed node of another cluster id that it was removed (a member left behind by a forced new cluster)', async () => {
    const a = await startNode(pki, 'a', { clusterId: 'recovered-cluster', authorizePeer: (id) => (id === 'b' ? 'removed' : 'member') });
    open.push(a);
    const { ws } = await rawClient(a.t.address);
    const closed = closeCode(ws);
    ws.send(hello());
    expect(await closed).toBe(REFUSAL_CODES.removed);
    // Anyone else of another cluster still hears cluster_mismatch.
    const c = await startNode(pki, 'a', { clusterId: 'recovered-cluster' });
    open.push(c);
    const other = await rawClient(c.t.address);
    const mismatch = closeCode(other.ws);
    other.ws.send(hello());
    expect(await mismatch).toBe(REFUSAL_CODES.cluster_mismatch);
  });

  it('refuses a hello that does not come alone', async () => {
    const a = await target();
    const { ws } = await rawClient(a.t.address);
    const closed = closeCode(ws);
    ws.send(Buffer.concat([hello(), encodeFrame({ t: 'msg', m: message('b', 'a') })]));
    expect(await closed).toBe(REFUSAL_CODES.bad_handshake);
    expect(a.log.warned(/bad_handshake: expected a hello alone, got 2 frames/)).toBe(true);
    expect(a.received).toEqual([]);
  });
});

describe('WsTransport batches (protocol 2)', { timeout: 10_000 }, () => {
  const v2 = { protocolVersion: 2, protocolVersionsSupported: { min: 1, max: 2 } };
  const msg = (index: number) => encodeFrame({ t: 'msg', m: message('b', 'a', { index }) });

  it('acts on every frame of a batch in order, and drops a batch with one corrupt frame whole', async () => {
    const a = await target({}, v2);
    const { ws, frames } = await rawClient(a.t.address);
    ws.send(hello({ protocolMax: 2 }));
    await waitFor('the hello', () => frames.length === 1);
    expect(frames[0]).toMatchObject({ t: 'hello', protocolVersion: 2 });
    ws.send(Buffer.concat([msg(1), msg(2)]));
    const corrupt = encodeFrame({ t: 'msg', m: { ...message('b', 'a'), index: -1 } });
    ws.send(Buffer.concat([msg(3), corrupt, msg(4)]));
    ws.send(Buffer.concat([msg(5), Buffer.from([0xc1])]));
    ws.send(msg(6));
    await waitFor('the last message', () => a.received.some((m) => m.index === 6));
    expect(a.received.map((m) => m.index)).toEqual([1, 2, 6]);
    expect(a.log.warned(/dropped a malformed frame from b .*frame 2 of 3: invalid frame: m\.index/)).toBe(true);
    expect(ws.readyState).toBe(WebSocket.OPEN);
  });

  it('refuses a batch on a protocol 1 connection, as the first release would', async () => {
    const a = await target({}, v2);
    const { ws, frames } = await rawClient(a.t.address);
    ws.send(hello());
    await waitFor('the hello', () => frames.length === 1);
    expect(frames[0]).toMatchObject({ t: 'hello', protocolVersion: 1 });
    ws.send(Buffer.concat([msg(1), msg(2)]));
    ws.send(msg(3));
    await waitFor('the single message', () => a.received.length === 1);
    expect(a.received[0]?.index).toBe(3);
    expect(a.log.warned(/dropped a malformed frame from b .*2 frames in one message on a protocol 1 connection/)).toBe(true);
  });
});
