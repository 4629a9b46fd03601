import { SeededPrng } from '../../src/raft/prng.ts';
import { describe, expect, it } from 'vitest';
import type { Message, NodeId } from '../../src/raft/types.ts';
import { MemoryNetwork, type MemoryNetworkOptions, type MemoryTransport } from '../../transport/memory-transport.ts';
import { message, normalEntry, waitFor } from './helpers.ts';

interface MemNode {
  t: MemoryTransport;
  received: Message[];
  unreachable: NodeId[];
  unreachableWhy: string[];
  snapshotStatus: { id: NodeId; ok: boolean }[];
}

async function cluster(ids: NodeId[], options: MemoryNetworkOptions = {}): Promise<{ net: MemoryNetwork; nodes: Record<NodeId, MemNode> }> {
  const net = new MemoryNetwork(options);
  const nodes: Record<NodeId, MemNode> = {};
  for (const id of ids) {
    const n: MemNode = { t: net.transport(id), received: [], unreachable: [], unreachableWhy: [], snapshotStatus: [] };
    n.t.onMessage((m) => {
      n.received.push(m);
    });
    n.t.onUnreachable((peer, why) => {
      n.unreachable.push(peer);
      n.unreachableWhy.push(`${peer}:${why}`);
    });
    n.t.onSnapshotStatus((peer, ok) => n.snapshotStatus.push({ id: peer, ok }));
    await n.t.start();
    n.t.setPeers(ids.map((p) => ({ id: p, address: `memory:${p}` })));
    nodes[id] = n;
  }
  return { net, nodes };
}

function get(nodes: Record<NodeId, MemNode>, id: NodeId): MemNode {
  const n = nodes[id];
  if (n === undefined) throw new Error(`no node ${id}`);
  return n;
}

/** Seeded draws in [0, 1), so fault decisions replay exactly. */
function seeded(seed: number): () => number {
  const prng = new SeededPrng(seed);
  return () => prng.nextFloat();
}

describe('MemoryTransport', () => {
  it('delivers asynchronously, as a copy, and counts', async () => {
    const { nodes } = await cluster(['a', 'b']);
    const a = get(nodes, 'a');
    const b = get(nodes, 'b');
    const data = new Uint8Array([1, 2, 3]);
    const m = message('a', 'b', { entries: [normalEntry(1, data)] });
    a.t.send(m);
    expect(b.received).toEqual([]); // never inside send
    await waitFor('delivery', () => b.received.length === 1);
    expect(b.received[0]).toEqual(m);
    expect(b.received[0]).not.toBe(m);
    expect(a.t.stats()).toEqual([{ id: 'b', connected: true, rttMs: null, queued: 0, sent: 1, received: 0, dropped: 0, softwareVersion: 'memory', protocolVersion: 1 }]);
    expect(b.t.stats()[0]).toMatchObject({ id: 'a', received: 1 });
  });

  it('partition drops both ways and reports unreachable; heal restores', async () => {
    const { net, nodes } = await cluster(['a', 'b', 'c'], { manual: true });
    const [a, b, c] = [get(nodes, 'a'), get(nodes, 'b'), get(nodes, 'c')];
    net.partition('a', 'b');
    a.t.send(message('a', 'b'));
    b.t.send(message('b', 'a'));
    a.t.send(message('a', 'c'));
    expect(net.flush()).toBe(1);
    expect(c.received).toHaveLength(1);
    expect(a.received).toEqual([]);
    expect(b.received).toEqual([]);
    await Promise.resolve();
    expect(a.unreachable).toEqual(['b']);
    expect(b.unreachable).toEqual(['a']);
    expect(a.t.stats().find((s) => s.id === 'b')).toMatchObject({ connected: false, dropped: 1 });
    net.heal();
    a.t.send(message('a', 'b'));
    net.flush();
    expect(b.received).toHaveLength(1);
  });

  it('oneWay cuts one direction only', async () => {
    const { net, nodes } = await cluster(['a', 'b'], { manual: true });
    const [a, b] = [get(nodes, 'a'), get(nodes, 'b')];
    net.oneWay('a', 'b');
    a.t.send(message('a', 'b'));
    b.t.send(message('b', 'a'));
    net.flush();
    expect(b.received).toEqual([]);
    expect(a.received).toHaveLength(1);
  });

  it('isolate cuts a node off from everyone', async () => {
    const { net, nodes } = await cluster(['a', 'b', 'c'], { manual: true });
    const [a, b, c] = [get(nodes, 'a'), get(nodes, 'b'), get(nodes, 'c')];
    net.isolate('a');
    a.t.send(message('a', 'b'));
    b.t.send(message('b', 'a'));
    c.t.send(message('c', 'a'));
    b.t.send(message('b', 'c'));
    net.flush();
    expect(a.received).toEqual([]);
    expect(b.received).toEqual([]);
    expect(c.received).toHaveLength(1);
  });

  it('drops at the configured rate, silently, and reproducibly from a seed', async () => {
    const run = async (seed: number): Promise<number[]> => {
      const { net, nodes } = await cluster(['a', 'b'], { manual: true, dropRate: 0.3, random: seeded(seed) });
      for (let i = 0; i < 200; i++) get(nodes, 'a').t.send(message('a', 'b', { index: i }));
      net.flush();
      await Promise.resolve();
      expect(get(nodes, 'a').unreachable).toEqual([]);
      expect(get(nodes, 'a').t.stats()[0]?.dropped).toBe(200 - get(nodes, 'b').received.length);
      return get(nodes, 'b').received.map((m) => m.index);
    };
    const first = await run(42);
    expect(first.length).toBeGreaterThan(100);
    expect(first.length).toBeLessThan(180);
    expect(await run(42)).toEqual(first);
    expect(await run(43)).not.toEqual(first);
  });

  it('duplicates at the configured rate', async () => {
    const { net, nodes } = await cluster(['a', 'b'], { manual: true, duplicateRate: 1 });
    get(nodes, 'a').t.send(message('a', 'b'));
    expect(net.pending).toBe(2);
    net.flush();
    expect(get(nodes, 'b').received).toHaveLength(2);
  });

  it('delays delivery by timer, and flush delivers ahead of the timers', async () => {
    const { net, nodes } = await cluster(['a', 'b'], { delayMs: { min: 40, max: 60 } });
    get(nodes, 'a').t.send(message('a', 'b'));
    await new Promise((r) => setTimeout(r, 10));
    expect(get(nodes, 'b').received).toEqual([]);
    await waitFor('delayed delivery', () => get(nodes, 'b').received.length === 1);
    get(nodes, 'a').t.send(message('a', 'b'));
    expect(net.flush()).toBe(1);
    expect(get(nodes, 'b').received).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 80));
    expect(get(nodes, 'b').received).toHaveLength(2); // the timer found nothing left to deliver
  });

  it('reports snapshot status: ok when delivered, failed when cut off', async () => {
    const { net, nodes } = await cluster(['a', 'b'], { manual: true });
    const a = get(nodes, 'a');
    const meta = { index: 3, term: 1, confState: { voters: ['a', 'b'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
    a.t.send(message('a', 'b', { type: 'snap', snapshot: { meta, data: new Uint8Array(10) } }));
    net.flush();
    await Promise.resolve();
    expect(a.snapshotStatus).toEqual([{ id: 'b', ok: true }]);
    net.partition('a', 'b');
    a.t.send(message('a', 'b', { type: 'snap', snapshot: { meta, data: new Uint8Array(10) } }));
    await Promise.resolve();
    expect(a.snapshotStatus).toEqual([{ id: 'b', ok: true }, { id: 'b', ok: false }]);
  });

  it('never throws: unknown peers and closed peers are unreachable', async () => {
    const { net, nodes } = await cluster(['a', 'b'], { manual: true });
    const a = get(nodes, 'a');
    expect(() => a.t.send(message('a', 'nobody'))).not.toThrow();
    await get(nodes, 'b').t.close();
    a.t.send(message('a', 'b'));
    expect(net.pending).toBe(0);
    await Promise.resolve();
    expect(a.unreachable).toEqual(['nobody', 'b']);
    // A peer not known is a drop; a known one the network cannot reach, a lost connection.
    expect(a.unreachableWhy).toEqual(['nobody:dropped', 'b:disconnected']);
    await a.t.close();
    await a.t.close();
    expect(() => a.t.send(message('a', 'b'))).not.toThrow();
  });

  it('refuses two running transports with the same id', async () => {
    const net = new MemoryNetwork();
    await net.transport('a').start();
    await expect(net.transport('a').start()).rejects.toThrow(/already registered/);
  });
});
