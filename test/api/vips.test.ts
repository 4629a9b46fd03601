// GET /v1/vips and `shoal vip ls`'s table (docs/network.md, "Virtual IP"): a one-node cluster
// whose leader loops manage a VIP (it is the only node, so it holds it), the lease left once it
// renews its VIP lease, and the table the CLI prints.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vipTable } from '../../src/cli/vip.ts';
import { singleNode, type SingleNode } from './single-node.ts';
import { VipLeaseKeeper } from '../../net/vip-lease.ts';
import { encodeCommand, type CommandResult } from '../../fsm/index.ts';

describe('GET /v1/vips', () => {
  let s: SingleNode;
  beforeAll(async () => {
    s = await singleNode({ control: true, vips: [{ address: '192.168.7.250', subnet: '192.168.7.0/24' }] });
  });
  afterAll(async () => { await s?.close(); });

  async function list(): Promise<{ items: Array<Record<string, unknown> & { holder: { id: string } | null; leaseLeftMs: number | null }>; rev: number }> {
    const r = await s.app.inject({ method: 'GET', url: '/v1/vips' });
    expect(r.statusCode).toBe(200);
    return r.json();
  }

  async function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
    for (let i = 0; i < 200; i++) {
      const v = await probe();
      if (v !== undefined) return v;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('timed out');
  }

  it('names the holder the leader recorded, with no lease left known before a renewal', async () => {
    const item = await until(async () => (await list()).items.find((i) => i.holder !== null));
    expect(item).toMatchObject({ address: '192.168.7.250', interface: null, subnet: '192.168.7.0/24', holder: { id: 'solo', epoch: 0 }, previous: null, released: false, retired: false, leaseLeftMs: null });
  });

  it('gives the lease left once the holder renews its VIP lease', async () => {
    const keeper = new VipLeaseKeeper({
      store: s.store, nodeId: 'solo', leaseMs: 3_000, bootNow: () => performance.now(), log: { info: () => {}, warn: () => {} },
      propose: async (cmd) => (await s.node.propose(encodeCommand({ cmd, ts: Date.now() }))).result as CommandResult,
    });
    keeper.want(0);
    try {
      const item = await until(async () => (await list()).items.find((i) => i.leaseLeftMs !== null));
      expect(item.leaseLeftMs).toBeGreaterThan(0);
      expect(item.leaseLeftMs).toBeLessThanOrEqual(3_000);
    } finally {
      keeper.close();
    }
  });

  it('refuses an unknown query parameter', async () => {
    const r = await s.app.inject({ method: 'GET', url: '/v1/vips?bogus=1' });
    expect(r.statusCode).toBe(400);
  });
});

describe('shoal vip ls', () => {
  it('prints address, where, holder, since and lease left, sorted by address', () => {
    const now = Date.parse('2026-01-01T00:01:00Z');
    const base = { interface: null, subnet: '10.0.0.0/24', previous: null, retired: false, rev: 3, since: Date.parse('2026-01-01T00:00:00Z') };
    const text = vipTable([
      { ...base, address: '10.0.0.20', holder: null, released: false, leaseLeftMs: null },
      { ...base, address: '10.0.0.3', interface: 'eth0', holder: { id: 'abc', name: 'n2', epoch: 1 }, released: true, leaseLeftMs: 5_432 },
    ], now);
    expect(text.split('\n')).toEqual([
      'ADDRESS    ON           HOLDER         SINCE                               LEASE LEFT',
      '10.0.0.3   eth0         n2 (released)  2026-01-01T00:00:00.000Z (60s ago)  5.4s',
      '10.0.0.20  10.0.0.0/24  -              2026-01-01T00:00:00.000Z (60s ago)  -',
    ]);
  });
});
