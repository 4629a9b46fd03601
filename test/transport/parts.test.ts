import { describe, expect, it } from 'vitest';
import { Backoff } from '../../src/base/backoff.ts';
import { encodeFrame } from '../../transport/codec.ts';
import { agreedVersion, answerOf, checkHello, offerOf, type LocalIdentity } from '../../transport/handshake.ts';
import { resolveLimits } from '../../transport/limits.ts';
import { RepeatLimiter } from '../../transport/log-limiter.ts';
import { SendQueue } from '../../transport/send-queue.ts';
import { OutgoingSnapshot, SnapshotAssembler } from '../../transport/snapshot-stream.ts';
import { decodeFrame, message, normalEntry } from './helpers.ts';


describe('Backoff', () => {
  it('doubles from min to max, within the jitter', () => {
    const exact = new Backoff({ minMs: 50, maxMs: 2000, jitterRatio: 0.2 }, () => 0.5);
    expect(Array.from({ length: 8 }, () => exact.next())).toEqual([50, 100, 200, 400, 800, 1600, 2000, 2000]);
    exact.reset();
    expect(exact.next()).toBe(50);
    const low = new Backoff({ minMs: 50, maxMs: 2000, jitterRatio: 0.2 }, () => 0);
    const high = new Backoff({ minMs: 50, maxMs: 2000, jitterRatio: 0.2 }, () => 0.999999);
    expect(low.next()).toBe(40);
    expect(high.next()).toBe(60);
    for (let i = 0; i < 100; i++) high.next();
    expect(high.next()).toBeLessThanOrEqual(2400);
  });
});

describe('SendQueue', () => {
  it('bounds messages and bytes, and keeps FIFO order', () => {
    const q = new SendQueue(3, 10);
    expect(q.push(new Uint8Array(4))).toBe(true);
    expect(q.push(new Uint8Array(4))).toBe(true);
    expect(q.push(new Uint8Array(4))).toBe(false); // 12 bytes > 10
    expect(q.push(new Uint8Array(2))).toBe(true);
    expect(q.push(new Uint8Array(0))).toBe(false); // 4 messages > 3
    expect([q.length, q.bytes]).toEqual([3, 10]);
    expect(q.peek()?.byteLength).toBe(4);
    expect(q.length).toBe(3);
    expect(q.shift()?.byteLength).toBe(4);
    expect(q.bytes).toBe(6);
    expect(q.clear()).toBe(2);
    expect(q.shift()).toBeUndefined();
    expect(q.peek()).toBeUndefined();
  });

  it('stays correct across compaction', () => {
    const q = new SendQueue(10_000, 1 << 30);
    for (let i = 0; i < 5000; i++) q.push(new Uint8Array([i & 0xff]));
    for (let i = 0; i < 4000; i++) expect(q.shift()?.[0]).toBe(i & 0xff);
    expect(q.length).toBe(1000);
    expect(q.bytes).toBe(1000);
  });
});

describe('frame codec', () => {
  it('round-trips messages with Uint8Array data as plain Uint8Array', () => {
    const m = message('a', 'b', { entries: [normalEntry(1, new Uint8Array([9, 8, 7]))], context: 'read-1' });
    const d = decodeFrame(encodeFrame({ t: 'msg', m }));
    expect(d.ok).toBe(true);
    if (!d.ok || d.frame.t !== 'msg') throw new Error('bad decode');
    expect(d.frame.m).toEqual(m);
    const e = d.frame.m.entries[0];
    expect(e?.kind === 'normal' && Object.getPrototypeOf(e.data)).toBe(Uint8Array.prototype);
  });

  it('reports malformed input instead of throwing', () => {
    expect(decodeFrame(new Uint8Array([0xc1]))).toMatchObject({ ok: false });
    expect(decodeFrame(new Uint8Array(0))).toMatchObject({ ok: false });
    expect(decodeFrame(encodeFrame({ t: 'nope' } as never))).toMatchObject({ ok: false });
    const bad = decodeFrame(encodeFrame({ t: 'msg', m: { ...message('a', 'b'), index: 1.5 } }));
    expect(bad).toMatchObject({ ok: false, error: expect.stringContaining('m.index') });
  });
});

describe('hello checks', () => {
  const local: LocalIdentity = { nodeId: 'a', clusterId: 'c1', protocolVersion: 2, protocolVersionsSupported: { min: 1, max: 2 }, softwareVersion: '1' };
  const peer = (o: Partial<LocalIdentity>) => offerOf({ ...local, nodeId: 'b', ...o });
  it('accepts a matching peer and names each reason for refusing', () => {
    expect(checkHello(peer({}), local, 'b')).toBeNull();
    expect(checkHello(peer({ protocolVersion: 1 }), local, 'b')).toBeNull();
    expect(checkHello(peer({ clusterId: 'c2' }), local, 'b')?.reason).toBe('cluster_mismatch');
    expect(checkHello(peer({ protocolVersion: 3, protocolVersionsSupported: { min: 3, max: 3 } }), local, 'b')?.reason).toBe('protocol_unsupported');
    expect(checkHello(peer({ protocolVersion: 0, protocolVersionsSupported: { min: 0, max: 0 } }), local, 'b')?.reason).toBe('protocol_unsupported');
    expect(checkHello(peer({}), local, 'x')?.reason).toBe('node_id_mismatch');
    expect(checkHello(peer({}), local, 'b', 'c')?.reason).toBe('unexpected_peer');
    expect(checkHello(peer({ nodeId: 'a' }), local, 'a')?.reason).toBe('unexpected_peer');
  });

  it('agrees on the newest common version, in a way the first release accepts', () => {
    const v1: LocalIdentity = { ...local, nodeId: 'b', protocolVersion: 1, protocolVersionsSupported: { min: 1, max: 1 } };
    // The first release accepts a hello whose protocolVersion lies in its own range, 1..1.
    const v1Accepts = (version: number) => version === 1;
    // The dialler offers its oldest version; the listener answers with the agreed one.
    expect(offerOf(local)).toMatchObject({ protocolVersion: 1, protocolMin: 1, protocolMax: 2 });
    expect(v1Accepts(offerOf(local).protocolVersion)).toBe(true);
    expect(agreedVersion(offerOf(v1), local)).toBe(1);
    expect(v1Accepts(answerOf(local, 1).protocolVersion)).toBe(true);
    expect(agreedVersion(offerOf({ ...local, nodeId: 'b' }), local)).toBe(2);
    // A node that accepts 2 but still speaks 1 gets 1 as listener, 2 from a listener speaking 2.
    const accepts2 = { ...local, nodeId: 'b', protocolVersion: 1 };
    expect(agreedVersion(offerOf(local), accepts2)).toBe(1);
    expect(agreedVersion(offerOf(accepts2), local)).toBe(2);
    expect(agreedVersion(peer({ protocolVersion: 3, protocolVersionsSupported: { min: 3, max: 3 } }), local)).toBeNull();
    // The dialler checks the answer against its own range.
    expect(checkHello(answerOf(local, 2), v1, 'a', 'a')?.reason).toBe('protocol_unsupported');
    expect(checkHello(answerOf(local, 1), v1, 'a', 'a')).toBeNull();
  });
});

describe('snapshot streaming', () => {
  const meta = { index: 9, term: 2, confState: { voters: ['a'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } };
  function frames(data: Uint8Array, chunk: number): Uint8Array[] {
    const s = new OutgoingSnapshot(1, { ...message('a', 'b', { type: 'snap' }), snapshot: { meta, data } }, chunk);
    const out: Uint8Array[] = [];
    for (let f = s.nextFrame(); f !== null; f = s.nextFrame()) out.push(f);
    expect(s.finished).toBe(true);
    return out;
  }
  function feed(asm: SnapshotAssembler, fs: Uint8Array[]) {
    return fs.flatMap((f) => {
      const d = decodeFrame(f);
      if (!d.ok) throw new Error(d.error);
      if (d.frame.t === 'snapBegin') return asm.begin(d.frame);
      if (d.frame.t === 'snapChunk') return asm.chunk(d.frame);
      throw new Error('unexpected frame');
    });
  }

  it('splits into chunks and reassembles the same bytes', () => {
    const data = new Uint8Array(10_000).map((_, i) => i % 251);
    const fs = frames(data, 3000);
    expect(fs).toHaveLength(1 + 4);
    const events = feed(new SnapshotAssembler('a', 1 << 20), fs);
    expect(events).toHaveLength(1);
    const e = events[0];
    expect(e?.kind).toBe('done');
    if (e?.kind !== 'done') return;
    expect(e.message.snapshot?.meta).toEqual(meta);
    expect(Buffer.from(e.message.snapshot?.data ?? []).equals(data)).toBe(true);
  });

  it('handles an empty snapshot with the begin frame alone', () => {
    const events = feed(new SnapshotAssembler('a', 1 << 20), frames(new Uint8Array(0), 1000));
    expect(events.map((e) => e.kind)).toEqual(['done']);
  });

  it('fails a stream with a gap, and an oversized one, as broken by the sender', () => {
    const fs = frames(new Uint8Array(9000), 3000);
    const gapped = [fs[0], fs[2]].filter((f) => f !== undefined);
    expect(feed(new SnapshotAssembler('a', 1 << 20), gapped)).toMatchObject([{ kind: 'failed', broken: true }]);
    expect(feed(new SnapshotAssembler('a', 100), fs)).toMatchObject([{ kind: 'failed', broken: true }]);
  });

  it('aborts a stream in progress when a new one begins or the connection ends', () => {
    const asm = new SnapshotAssembler('a', 1 << 20);
    const fs = frames(new Uint8Array(9000), 3000);
    expect(feed(asm, fs.slice(0, 2))).toEqual([]);
    expect(asm.abort('closed')).toEqual([{ kind: 'failed', id: 1, reason: 'closed', broken: false }]);
    expect(asm.abort('again')).toEqual([]);
  });
});

describe('limits and log limiter', () => {
  it('fills defaults and rejects impossible limits', () => {
    expect(resolveLimits().queuedMessagesMax).toBe(4096);
    expect(resolveLimits({ queuedBytesMax: 10 }).queuedBytesMax).toBe(10);
    expect(() => resolveLimits({ snapshotChunkBytes: 16 * 1024 * 1024 })).toThrow(RangeError);
    expect(() => resolveLimits({ queuedMessagesMax: -1 })).toThrow(RangeError);
    expect(() => resolveLimits({ reconnectDelayMinMs: 5000 })).toThrow(RangeError);
    expect(resolveLimits().batchBytesMax).toBe(1024 * 1024);
    expect(() => resolveLimits({ batchBytesMax: 0 })).toThrow(RangeError);
  });

  it('lets a key through once per window', () => {
    let now = 0;
    const l = new RepeatLimiter(1000, () => now);
    expect(l.first('k')).toBe(true);
    expect(l.first('k')).toBe(false);
    now = 1500;
    expect(l.first('k')).toBe(true);
    l.forget('k');
    expect(l.first('k')).toBe(true);
  });
});
