// The node's VIP agent (net/vip-agent.ts) against a real document store and a recording `ip`:
// it puts the VIP on only while the record names this node at its epoch and the lease holds, with
// a kernel lifetime under the lease; announces it; takes off any VIP it must not have; and on a
// drain or a planned stop takes it off first and then commits a release of that revision.

import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { DocumentStore, encodeCommand, type CommandResult, type JsonObject, type TxnCommand } from '../../fsm/index.ts';
import { nodesCollection } from '../../src/resources/collections.ts';
import { vipCommandMs, vipLeasesCollection, vipReleasesCollection, vipsCollection, type VipRecord } from '../../src/resources/vips.ts';
import type { CommandOutput } from '../../net/firewall-command.ts';
import { parseHostAddresses, VipAgent, vipInterface } from '../../net/vip-agent.ts';
import { VipLeaseKeeper } from '../../net/vip-lease.ts';
import { node } from '../control/fixtures.ts';

const quietLog = { info: (): void => {}, warn: (): void => {} };

function put(store: DocumentStore, collection: string, id: string, doc: object): number {
  const index = store.revision + 1;
  store.apply({ index, term: 2, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: index }) });
  return index;
}

/** A host's addresses, changed by the `ip addr` calls the agent makes; its IPv6 sysctls; every call recorded. */
class FakeHost {
  readonly calls: string[] = [];
  addrs: { ifname: string; local: string; prefixlen: number; lft?: number }[] = [{ ifname: 'eth0', local: '192.168.1.10', prefixlen: 24 }, { ifname: 'eth0', local: 'fd00:38::a', prefixlen: 64 }];
  sysctls = new Map<string, string>([['net/ipv6/conf/eth0/disable_ipv6', '0'], ['net/ipv6/conf/eth0/accept_dad', '1'], ['net/ipv6/conf/eth0/dad_transmits', '0']]);
  sysctlWritable = true;
  run = async (cmd: string, args: readonly string[]): Promise<CommandOutput> => {
    this.calls.push([cmd, ...args].join(' '));
    if (cmd === 'sysctl' && args[0] === '-n') return { stdout: `${this.sysctls.get(args[1] ?? '') ?? ''}\n`, stderr: '', code: 0 };
    if (cmd === 'sysctl') {
      if (!this.sysctlWritable) return { stdout: '', stderr: 'permission denied', code: 255 };
      const [k = '', v = ''] = (args.at(-1) ?? '').split('=');
      this.sysctls.set(k, v);
      return { stdout: '', stderr: '', code: 0 };
    }
    if (cmd === 'ip' && args[0] === '-j') {
      const byIf = new Map<string, { local: string; prefixlen: number }[]>();
      for (const a of this.addrs) byIf.set(a.ifname, [...(byIf.get(a.ifname) ?? []), a]);
      return { stdout: JSON.stringify([...byIf].map(([ifname, as]) => ({ ifname, addr_info: as.map((a) => ({ family: a.local.includes(':') ? 'inet6' : 'inet', ...a })) }))), stderr: '', code: 0 };
    }
    if (cmd === 'ip' && args[1] === 'replace') {
      const [local = '', prefix = ''] = (args[2] ?? '').split('/');
      this.addrs = this.addrs.filter((a) => a.local !== local);
      this.addrs.push({ ifname: args[4] ?? '', local, prefixlen: Number(prefix), lft: Number(args[6]) });
    } else if (cmd === 'ip' && args[1] === 'del') {
      const local = (args[2] ?? '').split('/')[0];
      this.addrs = this.addrs.filter((a) => a.local !== local);
    }
    return { stdout: '', stderr: '', code: cmd === 'arping' ? 1 : 0 };
  };
  has(local: string): boolean {
    return this.addrs.some((a) => a.local === local);
  }
}

function setup(o: { leaseUntil?: number | null; log?: { info(m: string): void; warn(m: string): void } } = {}) {
  const store = new DocumentStore();
  put(store, nodesCollection, 'n1', node('n1', { epoch: 3 }));
  const host = new FakeHost();
  let now = 100_000;
  const lease = {
    wanted: false, wantedEpoch: null as number | null, until: o.leaseUntil === undefined ? now + 8_000 : o.leaseUntil,
    want(e: number | null) { this.wanted = e !== null; this.wantedEpoch = e; },
    heldUntil(e: number) { return e === 3 && this.until !== null && this.until > now ? this.until : null; },
  };
  const proposed: TxnCommand[] = [];
  const agent = new VipAgent({
    store, nodeId: 'n1', lease, bootNow: () => now, run: (cmd, args) => host.run(cmd, args), log: o.log ?? quietLog, garp: { count: 3, repeatAfterMs: 60_000 },
    propose: async (cmd) => {
      proposed.push(cmd);
      const index = store.revision + 1;
      return store.apply({ index, term: 2, featureLevel: 6, data: encodeCommand({ cmd, ts: index }) }) as CommandResult;
    },
  });
  return { store, host, lease, agent, proposed, advance: (ms: number) => { now += ms; }, onReplace: (f: () => void) => { const run = host.run; host.run = async (cmd, args) => { if (args[1] === 'replace') f(); return run(cmd, args); }; } };
}

const record = (holder: VipRecord['holder'], extra: Partial<VipRecord> = {}): VipRecord => ({
  spec: { address: '192.168.1.250', subnet: '192.168.1.0/24' }, holder, since: 1, previous: null, retired: false, ...extra,
});

describe('the VIP agent', () => {
  it('parses ip -j addr and finds the interface by subnet, never a /32', () => {
    const addrs = parseHostAddresses(JSON.stringify([{ ifname: 'lo', addr_info: [{ family: 'inet', local: '127.0.0.1', prefixlen: 8 }] }, { ifname: 'vip0', addr_info: [{ family: 'inet', local: '192.168.1.7', prefixlen: 32 }] }, { ifname: 'eth1', addr_info: [{ family: 'inet6', local: 'fe80::1', prefixlen: 64 }, { family: 'inet', local: '192.168.1.9', prefixlen: 24 }] }]));
    expect(vipInterface({ address: '192.168.1.250', subnet: '192.168.1.0/24' }, addrs)).toBe('eth1');
    expect(vipInterface({ address: '192.168.1.250', subnet: '10.0.0.0/8' }, addrs)).toBeNull();
    expect(vipInterface({ address: '192.168.1.250', interface: 'br0' }, addrs)).toBe('br0');
  });

  it('does nothing, and runs no command, while there is no VIP', async () => {
    const s = setup();
    await s.agent.converge();
    expect(s.host.calls).toEqual([]);
    expect(s.lease.wanted).toBe(false);
  });

  it('holds the VIP it is given with a lifetime under the lease, renews it, announces it once, and wants the lease', async () => {
    const s = setup();
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    await s.agent.converge();
    expect(s.lease.wantedEpoch).toBe(3);
    expect(s.host.calls).toContain('ip addr replace 192.168.1.250/32 dev eth0 valid_lft 8 preferred_lft 8');
    expect(s.host.calls).toContain('arping -q -U -P -c 3 -i eth0 -S 192.168.1.250 192.168.1.250');
    expect(s.agent.heldAddresses()).toEqual(['192.168.1.250']);
    s.advance(3_000);
    s.lease.until = (s.lease.until ?? 0) + 2_500;
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('ip addr replace')).at(-1)).toBe('ip addr replace 192.168.1.250/32 dev eth0 valid_lft 7 preferred_lft 7');
    expect(s.host.calls.filter((c) => c.startsWith('arping'))).toHaveLength(1);
    await s.agent.close();
  });

  it('holds an IPv6 VIP as /128 with the lifetime, after setting the sysctls its announcement needs on that interface once, with no arping, and takes it off when it moves', async () => {
    const warns: string[] = [];
    const s = setup({ log: { info: () => {}, warn: (m) => warns.push(m) } });
    const v6 = (holder: VipRecord['holder']): VipRecord => ({ ...record(holder), spec: { address: 'fd00:38::100', subnet: 'fd00:38::/64' } });
    put(s.store, vipsCollection, 'fd00:38::100', v6({ nodeId: 'n1', epoch: 3 }));
    await s.agent.converge();
    expect(s.host.calls.filter((c) => !c.startsWith('ip -j'))).toEqual([
      'sysctl -n net/ipv6/conf/eth0/disable_ipv6',
      'sysctl -q -w net/ipv6/conf/eth0/ndisc_notify=1', 'sysctl -q -w net/ipv6/conf/eth0/router_solicitation_delay=0',
      'sysctl -n net/ipv6/conf/eth0/accept_dad', // 1 already: left as it is
      'sysctl -n net/ipv6/conf/eth0/dad_transmits', 'sysctl -q -w net/ipv6/conf/eth0/dad_transmits=1', // 0: no DAD, no advertisement
      'ip addr replace fd00:38::100/128 dev eth0 valid_lft 8 preferred_lft 8',
    ]);
    expect(s.agent.heldAddresses()).toEqual(['fd00:38::100']);
    s.advance(1_000);
    s.lease.until = (s.lease.until ?? 0) + 1_000;
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('sysctl'))).toHaveLength(6);
    expect(s.host.calls.at(-1)).toBe('ip addr replace fd00:38::100/128 dev eth0 valid_lft 8 preferred_lft 8');
    expect(warns).toEqual([]);
    // Gone before its lifetime ran out (another host answered DAD): said, and added again.
    s.host.addrs = s.host.addrs.filter((a) => a.local !== 'fd00:38::100');
    s.advance(1_000);
    await s.agent.converge();
    expect(warns).toEqual([expect.stringMatching(/fd00:38::100 went off this node \d+ ms before its lifetime ran out: another host answered its duplicate address detection/)]);
    expect(s.host.has('fd00:38::100')).toBe(true);
    put(s.store, vipsCollection, 'fd00:38::100', v6({ nodeId: 'n2', epoch: 0 }));
    await s.agent.converge();
    expect(s.host.calls.at(-1)).toBe('ip addr del fd00:38::100/128 dev eth0');
    expect(s.agent.heldAddresses()).toEqual([]);
    expect(s.host.calls.filter((c) => c.startsWith('arping'))).toEqual([]);
    await s.agent.close();
  });

  it('leaves an IPv6 VIP off, and says why, while it cannot set the interface\'s sysctls', async () => {
    const warns: string[] = [];
    const s = setup({ log: { info: () => {}, warn: (m) => warns.push(m) } });
    s.host.sysctlWritable = false;
    put(s.store, vipsCollection, 'fd00:38::100', { ...record({ nodeId: 'n1', epoch: 3 }), spec: { address: 'fd00:38::100', interface: 'eth0' } });
    await s.agent.converge();
    expect(s.host.has('fd00:38::100')).toBe(false);
    expect(warns).toEqual([expect.stringMatching(/cannot set net\/ipv6\/conf\/eth0\/ndisc_notify=1 .*IPv6 VIPs stay off eth0/)]);
    s.host.sysctlWritable = true;
    await s.agent.converge();
    expect(s.host.has('fd00:38::100')).toBe(true);
    await s.agent.close();
  });

  it('leaves an IPv6 VIP off an interface whose IPv6 is disabled, and still holds its IPv4 VIP', async () => {
    const warns: string[] = [];
    const s = setup({ log: { info: () => {}, warn: (m) => warns.push(m) } });
    s.host.sysctls.set('net/ipv6/conf/eth0/disable_ipv6', '1');
    put(s.store, vipsCollection, 'fd00:38::100', { ...record({ nodeId: 'n1', epoch: 3 }), spec: { address: 'fd00:38::100', interface: 'eth0' } });
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    await s.agent.converge();
    expect(s.host.has('fd00:38::100')).toBe(false);
    expect(s.host.has('192.168.1.250')).toBe(true);
    expect(warns).toEqual([expect.stringMatching(/IPv6 is off on eth0 \(net\/ipv6\/conf\/eth0\/disable_ipv6: 1\)/)]);
    expect(s.host.calls.filter((c) => c.startsWith('sysctl -q'))).toEqual([]);
    await s.agent.close();
  });

  it('does not put it on without a lease, leaves it as it is with under a second left, and takes it off once the lease has run out', async () => {
    const s = setup({ leaseUntil: null });
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.lease.wanted).toBe(true);
    s.lease.until = 100_000 + 3_000;
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('ip addr replace'))).toEqual(['ip addr replace 192.168.1.250/32 dev eth0 valid_lft 3 preferred_lft 3']);
    s.advance(2_500); // 0.5 s left: no lifetime to set; the one set before ends on its own
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(true);
    expect(s.host.calls.filter((c) => c.startsWith('ip addr replace'))).toHaveLength(1);
    expect(s.agent.heldAddresses()).toEqual(['192.168.1.250']);
    s.advance(600);
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.agent.heldAddresses()).toEqual([]);
  });

  it('keeps the address on through a slow add whose lifetime still ends within the margin, and sets it again shorter, not off, when it would not', async () => {
    const warns: string[] = [];
    const s = setup({ leaseUntil: 100_000 + 2_950, log: { info: () => {}, warn: (m) => warns.push(m) } });
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    // 2.95 s left: 2 s of lifetime, so the add may take up to 1.25 s (0.95 s of rounding + the 300 ms margin).
    let addMs = 1_200;
    s.onReplace(() => s.advance(addMs));
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('ip addr'))).toEqual(['ip addr replace 192.168.1.250/32 dev eth0 valid_lft 2 preferred_lft 2']);
    expect(s.agent.heldAddresses()).toEqual(['192.168.1.250']);
    expect(warns).toEqual([]);
    // A renewal 2.05 s ahead: 2 s again, and an add of 400 ms ends 350 ms past the lease: set again to what is left (1 s).
    s.lease.until = 101_200 + 2_050;
    addMs = 400;
    s.host.calls.length = 0;
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('ip addr'))).toEqual([
      'ip addr replace 192.168.1.250/32 dev eth0 valid_lft 2 preferred_lft 2', 'ip addr replace 192.168.1.250/32 dev eth0 valid_lft 1 preferred_lft 1',
    ]);
    expect(s.host.has('192.168.1.250')).toBe(true);
    expect(warns).toEqual([expect.stringMatching(/setting 192.168.1.250 took 400 ms: a lifetime of 2 s could outlast the VIP lease .* set again to 1 s/)]);
  });

  it('takes the address off when a slow add leaves under a second of lease for a lifetime', async () => {
    const s = setup({ leaseUntil: 100_000 + 1_500 });
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    s.onReplace(() => s.advance(900));
    await s.agent.converge();
    // Once: the pass does not take off again what the slow add already took off (a second del would fail).
    expect(s.host.calls.filter((c) => c.startsWith('ip addr'))).toEqual(['ip addr replace 192.168.1.250/32 dev eth0 valid_lft 1 preferred_lft 1', 'ip addr del 192.168.1.250/32 dev eth0']);
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.agent.heldAddresses()).toEqual([]);
  });

  it('does not set the lifetime again while the lease has not moved on', async () => {
    const s = setup();
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    await s.agent.converge();
    s.advance(1_000);
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('ip addr replace'))).toHaveLength(1);
    expect(s.agent.heldAddresses()).toEqual(['192.168.1.250']);
    s.host.addrs = s.host.addrs.filter((a) => a.local !== '192.168.1.250'); // gone (removed by hand): added again
    await s.agent.converge();
    expect(s.host.calls.filter((c) => c.startsWith('ip addr replace')).at(-1)).toBe('ip addr replace 192.168.1.250/32 dev eth0 valid_lft 7 preferred_lft 7');
  });

  it('never leaves an address whose lifetime can outlast the lease by more than the margin, however slow its adds (property)', async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.record({ gapMs: fc.integer({ min: 0, max: 1_500 }), renewMs: fc.option(fc.integer({ min: 1_000, max: 3_000 })), addMs: fc.array(fc.integer({ min: 0, max: 2_500 }), { minLength: 1, maxLength: 4 }) }), { minLength: 1, maxLength: 12 }),
      async (steps) => {
        const s = setup({ leaseUntil: 100_000 + 3_000 });
        put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
        let now = 100_000;
        let lease = s.lease.until ?? 0;
        /** When the address ends at the latest: each replace stamped when it returned. */
        let endsBy: number | null = null;
        let adds: number[] = [];
        const run = s.host.run;
        s.host.run = async (cmd, args) => {
          if (args[1] === 'replace') {
            const d = adds.shift() ?? 0;
            s.advance(d);
            now += d;
            endsBy = now + Number(args[6]) * 1_000;
          } else if (args[1] === 'del') endsBy = null;
          return run(cmd, args);
        };
        let on = 0;
        for (const st of steps) {
          s.advance(st.gapMs);
          now += st.gapMs;
          if (st.renewMs !== null) lease = s.lease.until = now + st.renewMs;
          if (endsBy !== null && now >= endsBy) {
            endsBy = null;
            s.host.addrs = s.host.addrs.filter((a) => a.local !== '192.168.1.250');
          }
          adds = [...st.addMs];
          await s.agent.converge();
          if (endsBy !== null) expect(endsBy).toBeLessThanOrEqual(lease + vipCommandMs);
          if (s.host.has('192.168.1.250')) on++;
        }
        // Adds within the margin never take it off (so the property is not met by never holding it).
        if (steps.every((st) => st.renewMs !== null && st.addMs.every((d) => d <= vipCommandMs))) expect(on).toBe(steps.length);
      },
    ), { numRuns: 300 });
  });

  it('takes off a VIP recorded for another node or another epoch of this one', async () => {
    const s = setup();
    s.host.addrs.push({ ifname: 'eth0', local: '192.168.1.250', prefixlen: 32 });
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n2', epoch: 0 }));
    await s.agent.converge();
    expect(s.host.calls).toContain('ip addr del 192.168.1.250/32 dev eth0');
    s.host.addrs.push({ ifname: 'eth0', local: '192.168.1.250', prefixlen: 32 });
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 2 }));
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.lease.wanted).toBe(false);
  });

  it('on a drain takes it off, then commits a release of that revision (compared on its epoch and the revision), and does not take it again', async () => {
    const s = setup();
    const rev = put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(true);
    put(s.store, nodesCollection, 'n1', node('n1', { epoch: 3, availability: 'drain' }));
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.proposed).toHaveLength(1);
    expect(s.proposed[0]?.compare).toEqual([
      { collection: nodesCollection, id: 'n1', target: 'value', path: 'epoch', cmp: '=', value: 3 },
      { collection: vipsCollection, id: '192.168.1.250', target: 'rev', cmp: '=', value: rev },
    ]);
    expect(s.store.get(vipReleasesCollection, '192.168.1.250')?.doc).toEqual({ address: '192.168.1.250', nodeId: 'n1', epoch: 3, recordRev: rev });
    const delAt = s.host.calls.indexOf('ip addr del 192.168.1.250/32 dev eth0');
    expect(delAt).toBeGreaterThan(-1);
    // Active again: the record still names it at the released revision, so it stays off until the leader gives it again.
    put(s.store, nodesCollection, 'n1', node('n1', { epoch: 3 }));
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.proposed).toHaveLength(1);
    put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }, { since: 2 }));
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(true);
    await s.agent.close();
  });

  it('keeps no timer while the store has no VIP record, and a pass every second once one exists', async () => {
    const intervals = vi.spyOn(globalThis, 'setInterval');
    const cleared = vi.spyOn(globalThis, 'clearInterval');
    try {
      const s = setup();
      s.agent.start();
      await s.agent.converge();
      expect(intervals).not.toHaveBeenCalled();
      put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n2', epoch: 1 }));
      await s.agent.converge();
      expect(intervals).toHaveBeenCalledTimes(1);
      expect(intervals.mock.calls[0]?.[1]).toBe(1_000);
      await s.agent.converge();
      expect(intervals).toHaveBeenCalledTimes(1);
      const tick = intervals.mock.results[0]?.value as NodeJS.Timeout;
      const index = s.store.revision + 1;
      s.store.apply({ index, term: 2, data: encodeCommand({ cmd: { op: 'delete', collection: vipsCollection, id: '192.168.1.250' }, ts: index }) });
      await s.agent.converge();
      expect(cleared).toHaveBeenCalledWith(tick);
      await s.agent.close();
    } finally {
      intervals.mockRestore();
      cleared.mockRestore();
    }
  });

  it('on a planned stop hands the VIP over: off, released, and the lease no longer wanted', async () => {
    const s = setup();
    const rev = put(s.store, vipsCollection, '192.168.1.250', record({ nodeId: 'n1', epoch: 3 }));
    s.agent.start();
    await s.agent.converge();
    expect(s.host.has('192.168.1.250')).toBe(true);
    await s.agent.close();
    expect(s.host.has('192.168.1.250')).toBe(false);
    expect(s.store.get(vipReleasesCollection, '192.168.1.250')?.doc).toEqual({ address: '192.168.1.250', nodeId: 'n1', epoch: 3, recordRev: rev });
    expect(s.lease.wanted).toBe(false);
  });
});

describe('the VIP lease keeper', () => {
  it('holds the lease from the send time once a renewal commits (compared on the epoch), and nothing when it is refused', async () => {
    const store = new DocumentStore();
    put(store, nodesCollection, 'n1', node('n1', { epoch: 3 }));
    let now = 50_000;
    const proposed: TxnCommand[] = [];
    let renewed = 0;
    const keeper = new VipLeaseKeeper({
      store, nodeId: 'n1', leaseMs: 3_000, bootNow: () => now, log: quietLog, onRenewed: () => { renewed++; },
      propose: async (cmd) => {
        proposed.push(cmd);
        now += 40; // the commit takes a while: the lease counts from the send
        const index = store.revision + 1;
        return store.apply({ index, term: 2, featureLevel: 6, data: encodeCommand({ cmd, ts: index }) }) as CommandResult;
      },
    });
    expect(keeper.heldUntil(3)).toBeNull();
    keeper.want(3);
    await new Promise((r) => setImmediate(r));
    expect(proposed[0]?.compare).toEqual([{ collection: nodesCollection, id: 'n1', target: 'value', path: 'epoch', cmp: '=', value: 3 }]);
    expect(store.get(vipLeasesCollection, 'n1')?.doc).toEqual({ nodeId: 'n1', epoch: 3, seq: 0, leaseMs: 3_000 });
    expect(keeper.heldUntil(3)).toBe(53_000);
    expect(renewed).toBe(1);
    now = 53_000;
    expect(keeper.heldUntil(3)).toBeNull();
    // The leader raised the epoch: the renewal is refused and holds nothing.
    keeper.want(null);
    keeper.want(4);
    await new Promise((r) => setImmediate(r));
    expect(keeper.heldUntil(4)).toBeNull();
    expect(renewed).toBe(1);
    keeper.close();
  });
});
