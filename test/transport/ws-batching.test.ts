// Coalescing: the messages a node sends in one turn leave as one WebSocket message to a peer
// that speaks protocol 2, one per message to a peer of the first release (protocol 1).

import { beforeAll, describe, expect, it } from 'vitest';
import type { NodeId } from '../../src/raft/types.ts';
import { closedAfterEach, connectAll, makePki, message, type Node, normalEntry, type Pki, startNode, waitFor } from './helpers.ts';

let pki: Pki;
const open = closedAfterEach();
const V2 = { protocolVersion: 2, protocolVersionsSupported: { min: 1, max: 2 } };
const V1 = { protocolVersion: 1, protocolVersionsSupported: { min: 1, max: 1 } };

async function node(...args: Parameters<typeof startNode>): Promise<Node> {
  const n = await startNode(...args);
  open.push(n);
  return n;
}

beforeAll(async () => {
  pki = await makePki(['a', 'b']);
});

function statsOf(n: Node, peer: NodeId) {
  const s = n.t.stats().find((p) => p.id === peer);
  if (s === undefined) throw new Error(`${n.id} has no link to ${peer}`);
  return s;
}

async function connected(...nodes: Node[]): Promise<void> {
  connectAll(...nodes);
  await waitFor('all links up', () => nodes.every((n) => n.t.stats().every((s) => s.connected)));
}

function burst(from: Node, to: NodeId, n: number, first = 1): void {
  for (let i = first; i < first + n; i++) from.t.send(message(from.id, to, { index: i }));
}

describe('WsTransport coalescing', { timeout: 15_000 }, () => {
  it('sends a burst to a protocol 2 peer as one WebSocket message, all of it, in order', async () => {
    const a = await node(pki, 'a', V2);
    const b = await node(pki, 'b', V2);
    await connected(a, b);
    expect(statsOf(a, 'b').protocolVersion).toBe(2);
    const before = statsOf(b, 'a').wsMessagesReceived ?? 0;
    burst(a, 'b', 300);
    await waitFor('300 messages', () => b.received.length === 300);
    expect(b.received.map((m) => m.index)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    // One turn, one flush, 300 small frames far under the 1 MiB batch bound.
    expect((statsOf(b, 'a').wsMessagesReceived ?? 0) - before).toBe(1);
    await waitFor('the writes to complete', () => statsOf(a, 'b').sent === 300);
    expect(statsOf(a, 'b')).toMatchObject({ sent: 300, dropped: 0, queued: 0 });
    expect(statsOf(b, 'a').received).toBe(300);
  });

  it('keeps a batch under batchBytesMax and sends a larger frame alone, unsplit', async () => {
    const limits = { batchBytesMax: 2000 };
    const a = await node(pki, 'a', { ...V2, limits });
    const b = await node(pki, 'b', V2);
    await connected(a, b);
    const before = statsOf(b, 'a').wsMessagesReceived ?? 0;
    const big = new Uint8Array(10_000).fill(7);
    for (let i = 1; i <= 100; i++) a.t.send(message('a', 'b', { index: i, entries: i === 50 ? [normalEntry(i + 1, big)] : [] }));
    await waitFor('100 messages', () => b.received.length === 100);
    expect(b.received.map((m) => m.index)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    const e = b.received[49]?.entries[0];
    expect(e?.kind === 'normal' && e.data).toEqual(big);
    // ~60 bytes a frame: 99 small frames need at least 3 batches of 2000 bytes, plus the big one.
    const ws = (statsOf(b, 'a').wsMessagesReceived ?? 0) - before;
    expect(ws).toBeGreaterThanOrEqual(4);
    expect(ws).toBeLessThan(20);
  });

  it('talks to a first-release (protocol 1) peer both ways, one frame per WebSocket message', async () => {
    const a = await node(pki, 'a', V2);
    const b = await node(pki, 'b', V1);
    await connected(a, b);
    expect(statsOf(a, 'b').protocolVersion).toBe(1);
    expect(statsOf(b, 'a').protocolVersion).toBe(1);
    const [aBefore, bBefore] = [statsOf(a, 'b').wsMessagesReceived ?? 0, statsOf(b, 'a').wsMessagesReceived ?? 0];
    burst(a, 'b', 50);
    burst(b, 'a', 50);
    await waitFor('both bursts', () => b.received.length === 50 && a.received.length === 50);
    expect(b.received.map((m) => m.index)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(a.received.map((m) => m.index)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect((statsOf(b, 'a').wsMessagesReceived ?? 0) - bBefore).toBe(50);
    expect((statsOf(a, 'b').wsMessagesReceived ?? 0) - aBefore).toBe(50);
    expect(a.log.warned(/malformed|refused/) || b.log.warned(/malformed|refused/)).toBe(false);
  });
});
