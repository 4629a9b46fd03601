// When this node's store applied each lease renewal (src/control/renewal-log.ts): noted at apply,
// per node and epoch with the longest lease claimed; a restored snapshot's renewals count as
// applied at the restore.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { RenewalLog } from '../../src/control/renewal-log.ts';
import { controlFeatureLevel, leasesCollection } from '../../src/resources/collections.ts';

describe('the renewal log', () => {
  it('notes when each renewal applied, and a restore as the new start of its watch', () => {
    let now = 1_000;
    const store = new DocumentStore();
    const log = new RenewalLog(store, () => now);
    let index = 0;
    const renew = (nodeId: string, epoch: number, leaseMs: number): void => {
      store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: leasesCollection, id: nodeId, doc: { nodeId, epoch, seq: index, leaseMs } }, ts: now }), logTimeMs: now, featureLevel: controlFeatureLevel });
    };
    expect(log.sinceMs).toBe(1_000);
    now = 2_000;
    renew('n2', 0, 8_000);
    now = 3_000;
    renew('n2', 0, 6_000);
    renew('n3', 1, 8_000);
    expect(log.last('n2', 0)).toEqual({ atMs: 3_000, leaseMs: 8_000 });
    expect(log.last('n2', 1)).toBeUndefined();
    expect(log.last('n3', 1)).toEqual({ atMs: 3_000, leaseMs: 8_000 });
    const snap = store.snapshot();
    now = 9_000;
    store.restore(snap);
    expect(log.sinceMs).toBe(9_000);
    expect(log.last('n2', 0)).toBeUndefined();
    log.close();
    now = 10_000;
    renew('n2', 0, 8_000);
    expect(log.last('n2', 0)).toBeUndefined();
  });
});
