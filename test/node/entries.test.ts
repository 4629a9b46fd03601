// The driver's one total decoding of log entries: malformed entries are deterministic no-ops,
// entries of a newer release stop the node (upgrade_required), and the cluster feature level
// gates what may be proposed.

import { Packr } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryTransport } from '../../transport/memory-transport.ts';
import { MemoryNodeStorage } from '../../src/node/node-storage.ts';
import { confChangeContext } from '../../src/resources/membership.ts';
import { decodeEntry, encodeCommandEnvelope } from '../../src/node/envelope.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import type { Message } from '../../src/raft/types.ts';
import { KvStateMachine } from './kv-state-machine.ts';
import { MemoryCluster, type TestNode } from './memory-cluster.ts';
import { waitFor } from '../transport/helpers.ts';

const packr = new Packr({ useRecords: false });
const put = (key: string, value: string): Uint8Array => KvStateMachine.encode({ op: 'put', key, value });

let cluster: MemoryCluster | undefined;
afterEach(async () => {
  await cluster?.stopAll();
  cluster = undefined;
});

/** A cluster whose transports the test can inject messages into, as a member would send them. */
async function startCluster(opts: ConstructorParameters<typeof MemoryCluster>[0] = {}): Promise<{ c: MemoryCluster; transports: Map<string, MemoryTransport> }> {
  const transports = new Map<string, MemoryTransport>();
  const c = new MemoryCluster({ ...opts, instrument: (id, _s, t) => transports.set(id, t) });
  cluster = c;
  await c.start();
  return { c, transports };
}

/** A `prop` from `from` to `leader` carrying raw entry bytes, as a buggy or hostile member could send. */
function rawProposal(from: string, to: string, data: Uint8Array[]): Message {
  return {
    type: 'prop', from, to, term: 0, logTerm: 0, index: 0, commit: 0, reject: false, rejectHint: 0,
    entries: data.map((d) => ({ kind: 'normal' as const, term: 0, index: 0, data: d })),
  };
}

function inject(transports: Map<string, MemoryTransport>, m: Message): void {
  const t = transports.get(m.to);
  if (t === undefined) throw new Error(`no transport ${m.to}`);
  t.receive(m, m.from);
}

describe('decodeEntry', () => {
  it('is total: arbitrary bytes decode to invalid, never throw', () => {
    const samples = [new Uint8Array(0), Uint8Array.of(0xc1), Uint8Array.of(0x92, 1), packr.pack('x'), packr.pack([1, 2]), packr.pack({ p: 1, s: 1, d: 1 }),
      packr.pack({ p: 'a', s: -1, d: Uint8Array.of(1) }), packr.pack({ p: 'a', s: 1 }), packr.pack({ p: 'a', s: 1, k: 7 }), packr.pack({ p: 'a', s: 1, d: Uint8Array.of(1), t: 'x' })];
    for (let i = 0; i < 2000; i++) samples.push(Uint8Array.from({ length: i % 40 }, (_, j) => (i * 7919 + j * 104729) & 0xff));
    for (const s of samples) {
      const d = decodeEntry(s);
      expect(['invalid', 'command', 'newer', 'featureLevel']).toContain(d.kind);
    }
    expect(decodeEntry(packr.pack({ p: 'a', s: 1, d: 1 }))).toMatchObject({ kind: 'invalid' });
  });

  it('reads what the first release wrote ({p, s, d}) as a command with no log time', () => {
    const d = decodeEntry(packr.pack({ p: 'n1/abc', s: 3, d: Uint8Array.of(1, 2) }));
    expect(d).toMatchObject({ kind: 'command', proposer: 'n1/abc', seq: 3 });
    expect(d.kind === 'command' && [...d.data]).toEqual([1, 2]);
    expect(d).not.toHaveProperty('logTimeMs');
  });

  it('calls an entry of a higher feature level, or of an unknown kind, newer rather than invalid', () => {
    expect(decodeEntry(packr.pack({ p: 'a', s: 1, d: Uint8Array.of(1), f: featureLevelMax + 1 }))).toMatchObject({ kind: 'newer', level: featureLevelMax + 1 });
    expect(decodeEntry(packr.pack({ p: 'a', s: 1, k: 'service', f: 1 }))).toMatchObject({ kind: 'newer' });
    expect(decodeEntry(encodeCommandEnvelope('a', 1, Uint8Array.of(5), { featureLevel: 1, logTimeMs: 10 }))).toMatchObject({ kind: 'command', logTimeMs: 10 });
  });
});

describe('a malformed entry', () => {
  it('is applied as a no-op on every node, which keep committing; nothing stops', async () => {
    const { c, transports } = await startCluster();
    const leader = await c.waitForLeader();
    const follower = c.follower(leader);
    await leader.node.propose(put('before', '1'));
    const garbage = [Uint8Array.of(0xc1), packr.pack([1, 2, 3]), packr.pack({ p: 'x', s: 1, d: 'not bytes' }), Uint8Array.of(1, 2, 3, 4)];
    inject(transports, rawProposal(follower.id, leader.id, garbage));
    await leader.node.propose(put('after', '2'));
    await Promise.all(c.nodes.map((n) => waitFor(`${n.id} applies the garbage`, () => n.node.invalidEntries === garbage.length)));
    for (const n of c.nodes) {
      await n.node.readBarrier();
      expect(n.kv.get('after')?.value).toBe('2');
      expect(n.node.failure).toBeUndefined();
    }
    expect(c.errors).toEqual([]);
    expect(c.warnings.filter((w) => /is not a valid command/.test(w))).toHaveLength(garbage.length * c.nodes.length);
  });

  it('is applied as a no-op again after a restart replays it, and the node serves', async () => {
    const { c, transports } = await startCluster();
    const leader = await c.waitForLeader();
    inject(transports, rawProposal(c.follower(leader).id, leader.id, [Uint8Array.of(0xc1)]));
    await leader.node.propose(put('k', 'v'));
    const victim = c.follower(leader);
    await waitFor('the no-op on the victim', () => victim.node.invalidEntries === 1);
    await victim.node.stop();
    const again = await c.startNode(victim.id, victim.storage);
    await waitFor('the replayed no-op', () => again.node.invalidEntries === 1);
    await again.node.readBarrier();
    expect(again.kv.get('k')?.value).toBe('v');
    expect(again.node.failure).toBeUndefined();
  });
});

describe('a command stamped with another term than its entry (level 3)', () => {
  it('is applied as a no-op on every node, so that a late forward of a proposal made again applies once', async () => {
    const { c, transports } = await startCluster();
    const leader = await c.waitForLeader();
    await waitFor('level 3', () => leader.node.featureLevel >= 3);
    const term = leader.node.status().term;
    const late = encodeCommandEnvelope('n9/late', 1, put('late', 'x'), { featureLevel: 3, proposerTerm: term - 1 });
    const fresh = encodeCommandEnvelope('n9/late', 2, put('fresh', 'y'), { featureLevel: 3, proposerTerm: term });
    inject(transports, rawProposal(c.follower(leader).id, leader.id, [late, fresh]));
    await leader.node.propose(put('after', '1'));
    for (const n of c.nodes) {
      await n.node.readBarrier();
      expect(n.kv.get('late')).toBeUndefined();
      expect(n.kv.get('fresh')?.value).toBe('y');
      expect(n.node.staleProposals).toBe(1);
      expect(n.node.failure).toBeUndefined();
    }
  });
});

describe('an entry from a newer release', () => {
  it('stops the nodes that apply it with upgrade_required, below its index, and again after a restart', async () => {
    const { c, transports } = await startCluster();
    const leader = await c.waitForLeader();
    await leader.node.propose(put('k', 'v'));
    const failed: string[] = [];
    for (const n of c.nodes) n.node.on('failed', (e) => failed.push(`${n.id}:${e.code}`));
    const newer = packr.pack({ p: 'future/1', s: 1, d: Uint8Array.of(1), f: featureLevelMax + 1 });
    const proposer = c.follower(leader);
    inject(transports, rawProposal(proposer.id, leader.id, [newer]));
    // The leader and a follower that learns of the commit apply it and stop. The other may never
    // learn that it committed: nobody is left to tell it.
    await waitFor('the leader and a follower to stop', () => failed.length >= 2);
    expect(failed).toContain(`${leader.id}:upgrade_required`);
    const stopped = c.nodes.filter((n) => n !== leader && n.node.failure?.code === 'upgrade_required');
    expect(stopped.length).toBeGreaterThanOrEqual(1);
    const victim = leader;
    const stoppedAt = victim.node.appliedIndex;
    expect(victim.node.failure).toMatchObject({ code: 'upgrade_required', details: { index: stoppedAt + 1 } });
    expect(() => victim.node.propose(put('x', 'y'))).toThrow(expect.objectContaining({ code: 'upgrade_required' }));

    // Restarted on the same storage, the nodes elect a leader, learn again that the entry
    // committed and stop at it; no node ever applies anything after it.
    for (const n of c.nodes) await n.node.stop();
    const again: TestNode[] = [];
    for (const n of [...c.nodes]) again.push(await c.startNode(n.id, n.storage, new KvStateMachine()));
    await waitFor('a restarted node to stop at the same entry', () => again.some((n) => n.node.failure?.code === 'upgrade_required'));
    for (const n of again) {
      expect(n.node.appliedIndex).toBeLessThanOrEqual(stoppedAt);
      if (n.node.failure !== undefined) expect(n.node.appliedIndex).toBe(stoppedAt);
    }
  });

  it('is never written while a member cannot apply it: a first-release member keeps the cluster at level 1', async () => {
    const { c } = await startCluster({ featureLevelMax: (id) => (id === 'node1' ? undefined : featureLevelMax) });
    const leader = await c.waitForLeader();
    for (let i = 0; i < 20; i++) await leader.node.propose(put(`k${i}`, 'v'));
    await new Promise((r) => setTimeout(r, 200));
    const old = c.get('node1');
    await old.node.readBarrier();
    expect(old.kv.get('k19')?.value).toBe('v');
    expect(old.node.failure).toBeUndefined();
    for (const n of c.nodes) expect(n.node.featureLevel).toBe(1);
  });
});

describe('the cluster feature level', () => {
  it('starts at 1 and is raised by the leader once every member announces more', async () => {
    const { c } = await startCluster();
    await c.waitForLeader();
    await Promise.all(c.nodes.map((n) => waitFor(`${n.id} at level ${featureLevelMax}`, () => n.node.featureLevel === featureLevelMax)));
    expect(c.infos.some((m) => new RegExp(`cluster feature level 1 -> ${featureLevelMax}`).test(m))).toBe(true);
  });

  it('stays at 1 while a member runs the first release, and refuses commands that need more', async () => {
    const { c } = await startCluster({ featureLevelMax: (id) => (id === 'node3' ? undefined : featureLevelMax) });
    const leader = await c.waitForLeader();
    await leader.node.propose(put('k', 'v'));
    await new Promise((r) => setTimeout(r, 200));
    for (const n of c.nodes) expect(n.node.featureLevel).toBe(1);
    expect(() => leader.node.propose(put('x', 'y'), { featureLevel: 2 })).toThrow(expect.objectContaining({ code: 'feature_not_enabled', details: { needed: 2, committed: 1 } }));
  });

  it('survives a restart and reaches a new member through a snapshot', async () => {
    const { c } = await startCluster({ snapshotEntries: 100, logKeepEntries: 10 });
    const leader = await c.waitForLeader();
    await Promise.all(c.nodes.map((n) => waitFor('the highest level', () => n.node.featureLevel === featureLevelMax)));
    for (let i = 0; i < 250; i++) await leader.node.propose(put(`k${i}`, 'v'));
    const joiner = await c.startNode('node4', new MemoryNodeStorage(), new KvStateMachine(), c.members);
    const record = { id: 'node4', name: 'n4', peerAddress: 'memory:node4', apiAddress: 'memory:4' };
    await leader.node.changeMembership({ changes: [{ type: 'addLearner', node: 'node4' }], context: confChangeContext([record]) });
    await waitFor('the new member to catch up from a snapshot', () => joiner.kv.get('k249') !== undefined);
    expect(c.infos.some((m) => /^node4: applied snapshot/.test(m))).toBe(true);
    expect(joiner.node.featureLevel).toBe(featureLevelMax);
    const f = c.follower(leader);
    await f.node.stop();
    const again = await c.startNode(f.id, f.storage, new KvStateMachine());
    expect(again.node.featureLevel).toBe(featureLevelMax);
  });

});
