// The node's replicated-volume loop (src/executor/volumes/volume-loop.ts) over a real document
// store and an engine that records what it is asked: on the writer's node (its current epoch) the
// writer's pass, once the live volume is made for the era, and not again before `every`; on
// another node the holder's pass, its live volume set aside once the record names another
// writer, but never on a restart in place (this node named, an older epoch: the agent keeps it).
// Started, it wakes on the records' changes and arms a timer only while this node writes or holds
// a volume (fake timers count them: none at all on a node with no volume records).

import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { silentLogger } from '../../src/log.ts';
import { nodesCollection } from '../../src/resources/collections.ts';
import { VolumeLoop } from '../../src/executor/volumes/volume-loop.ts';
import type { VolumeEngine } from '../../src/executor/volumes/volume-engine.ts';
import { volumesCollection, type VolumeRecord, type VolumeVersion } from '../../src/resources/volumes.ts';

const node = (id: string, epoch: number) => ({
  id, name: id, addresses: { api: '127.0.0.1:1', peer: '127.0.0.1:2' }, capacity: { cpuMillis: 1000, memoryBytes: 1 << 30 }, labels: {},
  availability: 'active', state: 'ready', epoch, runtime: { status: 'up', error: null }, softwareVersion: '0.0.0-test', mesh: null,
});

function setup(self: string, rec: VolumeRecord | null, epochs: Record<string, number>, opts: { has?: boolean } = {}) {
  const store = new DocumentStore();
  let index = 0;
  const put = (collection: string, id: string, doc: unknown): void => {
    store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: 1, principal: 'shoal:test' }), logTimeMs: 1, featureLevel: 6 });
  };
  for (const [id, epoch] of Object.entries(epochs)) put(nodesCollection, id, node(id, epoch));
  if (rec !== null) put(volumesCollection, rec.name, rec);
  const calls: string[] = [];
  const local: VolumeVersion[] = [];
  let liveReady = true;
  const engine = {
    liveIsFor: async () => liveReady,
    has: async () => opts.has ?? true,
    ensure: async () => { calls.push('ensure'); },
    setAsideLive: async () => { calls.push('setAside'); return 'live-1'; },
    versions: async () => [...local],
    snapshot: async (_n: string, v: VolumeVersion) => { calls.push(`snapshot s${v.seq}`); local.push(v); },
    makeIncrement: async (volume: string, version: VolumeVersion, parent: VolumeVersion | null, sender: { node: string; epoch: number }) => ({ volume, version, parent, sender, bytes: 1, sha256: '0'.repeat(64), file: '/dev/null' }),
    body: () => { const p = new PassThrough(); p.end(); return p; },
    release: async () => undefined,
    drop: async (_n: string, v: VolumeVersion) => { calls.push(`drop s${v.seq}`); local.splice(local.findIndex((l) => l.seq === v.seq), 1); },
  } as unknown as VolumeEngine;
  const held: string[] = [];
  let now = 0;
  const loop = new VolumeLoop({
    engine, store, self, log: silentLogger, now: () => now,
    send: async (to) => { calls.push(`send ${to}`); },
    writer: {
      record: (name) => store.get(volumesCollection, name)?.doc as unknown as VolumeRecord,
      recordHeld: async (_n, to, vs) => { held.push(...vs.map((v) => `${to}:s${v.seq}`)); },
      forgetHeld: async () => undefined,
      recordError: async () => undefined,
      finishRemoval: async (name, to, vs) => {
        calls.push(`finished ${to}:${vs.map((v) => `s${v.seq}`).join(',')}`);
        const cur = store.get(volumesCollection, name)?.doc as unknown as VolumeRecord;
        put(volumesCollection, name, { ...cur, removing: (cur.removing ?? []).filter((r) => r.node !== to || !vs.some((v) => v.seq === r.version.seq)) });
      },
    },
  });
  return { loop, calls, held, put, setNow: (ms: number) => { now = ms; }, setLive: (b: boolean) => { liveReady = b; }, local };
}

const rec = (eras: VolumeRecord['eras']): VolumeRecord => ({ name: 'pgdata', service: 'db', copies: 2, everyMs: 5_000, sizeBytes: 1 << 30, eras, held: [], lastError: null });

describe('the volume loop', () => {
  it('runs the writer\'s pass on the writer\'s node once its live volume is made, then not before every', async () => {
    const s = setup('n1', rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }]), { n1: 2, n2: 0, n3: 0 });
    s.setLive(false);
    s.loop.tick();
    await s.loop.close().then(() => undefined);
    expect(s.calls).toEqual([]);
    const t = setup('n1', rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }]), { n1: 2, n2: 0, n3: 0 });
    t.loop.tick();
    await t.loop.idle();
    expect(t.calls).toEqual(['snapshot s1', 'send n2', 'send n3']);
    expect(t.held).toEqual(['n2:s1', 'n3:s1']);
    t.setNow(4_000);
    t.loop.tick();
    await t.loop.idle();
    expect(t.calls).toHaveLength(3);
    t.setNow(5_000);
    t.loop.tick();
    await t.loop.close();
    expect(t.calls.slice(3)).toEqual(['snapshot s2', 'send n2', 'send n3']);
  });

  it('on another node runs the holder\'s pass and sets its old live volume aside once another node writes', async () => {
    const s = setup('n1', rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }, { node: 'n2', epoch: 5, fromSeq: 4, base: { seq: 3, node: 'n1', epoch: 2 } }]), { n1: 3, n2: 5 });
    s.local.push({ seq: 3, node: 'n1', epoch: 2 }, { seq: 4, node: 'n1', epoch: 2 });
    s.loop.tick();
    await s.loop.close();
    expect(s.calls).toEqual(['ensure', 'setAside']);
    // Its versions recorded: s3 of the line, s4 (taken after n2 began at 4) diverged but kept and listed.
    expect(s.held).toEqual(['n1:s3', 'n1:s4']);
  });

  it('keeps its live volume on a restart in place (the record names this node, an older epoch): no pass, nothing set aside', async () => {
    const s = setup('n1', rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }]), { n1: 3 });
    s.loop.tick();
    await s.loop.close();
    expect(s.calls).toEqual(['ensure']);
    expect(s.held).toEqual([]);
  });

  it('deletes the copies the operator removed from this node at once, then takes them off the record, and does not record them again', async () => {
    const line = [{ node: 'n1', epoch: 2, fromSeq: 1, base: null }, { node: 'n2', epoch: 5, fromSeq: 4, base: { seq: 3, node: 'n1', epoch: 2 } }];
    const s = setup('n3', { ...rec(line), held: [{ node: 'n3', version: { seq: 3, node: 'n1', epoch: 2 }, atMs: 1 }] }, { n1: 3, n2: 5, n3: 0 });
    s.local.push({ seq: 3, node: 'n1', epoch: 2 }, { seq: 4, node: 'n1', epoch: 2 });
    s.loop.tick();
    await s.loop.idle();
    expect(s.held).toEqual(['n3:s4']);
    // The operator removed n3's diverged s4 (the API forgot it in held and listed it in removing); its pass is not due yet.
    s.setNow(1_000);
    s.put(volumesCollection, 'pgdata', { ...rec(line), held: [{ node: 'n3', version: { seq: 3, node: 'n1', epoch: 2 }, atMs: 1 }], removing: [{ node: 'n3', version: { seq: 4, node: 'n1', epoch: 2 } }] });
    s.loop.tick();
    await s.loop.idle();
    expect(s.calls.slice(-3)).toEqual(['ensure', 'drop s4', 'finished n3:s4']);
    expect(s.local.map((v) => v.seq)).toEqual([3]);
    s.setNow(10_000);
    s.loop.tick();
    await s.loop.close();
    expect(s.held).toEqual(['n3:s4']);
  });

  describe('started', () => {
    afterEach(() => { vi.useRealTimers(); });
    const fakeTimers = (): void => { vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] }); };

    it('arms no timer and runs no pass on a node with no volume records; a record appearing wakes it, and then it keeps one', async () => {
      fakeTimers();
      const s = setup('n1', null, { n1: 2, n2: 0 });
      s.loop.start();
      expect(vi.getTimerCount()).toBe(0);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(s.calls).toEqual([]);
      expect(vi.getTimerCount()).toBe(0);
      // The leader places the task here: the record appears naming this node, no timer needed to notice it.
      s.put(volumesCollection, 'pgdata', rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }]));
      await Promise.resolve();
      await s.loop.idle();
      expect(s.calls).toEqual(['snapshot s1', 'send n2']);
      // It writes the volume now: one timer, for the next interval.
      expect(vi.getTimerCount()).toBe(1);
      expect(s.loop.timerArmed).toBe(true);
      await s.loop.close();
      expect(vi.getTimerCount()).toBe(0);
    });

    it('looks at a record that names it not, on its change, and arms no timer for it', async () => {
      fakeTimers();
      const s = setup('n3', rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }]), { n1: 2, n2: 0, n3: 0 }, { has: false });
      s.loop.start();
      await s.loop.idle();
      expect(s.calls).toEqual([]);
      expect(vi.getTimerCount()).toBe(0);
      // A copy recorded on this node (the writer sent it one): it holds the volume now, so it keeps a timer.
      s.put(volumesCollection, 'pgdata', { ...rec([{ node: 'n1', epoch: 2, fromSeq: 1, base: null }]), held: [{ node: 'n3', version: { seq: 1, node: 'n1', epoch: 2 }, atMs: 1 }] });
      await Promise.resolve();
      await s.loop.idle();
      expect(vi.getTimerCount()).toBe(1);
      await s.loop.close();
    });
  });
});
