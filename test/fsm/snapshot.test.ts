import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { DocumentStore, SnapshotFormatError, type DocumentStoreOptions } from '../../fsm/index.ts';
import { hex } from './harness.ts';
import { Workload } from './workload.ts';

const opts: DocumentStoreOptions = { eventsRetainedMax: 40, idempotencyRecordsMax: 30, idempotencyWindowMs: 600_000 };
const collections = ['apps', 'nodes', 'svc.v1'];

/** Everything a client can observe of a store, as plain data. */
function observe(s: DocumentStore): unknown {
  const afterRev = s.oldestRev - 1;
  return {
    revision: s.revision,
    logTimeMs: s.logTimeMs,
    stats: s.stats(),
    oldestRev: s.oldestRev,
    lists: collections.map((c) => s.list(c, { limit: 1000 })),
    pages: collections.map((c) => s.list(c, { limit: 3, after: 'd3', prefix: 'd' })),
    events: s.eventsSince(afterRev, {}),
    filtered: s.eventsSince(afterRev, { collection: 'apps', prefix: 'd1' }),
  };
}

describe('snapshot', () => {
  it('two stores fed the same entries write byte-identical snapshots; a restored third behaves the same', () => {
    const entries = new Workload(11).entries(600);
    const a = new DocumentStore(opts);
    const b = new DocumentStore(opts);
    for (const e of entries.slice(0, 400)) {
      a.apply(e);
      b.apply(e);
    }
    const snap = a.snapshot();
    expect(hex(b.snapshot())).toBe(hex(snap));
    const c = new DocumentStore(opts);
    let restoredTo = -1;
    c.subscribeRestore((rev) => (restoredTo = rev));
    c.restore(snap);
    expect(restoredTo).toBe(a.revision);
    expect(hex(c.snapshot())).toBe(hex(snap));
    expect(observe(c)).toEqual(observe(a));
    // The same entries afterwards give the same results (idempotency replays and conflicts included).
    for (const e of entries.slice(400)) {
      const ra = a.apply(e);
      expect(c.apply(e)).toEqual(ra);
      expect(b.apply(e)).toEqual(ra);
    }
    expect(hex(c.snapshot())).toBe(hex(a.snapshot()));
    expect(hex(b.snapshot())).toBe(hex(a.snapshot()));
    expect(observe(c)).toEqual(observe(a));
  });

  it('restores an empty store', () => {
    const a = new DocumentStore();
    const c = new DocumentStore();
    c.restore(a.snapshot());
    expect(c.stats()).toEqual({ documents: 0, collections: 0, events: 0, idempotencyRecords: 0 });
    expect(c.revision).toBe(0);
  });

  it('refuses damaged data and keeps its state', () => {
    const a = new DocumentStore(opts);
    for (const e of new Workload(3).entries(100)) a.apply(e);
    const good = a.snapshot();
    const c = new DocumentStore(opts);
    c.restore(good);
    const packr = new Packr({ useRecords: false });
    const value = packr.unpack(good) as Record<string, unknown>;
    const bad = [
      new Uint8Array([0xc1]),
      good.subarray(0, good.length - 3),
      packr.pack({ ...value, revision: -1 }),
      packr.pack({ ...value, collections: [...(value.collections as unknown[])].reverse() }),
      packr.pack({ ...value, extra: 1 }),
    ];
    for (const data of bad) {
      expect(() => c.restore(data)).toThrow(SnapshotFormatError);
      expect(hex(c.snapshot())).toBe(hex(good));
    }
    try {
      c.restore(packr.pack({ ...value, format: 'shoal.fsm/99' }));
      expect.fail('should throw');
    } catch (err) {
      expect(err).toMatchObject({ code: 'storage_format' });
    }
  });

  it('names the row and the rule a damaged document or event breaks, and keeps its state', () => {
    const a = new DocumentStore(opts);
    for (const e of new Workload(4).entries(100)) a.apply(e);
    const good = a.snapshot();
    const packr = new Packr({ useRecords: false });
    const value = packr.unpack(good) as { collections: [string, unknown[][]][]; events: unknown[][] } & Record<string, unknown>;
    const withRow = (ci: number, i: number, change: (row: unknown[]) => unknown): Uint8Array => {
      const collections = structuredClone(value.collections);
      const rows = (collections[ci] as [string, unknown[][]])[1];
      rows[i] = change(rows[i] as unknown[]) as unknown[];
      return packr.pack({ ...value, collections });
    };
    const withEvent = (i: number, change: (row: unknown[]) => unknown): Uint8Array => {
      const events = structuredClone(value.events);
      events[i] = change(events[i] as unknown[]) as unknown[];
      return packr.pack({ ...value, events });
    };
    const putEvent = value.events.findIndex((e) => e[1] === 'put');
    const cases: [Uint8Array, string, RegExp][] = [
      [withRow(0, 1, ([, ...rest]) => ['a/b', ...rest]), 'collections.0.1.0', /may not contain '\/'/],
      [withRow(0, 1, ([id, , ...rest]) => [id, -1, ...rest]), 'collections.0.1', /whole numbers/],
      [withRow(0, 1, (row) => row.slice(0, 3)), 'collections.0.1', /\[id, rev, createRev, document\]/],
      [withRow(0, 1, (row) => [...row.slice(0, 3), { deep: { x: [1, new Date(0)] } }]), 'collections.0.1.doc.deep.x.1', /not a plain JSON object/],
      [withRow(0, 1, (row) => [...row.slice(0, 3), 'text']), 'collections.0.1.doc', /must be a JSON object/],
      [packr.pack({ ...value, collections: [['Bad Name', []], ...value.collections] }), 'collections.0.0', /collection names/],
      [withEvent(putEvent, ([rev, , ...rest]) => [rev, 'patch', ...rest]), `events.${putEvent}`, /'put' or 'delete'/],
      [withEvent(putEvent, (row) => [...row, 1]), `events.${putEvent}`, /\[rev, type/],
    ];
    const c = new DocumentStore(opts);
    c.restore(good);
    for (const [data, path, message] of cases) {
      let thrown: unknown;
      try {
        c.restore(data);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(SnapshotFormatError);
      const issues = (thrown as SnapshotFormatError).details?.issues as { path: string; message: string }[];
      expect(issues).toContainEqual({ path, message: expect.stringMatching(message) });
      expect(hex(c.snapshot())).toBe(hex(good));
    }
  });

  it('documents restored from a snapshot are frozen and shared with the events that describe them', () => {
    const a = new DocumentStore();
    for (const e of new Workload(5).entries(50)) a.apply(e);
    const c = new DocumentStore();
    c.restore(a.snapshot());
    const ev = c.eventsSince(0, {}).find((e) => e.doc !== undefined && c.get(e.collection, e.id)?.rev === e.rev);
    expect(ev).toBeDefined();
    expect(ev?.doc).toBe(c.get(ev?.collection ?? '', ev?.id ?? ''));
    expect(Object.isFrozen(ev?.doc?.doc)).toBe(true);
  });
});

/** msgpackr's own packing of what the bytes decode to: the hand-built encoding must equal it. */
function repacked(bytes: Uint8Array): string {
  const packr = new Packr({ useRecords: false });
  return hex(packr.pack(packr.unpack(bytes)));
}

describe('snapshot in slices', () => {
  it.each([1, 7, 64, 512])('writes the same bytes as snapshot() with %i rows per slice, whatever is applied meanwhile', async (rowsPerSlice) => {
    const big: DocumentStoreOptions = { eventsRetainedMax: 70_000, idempotencyRecordsMax: 30, idempotencyWindowMs: 600_000 };
    const entries = new Workload(rowsPerSlice).entries(900);
    const a = new DocumentStore(big);
    for (const e of entries.slice(0, 700)) a.apply(e);
    const expected = hex(a.snapshot());
    expect(repacked(a.snapshot())).toBe(expected);
    let pauses = 0;
    const rest = entries.slice(700);
    // Apply the remaining entries while the slices are being encoded: the result must not move.
    const sliced = Buffer.concat(await a.snapshotInSlices(async () => {
      pauses++;
      const e = rest.shift();
      if (e) a.apply(e);
    }));
    expect(hex(sliced)).toBe(expected);
    expect(pauses).toBeGreaterThan(1);
    const b = new DocumentStore(big);
    b.restore(sliced);
    expect(observe(b)).toEqual(observe(restoredFrom(expected, big)));
  });

  it('writes the array headers of every size class (fixarray, array16, array32)', async () => {
    const s = new DocumentStore({ eventsRetainedMax: 200_000, idempotencyRecordsMax: 30, idempotencyWindowMs: 600_000 });
    const entries = new Workload(5).entries(85_000);
    for (const e of entries) s.apply(e);
    expect(s.stats().events).toBeGreaterThanOrEqual(0x10000);
    const sliced = Buffer.concat(await s.snapshotInSlices(async () => {}));
    expect(hex(sliced)).toBe(hex(s.snapshot()));
    expect(repacked(sliced)).toBe(hex(sliced));
  });
});

function restoredFrom(hexBytes: string, o: DocumentStoreOptions): DocumentStore {
  const s = new DocumentStore(o);
  s.restore(Buffer.from(hexBytes, 'hex'));
  return s;
}
