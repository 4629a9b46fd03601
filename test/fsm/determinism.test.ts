import { describe, expect, it } from 'vitest';
import { DocumentStore, type Doc, type WatchEvent } from '../../fsm/index.ts';
import { hex } from './harness.ts';
import { Workload } from './workload.ts';

const collections = ['apps', 'nodes', 'svc.v1'];

describe('determinism', () => {
  it.each([1, 2, 3, 42, 2024])('seed %i: 2,000 random commands give identical snapshots and results on two stores', (seed) => {
    const opts = { eventsRetainedMax: 100, idempotencyRecordsMax: 50, idempotencyWindowMs: 3_600_000 };
    const a = new DocumentStore(opts);
    const b = new DocumentStore(opts);
    // A model rebuilt from the event stream alone must match the store: events describe every change.
    const model = new Map<string, Doc>();
    a.subscribe((ev: WatchEvent) => {
      const key = `${ev.collection}/${ev.id}`;
      if (ev.type === 'put') {
        expect(ev.prevRev).toBe(model.get(key)?.rev);
        model.set(key, ev.doc as Doc);
      } else {
        expect(model.has(key)).toBe(true);
        model.delete(key);
      }
    });
    const w = new Workload(seed);
    const kinds = new Map<string, number>();
    for (let i = 0; i < 2000; i++) {
      const e = w.next();
      const r = a.apply(e);
      expect(b.apply(e)).toEqual(r);
      const k = r.ok ? `${r.kind}${r.replayed ? '-replayed' : ''}` : r.error.code;
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
      if (i % 500 === 499) expect(hex(b.snapshot())).toBe(hex(a.snapshot()));
    }
    expect(hex(b.snapshot())).toBe(hex(a.snapshot()));
    // The workload reaches every outcome.
    for (const k of ['put', 'delete', 'txn', 'retain', 'put-replayed', 'revision_mismatch', 'already_exists', 'not_found', 'idempotency_conflict', 'invalid_command']) {
      expect(kinds.get(k) ?? 0, `${k} in ${JSON.stringify([...kinds])}`).toBeGreaterThan(0);
    }
    const stored = collections.flatMap((c) => a.list(c, { limit: 1000 }).items);
    expect(new Map(stored.map((d) => [`${d.collection}/${d.id}`, d]))).toEqual(model);
    expect(a.stats().documents).toBe(model.size);
  });
});
