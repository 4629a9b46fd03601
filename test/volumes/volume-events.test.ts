// Replicated volumes' events (src/node/events/volume-events.ts) from a real document store's
// changes: volume.replicated when the newest complete copy moves on (at most one a minute, saying
// how many versions since), volume.copy_failed on a new error, volume.restored for a failover's
// era and an operator's restore; nothing while not leading.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { watchVolumeEvents } from '../../src/node/events/volume-events.ts';
import { restoreEras, volumesCollection, type VolumeRecord } from '../../src/resources/volumes.ts';

const v = (seq: number, node: string, epoch = 0) => ({ seq, node, epoch });
const rec: VolumeRecord = { name: 'pgdata', service: 'db', copies: 2, everyMs: 1000, sizeBytes: 1 << 30, eras: [{ node: 'n1', epoch: 0, fromSeq: 1, base: null }], held: [], lastError: null };

function setup(leader = true) {
  const store = new DocumentStore();
  let index = 0;
  let now = 0;
  const put = (doc: VolumeRecord): void => {
    store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: volumesCollection, id: doc.name, doc: doc as unknown as JsonObject }, ts: 1, principal: 'shoal:test' }), logTimeMs: now, featureLevel: 6 });
  };
  const recorded: { type: string; details: JsonObject }[] = [];
  const stop = watchVolumeEvents({ isLeader: leader }, store, { recordEvent: (type: string, _subject: string, details: JsonObject) => { recorded.push({ type, details }); return Promise.resolve(); } } as never, () => now);
  const settle = () => new Promise((r) => setImmediate(r));
  return { put, recorded, stop, settle, at: (ms: number) => { now = ms; } };
}

describe('volume events', () => {
  it('says replicated when the newest copy moves on, at most once a minute, with the versions since', async () => {
    const s = setup();
    s.put(rec);
    let cur = rec;
    for (let i = 1; i <= 5; i++) {
      s.at(i * 1000);
      cur = { ...cur, held: [...cur.held, { node: 'n2', version: v(i, 'n1'), atMs: i * 1000 }] };
      s.put(cur);
    }
    s.at(70_000);
    cur = { ...cur, held: [...cur.held, { node: 'n2', version: v(6, 'n1'), atMs: 70_000 }] };
    s.put(cur);
    await s.settle();
    expect(s.recorded.filter((e) => e.type === 'volume.replicated')).toEqual([
      { type: 'volume.replicated', details: { version: 's1-e0-n1', nodes: ['n2'], versions: 1 } },
      { type: 'volume.replicated', details: { version: 's6-e0-n1', nodes: ['n2'], versions: 5 } },
    ]);
    s.stop();
  });

  it('says copy_failed on a new error only, and restored for a failover and an operator\'s restores', async () => {
    const s = setup();
    const held = { ...rec, held: [{ node: 'n2', version: v(3, 'n1'), atMs: 1 }] };
    s.put(held);
    s.put({ ...held, lastError: { atMs: 1, message: 'n3: refused' } });
    s.put({ ...held, lastError: { atMs: 2, message: 'n3: refused' } });
    const failedOver = { ...held, eras: [...held.eras, { node: 'n2', epoch: 4, fromSeq: 4, base: v(3, 'n1') }] };
    s.put(failedOver);
    s.put({ ...failedOver, eras: restoreEras(failedOver, v(3, 'n1')) });
    s.put({ ...failedOver, eras: [] });
    await s.settle();
    expect(s.recorded.filter((e) => e.type !== 'volume.replicated')).toEqual([
      { type: 'volume.copy_failed', details: { message: 'n3: refused' } },
      { type: 'volume.restored', details: { by: 'failover', version: 's3-e0-n1', node: 'n2' } },
      { type: 'volume.restored', details: { by: 'operator', version: 's3-e0-n1', node: null } },
      { type: 'volume.restored', details: { by: 'operator', version: null, node: null } },
    ]);
    s.stop();
  });

  it('records nothing on a node that does not lead', async () => {
    const s = setup(false);
    s.put(rec);
    s.put({ ...rec, held: [{ node: 'n2', version: v(1, 'n1'), atMs: 1 }], lastError: { atMs: 1, message: 'x' } });
    await s.settle();
    expect(s.recorded).toEqual([]);
    s.stop();
  });
});

describe('volume metrics', () => {
  it('report the newest complete copy\'s time and lag, the interval and the diverged copies; nothing for a volume with no copy', async () => {
    const { Registry } = await import('../../src/base/metrics.ts');
    const { registerVolumeMetrics } = await import('../../src/node/metrics/volume-metrics.ts');
    const store = new DocumentStore();
    let index = 0;
    const put = (doc: VolumeRecord): void => {
      store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: volumesCollection, id: doc.name, doc: doc as unknown as JsonObject }, ts: 1, principal: 'shoal:test' }), logTimeMs: 1, featureLevel: 6 });
    };
    put({ ...rec, eras: [...rec.eras, { node: 'n2', epoch: 1, fromSeq: 3, base: v(2, 'n1') }], held: [{ node: 'n2', version: v(2, 'n1'), atMs: 10_000 }, { node: 'n3', version: v(2, 'n1'), atMs: 12_000 }, { node: 'n1', version: v(3, 'n1'), atMs: 13_000 }] });
    put({ ...rec, name: 'empty' });
    const r = new Registry();
    registerVolumeMetrics(r, store, () => 40_000);
    const text = await r.render();
    expect(text).toMatch(/^shoal_volume_newest_copy_timestamp_seconds\{volume="pgdata"\} 10$/m);
    expect(text).toMatch(/^shoal_volume_replication_lag_seconds\{volume="pgdata"\} 30$/m);
    expect(text).not.toMatch(/^shoal_volume_replication_lag_seconds\{volume="empty"\}/m);
    expect(text).toMatch(/^shoal_volume_replication_interval_seconds\{volume="empty"\} 1$/m);
    expect(text).toMatch(/^shoal_volume_copies_diverged\{volume="pgdata"\} 1$/m);
  });
});
