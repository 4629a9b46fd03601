// When this node's store applied each lease renewal (src/control/renewal-log.ts): noted at apply,
// per node and epoch with the longest lease claimed; a restored snapshot's renewals count as
// applied at the restore.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { RenewalLog, vipRenewals } from '../../src/control/renewal-log.ts';
import { vipLeasesCollection, vipsCollection } from '../../src/resources/vips.ts';
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

  it('for the VIP lease, notes its renewals and each grant of a VIP to a holder, and nothing of the exclusive lease', () => {
    let now = 1_000;
    const store = new DocumentStore();
    const vip = new RenewalLog(store, () => now, vipRenewals);
    const exclusive = new RenewalLog(store, () => now);
    let index = 0;
    const put = (collection: string, id: string, doc: Record<string, unknown>): void => {
      store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as never }, ts: now }), logTimeMs: now, featureLevel: controlFeatureLevel });
    };
    now = 2_000;
    put(vipLeasesCollection, 'n2', { nodeId: 'n2', epoch: 0, seq: 0, leaseMs: 3_000 });
    now = 2_500;
    put(leasesCollection, 'n3', { nodeId: 'n3', epoch: 0, seq: 0, leaseMs: 8_000 });
    expect(vip.last('n2', 0)).toEqual({ atMs: 2_000, leaseMs: 3_000 });
    expect(vip.last('n3', 0)).toBeUndefined();
    expect(exclusive.last('n2', 0)).toBeUndefined();
    now = 4_000;
    put(vipsCollection, '192.168.1.250', { spec: { address: '192.168.1.250', interface: 'eth0' }, holder: { nodeId: 'n3', epoch: 0 }, since: 1, previous: null, retired: false });
    put(vipsCollection, '192.168.1.251', { spec: { address: '192.168.1.251', interface: 'eth0' }, holder: null, since: 1, previous: null, retired: false });
    expect(vip.last('n3', 0)).toEqual({ atMs: 4_000, leaseMs: 0 });
    vip.close();
    exclusive.close();
  });
});
