// Virtual IPs: the config's checks, the leader's choice of a holder (src/control/vip-holders.ts),
// and, in a seeded simulation of nodes that die, freeze and are cut off, the rule that two nodes
// never have a VIP on their interfaces at once (the lease, the kernel lifetime, the leader's wait).

import { describe, expect, it } from 'vitest';
import { decideVipHolders, type VipInput } from '../../src/control/vip-holders.ts';
import { leaseDefaults } from '../../src/resources/lease.ts';
import type { NodeRecord } from '../../src/resources/records.ts';
import type { Versioned } from '../../src/resources/state.ts';
import { kernelLateMs, kernelLateMs6, kernelLifetimeSeconds, releases, vipClearInMs, vipKernelLateMs, vipRecordSchema, vipReleaseSchema, vipCommandMs, vipLeaseDefaults, vipMoveAfterMs, vipRenewIntervalMs, vipsConfigSchema, type VipLeaseConfig, type VipRecord, type VipRelease, type VipSpec } from '../../src/resources/vips.ts';
import { parseConfig } from '../../src/server/config.ts';
import { node } from './fixtures.ts';
import { X509Certificate } from 'node:crypto';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { vipAddresses } from '../../src/resources/vips.ts';
import { createCa, issueNodeCert } from '../../src/security/certificates.ts';

const spec: VipSpec = { address: '192.168.1.250', subnet: '192.168.1.0/24' };

function nodes(...ns: NodeRecord[]): Map<string, Versioned<NodeRecord>> {
  return new Map(ns.map((n, i) => [n.id, { value: n, rev: i + 1 }]));
}

function input(o: Partial<VipInput> = {}): VipInput {
  const ns = o.nodes ?? nodes(node('a'), node('b'), node('c'));
  return {
    specs: [spec], records: new Map(), releases: new Map(), nodes: ns, members: new Set(ns.keys()), self: 'a', now: 1_000,
    clearInMs: () => 2_000, leaseRev: () => 7, ...o,
  };
}

function rec(holder: { nodeId: string; epoch: number } | null, rev = 10, extra: Partial<VipRecord> = {}): Map<string, Versioned<VipRecord>> {
  return new Map([[spec.address, { value: { spec, holder, since: 500, previous: null, retired: false, ...extra }, rev }]]);
}

function holderOf(d: ReturnType<typeof decideVipHolders>): { nodeId: string; epoch: number } | null | undefined {
  const put = d.changes.find((c) => c.kind === 'put' && c.id === spec.address);
  return put?.kind === 'put' ? (put.doc as unknown as VipRecord).holder : undefined;
}

describe('the vips config', () => {
  it('takes a VIP by interface or by subnet', () => {
    expect(vipsConfigSchema.safeParse([{ address: '10.0.0.9', interface: 'eth0' }, spec]).success).toBe(true);
  });

  it('refuses a VIP with both or neither of interface and subnet, one outside its subnet, a duplicate and an IPv6 address, each named', () => {
    const r = vipsConfigSchema.safeParse([
      { address: '10.0.0.9' }, { address: '10.0.0.8', interface: 'eth0', subnet: '10.0.0.0/24' }, { address: '10.1.0.9', subnet: '10.0.0.0/24' },
      { address: '10.0.0.7', interface: 'eth0' }, { address: '10.0.0.7', interface: 'eth0' }, { address: 'fd00:0::1', interface: 'eth0' }, { address: '10.0.0.6', interface: 'no such name with spaces' },
    ]);
    expect(r.success).toBe(false);
    const msgs = r.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];
    expect(msgs).toEqual(expect.arrayContaining([
      expect.stringMatching(/^0\.interface: give exactly one of interface/), expect.stringMatching(/^1\.interface: give exactly one/),
      expect.stringMatching(/^2\.subnet: 10\.1\.0\.9 is not inside 10\.0\.0\.0\/24/), expect.stringMatching(/^4\.address: 10\.0\.0\.7 is named twice/),
      expect.stringMatching(/^5\.address: write fd00:0::1 as fd00::1/), expect.stringMatching(/^6\.interface: an interface name/),
    ]));
  });

  it('takes an IPv6 VIP (RFC 5952 text) by interface or by an IPv6 subnet, and its record and release', () => {
    const v6: VipSpec = { address: 'fd00:38::100', subnet: 'fd00:38::/64' };
    expect(vipsConfigSchema.safeParse([v6, { address: '2001:db8::1:0:0:1', interface: 'eth0' }, spec]).success).toBe(true);
    expect(vipRecordSchema.safeParse({ spec: v6, holder: { nodeId: 'a', epoch: 1 }, since: 1, previous: null, retired: false }).success).toBe(true);
    expect(vipReleaseSchema.safeParse({ address: 'fd00:38::100', nodeId: 'a', epoch: 1, recordRev: 3 }).success).toBe(true);
    expect(vipReleaseSchema.safeParse({ address: 'FD00:38::100', nodeId: 'a', epoch: 1, recordRev: 3 }).success).toBe(false);
  });

  it('refuses an IPv6 VIP not written as ip prints it, not of a LAN, outside its subnet or of the other family, each named', () => {
    const r = vipsConfigSchema.safeParse([
      { address: 'FD00:38::100', interface: 'eth0' }, { address: 'fd00:38:0:0:0:0:0:100', interface: 'eth0' }, { address: 'fe80::5', interface: 'eth0' },
      { address: 'ff02::1', interface: 'eth0' }, { address: '::ffff:10.0.0.1', interface: 'eth0' }, { address: '::1', interface: 'eth0' },
      { address: 'fd00:39::1', subnet: 'fd00:38::/64' }, { address: 'fd00:38::1', subnet: '192.168.1.0/24' }, { address: '192.168.1.9', subnet: 'fd00:38::/64' },
      { address: 'fd00:38::2', subnet: 'fd00:38::/129' }, { address: 'fd00::1::2', interface: 'eth0' }, { address: 'fd00:38::10000', interface: 'eth0' },
    ]);
    const msgs = r.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];
    expect(msgs).toEqual(expect.arrayContaining([
      expect.stringMatching(/^0\.address: write FD00:38::100 as fd00:38::100 /), expect.stringMatching(/^1\.address: write fd00:38:0:0:0:0:0:100 as fd00:38::100 /),
      expect.stringMatching(/^2\.address: fe80::5 is link-local/), expect.stringMatching(/^3\.address: ff02::1 is a multicast address/),
      expect.stringMatching(/^4\.address: an IPv4 address \(a\.b\.c\.d\) or an IPv6 address/), expect.stringMatching(/^5\.address: ::1 is not a LAN address/),
      expect.stringMatching(/^6\.subnet: fd00:39::1 is not inside fd00:38::\/64/), expect.stringMatching(/^7\.subnet: fd00:38::1 is not inside 192\.168\.1\.0\/24/),
      expect.stringMatching(/^8\.subnet: 192\.168\.1\.9 is not inside fd00:38::\/64/), expect.stringMatching(/^9\.subnet: an IPv4 subnet \(a\.b\.c\.d\/n\) or an IPv6 one/),
      expect.stringMatching(/^10\.address: an IPv4 address/), expect.stringMatching(/^11\.address: an IPv4 address/),
    ]));
    expect(msgs).toHaveLength(12);
  });

  it('is a node config key whose problems refuse the config (config_invalid) with their path', () => {
    const base = { dataDir: '/tmp/x', api: { listen: '127.0.0.1:7101' }, peer: { listen: '127.0.0.1:7201' } };
    expect(parseConfig({ ...base, vips: [spec] }, 'c.yaml').vips).toEqual([spec]);
    expect(() => parseConfig({ ...base, vips: [{ address: '192.168.1.250', subnet: '10.0.0.0/8' }] }, 'c.yaml')).toThrow(/vips\.0\.subnet: 192\.168\.1\.250 is not inside 10\.0\.0\.0\/8/);
    const v6 = { address: 'fd00:38::100', subnet: 'fd00:38::/64' };
    expect(parseConfig({ ...base, vips: [v6] }, 'c.yaml').vips).toEqual([v6]);
    let err: unknown;
    try { parseConfig({ ...base, vips: [{ address: 'fd00:38::0100', interface: 'eth0' }] }, 'c.yaml'); } catch (e) { err = e; }
    expect(err).toMatchObject({ code: 'config_invalid', message: expect.stringMatching(/vips\.0\.address: write fd00:38::0100 as fd00:38::100/) });
  });

  it('sets a kernel lifetime of the lease left, rounded down to whole seconds (the kernel\'s lateness is in the leader\'s margin)', () => {
    for (const leftMs of [0, 999, 2_999, 3_000, 5_400, 8_000, 60_000]) {
      const s = kernelLifetimeSeconds(leftMs);
      if (s > 0) expect(s * 1000).toBeLessThanOrEqual(leftMs);
      else expect(leftMs).toBeLessThan(1000);
    }
    // The defaults: a 3 s lease, renewed every second; the leader waits it plus 2ρ·lease, the kernel's lateness and the command's time.
    const c = { ...vipLeaseDefaults, driftRho: leaseDefaults.driftRho };
    expect(vipRenewIntervalMs(c)).toBe(1_000);
    expect(vipMoveAfterMs(c)).toBe(3_000 + 60 + kernelLateMs + vipCommandMs);
    expect(vipClearInMs(c, { nowMs: 10_000, watchingSinceMs: 0, renewedAtMs: 9_000, agentLeaseMs: 5_000 })).toBe(9_000 + 5_000 + 100 + kernelLateMs + vipCommandMs - 10_000);
    // A cluster with an IPv6 VIP: the kernel's IPv6 lateness instead (a second more at worst).
    expect(vipMoveAfterMs(c, true)).toBe(3_000 + 60 + kernelLateMs6 + vipCommandMs);
    expect(vipClearInMs(c, { nowMs: 10_000, watchingSinceMs: 0, renewedAtMs: 9_000, agentLeaseMs: 3_000, ipv6: true })).toBe(9_000 + 3_000 + 60 + kernelLateMs6 + vipCommandMs - 10_000);
  });

  it('takes vipLeaseMs from the node config, within its bounds and at least two election timeouts', () => {
    const base = { dataDir: '/tmp/x', api: { listen: '127.0.0.1:7101' }, peer: { listen: '127.0.0.1:7201' } };
    expect(parseConfig(base, 'c.yaml').vipLeaseMs).toBe(3_000);
    expect(parseConfig({ ...base, vipLeaseMs: 5_000 }, 'c.yaml').vipLeaseMs).toBe(5_000);
    expect(() => parseConfig({ ...base, vipLeaseMs: 1_000 }, 'c.yaml')).toThrow(/vipLeaseMs/);
    expect(() => parseConfig({ ...base, vipLeaseMs: 2_500, raft: { electionTimeoutMs: 1_500 } }, 'c.yaml')).toThrow(/vipLeaseMs: must be at least two election timeouts \(3000\)/);
  });
});

describe('the leader\'s choice of a holder', () => {
  it('gives a new VIP to an eligible node other than itself, comparing its epoch and state', () => {
    const d = decideVipHolders(input());
    expect(holderOf(d)).toEqual({ nodeId: 'b', epoch: 0 });
    expect(d.compares).toEqual(expect.arrayContaining([expect.objectContaining({ collection: 'shoal.nodes', id: 'b', path: 'epoch', value: 0 })]));
    expect(d.moves).toEqual([{ address: spec.address, from: null, to: 'b', reason: 'assigned' }]);
  });

  it('takes it itself when no other node may, and gives it to nobody when none may', () => {
    expect(holderOf(decideVipHolders(input({ nodes: nodes(node('a'), node('b', { state: 'suspect' }), node('c', { availability: 'drain' })) })))).toEqual({ nodeId: 'a', epoch: 0 });
    expect(holderOf(decideVipHolders(input({ specs: [{ ...spec, nodes: ['zz'] }] })))).toBeNull();
  });

  it('follows vip.nodes (names or ids) and labels', () => {
    const ns = nodes(node('a'), node('b', { name: 'pi-kitchen' }), node('c', { labels: { lan: 'yes' } }));
    expect(holderOf(decideVipHolders(input({ nodes: ns, specs: [{ ...spec, nodes: ['pi-kitchen', 'a'] }] })))).toEqual({ nodeId: 'b', epoch: 0 });
    expect(holderOf(decideVipHolders(input({ nodes: ns, specs: [{ ...spec, labels: { lan: 'yes' } }] })))).toEqual({ nodeId: 'c', epoch: 0 });
  });

  it('spreads VIPs over the nodes', () => {
    const two = [spec, { address: '192.168.1.251', subnet: '192.168.1.0/24' }];
    const d = decideVipHolders(input({ specs: two }));
    const holders = d.changes.map((c) => (c.kind === 'put' ? (c.doc as unknown as VipRecord).holder?.nodeId : undefined));
    expect(holders).toEqual(['b', 'c']);
  });

  it('leaves a healthy holder alone, even the leader itself, and looks again when its VIP lease would run out', () => {
    expect(decideVipHolders(input({ records: rec({ nodeId: 'a', epoch: 0 }) })).changes).toEqual([]);
    const kept = decideVipHolders(input({ records: rec({ nodeId: 'c', epoch: 0 }), clearInMs: () => 3_500 }));
    expect(kept.changes).toEqual([]);
    expect(kept.wakeInMs).toBe(3_500);
  });

  it('moves it from a holder whose VIP lease has surely run out before node health says it is down, to another node', () => {
    const d = decideVipHolders(input({ records: rec({ nodeId: 'b', epoch: 0 }), clearInMs: (n) => (n === 'b' ? 0 : 2_000) }));
    expect(holderOf(d)).toEqual({ nodeId: 'c', epoch: 0 });
    expect(d.compares).toEqual(expect.arrayContaining([{ collection: 'shoal.vip-leases', id: 'b', target: 'rev', cmp: '=', value: 7 }]));
    expect(d.moves).toEqual([{ address: spec.address, from: 'b', to: 'c', reason: 'lease_expired' }]);
    // When no other node may hold it, it stays with that holder: no rewrite.
    const onlyB = { ...spec, nodes: ['b'] };
    const recB = new Map([[spec.address, { value: { spec: onlyB, holder: { nodeId: 'b', epoch: 0 }, since: 500, previous: null, retired: false }, rev: 10 }]]);
    expect(decideVipHolders(input({ specs: [onlyB], records: recB, clearInMs: () => 0 })).changes).toEqual([]);
  });

  it('waits while a lost holder\'s lease may still hold, then moves it comparing its lease record', () => {
    const ns = nodes(node('a'), node('b', { state: 'down', epoch: 1 }), node('c'));
    const waiting = decideVipHolders(input({ nodes: ns, records: rec({ nodeId: 'b', epoch: 0 }), clearInMs: () => 4_321 }));
    expect(waiting.changes).toEqual([]);
    expect(waiting.wakeInMs).toBe(4_321);
    expect(waiting.waiting[0]).toMatch(/moves once that node's VIP lease has surely run out, in 4321 ms/);
    const moved = decideVipHolders(input({ nodes: ns, records: rec({ nodeId: 'b', epoch: 0 }), clearInMs: () => 0 }));
    expect(holderOf(moved)).toEqual({ nodeId: 'c', epoch: 0 });
    expect(moved.compares).toEqual(expect.arrayContaining([{ collection: 'shoal.vip-leases', id: 'b', target: 'rev', cmp: '=', value: 7 }]));
    expect(moved.moves).toEqual([{ address: spec.address, from: 'b', to: 'c', reason: 'lease_expired' }]);
  });

  it('moves it at once when the holder released this revision, and not for a release of an older one', () => {
    const ns = nodes(node('a'), node('b', { availability: 'drain' }), node('c'));
    const rel = (recordRev: number): Map<string, Versioned<VipRelease>> => new Map([[spec.address, { value: { address: spec.address, nodeId: 'b', epoch: 0, recordRev }, rev: 11 }]]);
    const now = decideVipHolders(input({ nodes: ns, records: rec({ nodeId: 'b', epoch: 0 }), releases: rel(10), clearInMs: () => 9_000 }));
    expect(holderOf(now)).toEqual({ nodeId: 'c', epoch: 0 });
    expect(now.moves[0]?.reason).toBe('released');
    expect(decideVipHolders(input({ nodes: ns, records: rec({ nodeId: 'b', epoch: 0 }), releases: rel(9), clearInMs: () => 9_000 })).changes).toEqual([]);
  });

  it('gives a released VIP back to the node that let go when no other may (a restart of the only eligible node)', () => {
    const ns = nodes(node('a'), node('b'));
    const rel = new Map([[spec.address, { value: { address: spec.address, nodeId: 'b', epoch: 0, recordRev: 10 }, rev: 11 }]]);
    const d = decideVipHolders(input({ nodes: ns, specs: [{ ...spec, nodes: ['b'] }], records: rec({ nodeId: 'b', epoch: 0 }), releases: rel }));
    expect(holderOf(d)).toEqual({ nodeId: 'b', epoch: 0 });
    expect(releases(rel.get(spec.address)?.value, { holder: { nodeId: 'b', epoch: 0 } }, 12)).toBe(false);
  });

  it('retires a VIP the config no longer names: the holder lets go first, then the record goes', () => {
    const first = decideVipHolders(input({ specs: [], records: rec({ nodeId: 'b', epoch: 0 }) }));
    expect(first.changes).toEqual([expect.objectContaining({ kind: 'put', doc: expect.objectContaining({ retired: true }) })]);
    const retired = rec({ nodeId: 'b', epoch: 0 }, 12, { retired: true });
    expect(decideVipHolders(input({ specs: [], records: retired, clearInMs: () => 5_000 })).changes).toEqual([]);
    const rel = new Map([[spec.address, { value: { address: spec.address, nodeId: 'b', epoch: 0, recordRev: 12 }, rev: 13 }]]);
    expect(holderOf(decideVipHolders(input({ specs: [], records: retired, releases: rel })))).toBeNull();
    const gone = decideVipHolders(input({ specs: [], records: rec(null, 14, { retired: true }), releases: rel }));
    expect(gone.changes.map((c) => `${c.kind} ${c.collection}`)).toEqual(['delete shoal.vips', 'delete shoal.vip-releases']);
  });

  it('leaves the records alone when this leader has no vips config', () => {
    expect(decideVipHolders(input({ specs: undefined, records: rec({ nodeId: 'b', epoch: 0 }) })).changes).toEqual([]);
  });
});

// ---- never two holders: a seeded simulation ----

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface SimNode {
  id: string;
  /** dead: nothing runs, the kernel keeps what it has; frozen: the same, for a while; cut: runs, reaches nobody. */
  fate: 'ok' | 'dead' | 'frozen' | 'cut';
  fateUntil: number;
  /** What the node's store shows (a cut-off node's stays as it was). */
  view: { rec: Versioned<VipRecord> | undefined; epoch: number };
  leaseUntil: number;
  nextRenewAt: number;
  /** The kernel's address: dropped at this time (0: none). */
  addressUntil: number;
  nextPassAt: number;
  /** A pass is due now (a renewal committed). */
  kicked: boolean;
}

interface SimOptions {
  /** The VIP lease: the agents' and the leader's. */
  lease: VipLeaseConfig;
  /** The leader's wait after a holder's last renewal or grant; default vipMoveAfterMs (the failing variant waits less). */
  leaderWaitMs?: number;
  /** An IPv6 VIP: the kernel drops it up to kernelLateMs6 late. */
  ipv6?: boolean;
}

/** One run: returns the times at which two nodes had the address (must be none), and how many moves happened. */
function simulate(seed: number, o: SimOptions, stepsMs = 120_000): { overlaps: number[]; moves: number; heldMs: number } {
  const rand = prng(seed);
  const cfg = o.lease;
  const ids = ['a', 'b', 'c'];
  const store = { rec: undefined as Versioned<VipRecord> | undefined, rel: undefined as Versioned<VipRelease> | undefined, rev: 1 };
  const epochs = new Map(ids.map((id) => [id, 0]));
  const states = new Map<string, NodeRecord['state']>(ids.map((id) => [id, 'ready']));
  const heardAt = new Map(ids.map((id) => [id, 0]));
  /** When the leader's store applied each holder's last renewal or grant (renewal-log.ts vipRenewals). */
  const renewedAt = new Map<string, number>();
  const sim: SimNode[] = ids.map((id) => ({ id, fate: 'ok', fateUntil: 0, view: { rec: undefined, epoch: 0 }, leaseUntil: 0, nextRenewAt: 0, addressUntil: 0, nextPassAt: Math.floor(rand() * 20) * 50, kicked: false }));
  const overlaps: number[] = [];
  let moves = 0;
  let heldMs = 0;
  const pending: { at: number; node: SimNode; sentAt: number; epoch: number }[] = [];
  for (let t = 0; t < stepsMs; t += 50) {
    // Faults: now and then one node dies, freezes or is cut off for a while, then comes back.
    for (const n of sim) {
      if (n.fate !== 'ok' && t >= n.fateUntil) n.fate = 'ok';
      if (n.fate === 'ok' && rand() < 0.0008) {
        n.fate = (['dead', 'frozen', 'cut'] as const)[Math.floor(rand() * 3)] ?? 'dead';
        n.fateUntil = t + 2_000 + rand() * 25_000;
        if (n.fate === 'dead') n.leaseUntil = 0; // a restarted shoal believes in no VIP lease until it renews
      }
    }
    const reaches = (n: SimNode): boolean => n.fate === 'ok';
    for (const n of sim) if (reaches(n)) n.view = { rec: store.rec, epoch: epochs.get(n.id) ?? 0 };
    // Renewals commit after a random delay, only if the node still reaches the leader and its epoch holds.
    for (const p of pending.splice(0)) {
      if (p.at > t) {
        pending.push(p);
        continue;
      }
      if (!reaches(p.node) || epochs.get(p.node.id) !== p.epoch) continue;
      renewedAt.set(`${p.node.id}:${p.epoch}`, t);
      heardAt.set(p.node.id, t);
      p.node.leaseUntil = Math.max(p.node.leaseUntil, p.sentAt + cfg.leaseMs);
      p.node.kicked = true; // a committed renewal brings a pass at once (vip-start.ts onRenewed)
    }
    for (const n of sim) {
      if (n.fate === 'ok') heardAt.set(n.id, t);
      const h = n.view.rec?.value.holder;
      const mine = h?.nodeId === n.id && h.epoch === n.view.epoch;
      if ((n.fate === 'ok' || n.fate === 'cut') && mine && t >= n.nextRenewAt) {
        n.nextRenewAt = t + vipRenewIntervalMs(cfg);
        pending.push({ at: t + 20 + rand() * 600, node: n, sentAt: t, epoch: n.view.epoch });
      }
      // The VIP agent's pass, on its own one-second timer and at each committed renewal, while the process runs (net/vip-agent.ts).
      if (t >= n.nextPassAt) n.nextPassAt += 1_000;
      else if (!n.kicked) continue;
      n.kicked = false;
      if (n.fate === 'ok' || n.fate === 'cut') {
        const held = mine && n.leaseUntil > t;
        const lft = held ? kernelLifetimeSeconds(n.leaseUntil - t) : 0;
        // Worst case: the kernel stamps the address the command's whole allowance later, and drops it kernelLateMs after its lifetime.
        if (lft > 0) n.addressUntil = t + vipCommandMs + lft * 1000 + vipKernelLateMs(o.ipv6 ?? false);
        else if (!held) n.addressUntil = 0; // no lease: off at once; under a second left: left to run out
      }
    }
    // Node health: silent 4 s → down, epoch raised; heard again → ready.
    for (const id of ids) {
      const silent = t - (heardAt.get(id) ?? 0);
      if (silent >= 4_000 && states.get(id) !== 'down') {
        states.set(id, 'down');
        epochs.set(id, (epochs.get(id) ?? 0) + 1);
      } else if (silent < 1_500 && states.get(id) === 'down') states.set(id, 'ready');
    }
    // The leader (a fourth node, never cut off) decides every 200 ms.
    if (t % 200 === 0) {
      const ns = new Map(ids.map((id, i) => [id, { value: node(id, { state: states.get(id) ?? 'ready', epoch: epochs.get(id) ?? 0 }), rev: i + 1 }]));
      const waitMs = o.leaderWaitMs ?? vipMoveAfterMs(cfg, o.ipv6 ?? false);
      const d = decideVipHolders({
        specs: [spec], records: store.rec === undefined ? new Map() : new Map([[spec.address, store.rec]]), releases: store.rel === undefined ? new Map() : new Map([[spec.address, store.rel]]),
        nodes: ns, members: new Set(ids), self: 'leader', now: t, leaseRev: () => 0,
        clearInMs: (id, e) => Math.max(0, (renewedAt.get(`${id}:${e}`) ?? 0) + waitMs - t),
      });
      for (const c of d.changes) {
        if (c.kind !== 'put') continue;
        const r = c.doc as unknown as VipRecord;
        store.rec = { value: r, rev: ++store.rev };
        if (r.holder !== null) renewedAt.set(`${r.holder.nodeId}:${r.holder.epoch}`, t); // the grant
      }
      moves += d.moves.filter((m) => m.from !== null).length;
    }
    const holding = sim.filter((n) => n.addressUntil > t);
    if (holding.length > 1) overlaps.push(t);
    if (holding.length === 1) heldMs += 50;
  }
  return { overlaps, moves, heldMs };
}

function simulateSeeds(o: SimOptions, seeds = 40): { overlapping: number[]; moves: number; heldShare: number } {
  const overlapping: number[] = [];
  let moves = 0;
  let heldMs = 0;
  for (let seed = 1; seed <= seeds; seed++) {
    const r = simulate(seed, o);
    if (r.overlaps.length > 0) overlapping.push(seed);
    moves += r.moves;
    heldMs += r.heldMs;
  }
  return { overlapping, moves, heldShare: heldMs / (seeds * 120_000) };
}

describe('never two holders', () => {
  for (const leaseMs of [vipLeaseDefaults.leaseMs, 8_000]) {
    it(`no two nodes have the VIP at once, over seeded runs of deaths, freezes and partitions, and it does move and is held (VIP lease ${leaseMs} ms)`, () => {
      const r = simulateSeeds({ lease: { leaseMs, driftRho: leaseDefaults.driftRho } });
      expect(r.overlapping, `seeds with two holders (replay one with simulate(seed, ...)): ${r.overlapping.join(', ')}`).toEqual([]);
      // The runs are not vacuous: VIPs moved, and someone held the VIP most of the time.
      expect(r.moves).toBeGreaterThan(20);
      expect(r.heldShare).toBeGreaterThan(0.5);
    });
  }

  it('keeps one holder of an IPv6 VIP, whose kernel may drop it up to 1.25 s late, with the IPv6 margin', () => {
    const lease = { leaseMs: vipLeaseDefaults.leaseMs, driftRho: leaseDefaults.driftRho };
    const r = simulateSeeds({ lease, ipv6: true });
    expect(r.overlapping, `seeds with two holders: ${r.overlapping.join(', ')}`).toEqual([]);
    expect(r.moves).toBeGreaterThan(20);
  });

  it('finds two holders when the leader waits only the lease, without the kernel\'s lateness and the command\'s time (the checker can fail)', () => {
    const lease = { leaseMs: vipLeaseDefaults.leaseMs, driftRho: leaseDefaults.driftRho };
    const r = simulateSeeds({ lease, leaderWaitMs: lease.leaseMs });
    expect(r.overlapping.length).toBeGreaterThan(0);
  });
});

describe('node certificates and VIPs', () => {
  it('sign the recorded VIPs as IP SANs, so the API answers on a VIP under the node\'s certificate', async () => {
    const store = new DocumentStore();
    const put = (id: string): void => {
      const index = store.revision + 1;
      store.apply({ index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection: 'shoal.vips', id, doc: { spec: { address: id, interface: 'eth0' }, holder: null, since: 0, previous: null, retired: false } as unknown as JsonObject }, ts: index }) });
    };
    expect(vipAddresses(store)).toEqual([]);
    put('192.168.1.250');
    put('192.168.1.251');
    put('fd00:38::100');
    expect(vipAddresses(store)).toEqual(['192.168.1.250', '192.168.1.251', 'fd00:38::100']);
    const ca = await createCa('c1');
    const cert = await issueNodeCert(ca, 'n1', { hosts: ['127.0.0.1', ...vipAddresses(store)] });
    const x = new X509Certificate(cert.certPem);
    expect(x.checkIP('192.168.1.250')).toBe('192.168.1.250');
    expect(x.checkIP('192.168.1.251')).toBe('192.168.1.251');
    expect(x.checkIP('192.168.1.252')).toBeUndefined();
    expect(x.checkIP('fd00:38::100')).toBeDefined();
  });
});
