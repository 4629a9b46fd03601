// The driver's pipelining of a Ready: proposals batched per loop turn, a leader's appends sent
// while its own write runs, commit-only hard states left for the next write.

import { unpack } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import { KvStateMachine } from './kv-state-machine.ts';
import { MemoryCluster, type TestNode } from './memory-cluster.ts';
import type { PersistBatch } from '../../src/node/node-storage.ts';
import { mayApplyBeforeWrite, maySendBeforeWrite } from '../../src/node/raft-node.ts';
import type { Entry, HardState, Message, Ready } from '../../src/raft/types.ts';

const put = (key: string, value: string): Uint8Array => KvStateMachine.encode({ op: 'put', key, value });

interface SaveCall { id: string; batch: PersistBatch; sync: boolean }

/** Records every save and send; a node's saves can be held until released. */
class Recorder {
  readonly saves: SaveCall[] = [];
  readonly sent: { from: string; m: Message }[] = [];
  private readonly held = new Map<string, { promise: Promise<void>; release: () => void }>();

  hold(id: string): void {
    let release = (): void => {};
    const promise = new Promise<void>((r) => { release = r; });
    this.held.set(id, { promise, release });
  }

  release(id: string): void {
    this.held.get(id)?.release();
    this.held.delete(id);
  }

  instrument = (id: string, storage: TestNode['storage'], transport: { send(m: Message): void }): void => {
    const save = storage.save.bind(storage);
    const recorded = async (batch: PersistBatch, opts?: { sync: boolean }): Promise<void> => {
      this.saves.push({ id, batch, sync: opts?.sync ?? true });
      const h = this.held.get(id);
      if (h) await h.promise;
      return save(batch);
    };
    storage.save = recorded;
    const send = transport.send.bind(transport);
    transport.send = (m) => {
      this.sent.push({ from: id, m });
      send(m);
    };
  };
}

async function until(cond: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

// Each test makes its own cluster; every one is stopped after its test and must have logged no error.
let cluster: MemoryCluster;
afterEach(async () => {
  await cluster.stopAll();
  expect(cluster.errors).toEqual([]);
});

describe('RaftNode Ready pipeline', () => {

  it('steps the proposals of one turn as one proposal: one append per follower, not one per write', async () => {
    const rec = new Recorder();
    cluster = new MemoryCluster({ instrument: rec.instrument });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    await leader.node.propose(put('warm', 'up'));
    const before = rec.sent.length;
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => leader.node.propose(put(`k${i}`, `${i}`))));
    const indexes = results.map((r) => r.index);
    expect(indexes).toEqual(indexes.map((_, i) => (indexes[0] ?? 0) + i));
    const appends = rec.sent.slice(before).filter((s) => s.from === leader.id && s.m.type === 'app' && s.m.entries.length > 0);
    // Two followers, one append each carrying all 50 entries.
    expect(appends.length).toBe(2);
    for (const a of appends) expect(a.m.entries.length).toBe(50);
    for (const n of cluster.nodes) {
      await n.node.readBarrier();
      expect(n.kv.get('k49')?.value).toBe('49');
    }
  });

  it('a leader sends its appends while its own write is still running, and answers only after it', async () => {
    const rec = new Recorder();
    cluster = new MemoryCluster({ instrument: rec.instrument });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const followers = cluster.nodes.filter((n) => n !== leader);
    const { index: warm } = await leader.node.propose(put('warm', 'up'));
    rec.hold(leader.id);
    let answered = false;
    const pending = leader.node.propose(put('a', '1')).then((r) => { answered = true; return r; });
    // The followers store the entry although the leader's write has not completed...
    await until(() => followers.every((f) => f.storage.log.lastIndex() > warm), 'the followers to store the entry');
    await new Promise((r) => setTimeout(r, 50));
    // ...but nothing is applied or answered before the leader's own write is durable.
    expect(answered).toBe(false);
    expect(leader.node.appliedIndex).toBe(warm);
    expect(leader.storage.log.lastIndex()).toBe(warm);
    rec.release(leader.id);
    const { index } = await pending;
    expect(index).toBe(warm + 1);
    expect(leader.storage.log.lastIndex()).toBeGreaterThanOrEqual(index);
  });

  it('a follower acknowledges an append only after its write is durable', async () => {
    const rec = new Recorder();
    cluster = new MemoryCluster({ instrument: rec.instrument });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const [slow, other] = cluster.nodes.filter((n) => n !== leader);
    if (!slow || !other) throw new Error('need two followers');
    const { index: warm } = await leader.node.propose(put('warm', 'up'));
    await until(() => slow.node.appliedIndex >= warm, 'the follower to catch up');
    rec.hold(slow.id);
    const sentBefore = rec.sent.length;
    const { index } = await leader.node.propose(put('a', '1'));
    await new Promise((r) => setTimeout(r, 50));
    const acks = (): Message[] => rec.sent.slice(sentBefore).filter((s) => s.from === slow.id && s.m.type === 'appResp' && !s.m.reject && s.m.index >= index).map((s) => s.m);
    expect(acks()).toEqual([]);
    expect(leader.node.status().progress?.[slow.id]?.match ?? 0).toBeLessThan(index);
    rec.release(slow.id);
    await until(() => acks().length > 0, 'the follower to acknowledge');
  });

  it('writes a hard state whose only change is the commit index with the next write, not alone', async () => {
    const rec = new Recorder();
    cluster = new MemoryCluster({ instrument: rec.instrument });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    for (let i = 0; i < 20; i++) await leader.node.propose(put(`k${i}`, `${i}`));
    for (const n of cluster.nodes) await n.node.readBarrier();
    // Every write is a synced one carrying entries, a snapshot or a new term or vote.
    for (const s of rec.saves) {
      expect(s.sync).toBe(true);
      expect(s.batch.entries.length > 0 || s.batch.snapshot !== undefined || s.batch.hardState !== undefined).toBe(true);
    }
    const leaderSaves = rec.saves.filter((s) => s.id === leader.id && s.batch.entries.length > 0);
    // One write per proposal on the leader (plus its no-op), none for the commits in between.
    expect(rec.saves.filter((s) => s.id === leader.id).length).toBeLessThanOrEqual(leaderSaves.length + 2);
  });

  it('never keeps a snapshot past the durable commit index, so a restart from disk succeeds', async () => {
    const rec = new Recorder();
    cluster = new MemoryCluster({ snapshotEntries: 10, logKeepEntries: 3, instrument: rec.instrument });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    for (let i = 0; i < 45; i++) await leader.node.propose(put(`k${i}`, `${i}`));
    for (const n of cluster.nodes) await n.node.readBarrier();
    const follower = cluster.follower(leader);
    await follower.node.stop();
    const durable = follower.storage.log.initialState().hardState;
    const snapIndex = follower.storage.log.snapshot().meta.index;
    expect(snapIndex).toBeGreaterThan(0);
    expect(durable.commit).toBeGreaterThanOrEqual(snapIndex);
    const restarted = await cluster.startNode(follower.id, follower.storage);
    await leader.node.propose(put('after', 'restart'));
    await restarted.node.readBarrier();
    expect(restarted.kv.get('k44')?.value).toBe('44');
    expect(restarted.kv.get('after')?.value).toBe('restart');
  });
});

/** A state machine whose sliced snapshots wait for the test to let them finish. */
class SlowSnapshotKv extends KvStateMachine {
  static gate: Promise<void> = Promise.resolve();
  static started: number[] = [];

  async snapshotInSlices(pause: () => Promise<void>): Promise<Uint8Array[]> {
    const bytes = this.snapshot(); // the state at the call, as the contract requires
    SlowSnapshotKv.started.push(this.size());
    await pause();
    await SlowSnapshotKv.gate;
    return [bytes.subarray(0, 3), bytes.subarray(3)];
  }
}

describe('RaftNode background snapshots', () => {

  it('keeps replicating and applying while a snapshot is serialized, then records it at the index it was taken', async () => {
    let release = (): void => {};
    SlowSnapshotKv.gate = new Promise<void>((r) => { release = r; });
    SlowSnapshotKv.started = [];
    cluster = new MemoryCluster({ snapshotEntries: 20, logKeepEntries: 5, stateMachine: () => new SlowSnapshotKv() });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const indexes: number[] = [];
    for (let i = 0; i < 25; i++) indexes.push((await leader.node.propose(put(`k${i}`, `${i}`))).index);
    await until(() => SlowSnapshotKv.started.length >= 3, 'every node to start a snapshot');
    const heldAt = leader.node.appliedIndex;
    // The snapshots are held: writes still commit and apply everywhere.
    for (let i = 25; i < 40; i++) indexes.push((await leader.node.propose(put(`k${i}`, `${i}`))).index);
    for (const n of cluster.nodes) {
      await n.node.readBarrier();
      expect(n.kv.get('k39')?.value).toBe('39');
      expect(n.storage.log.snapshot().meta.index).toBeLessThan(20);
    }
    expect(leader.node.appliedIndex).toBeGreaterThan(heldAt);
    release();
    await until(() => cluster.nodes.every((n) => n.storage.log.snapshot().meta.index >= 20), 'the snapshots to be written');
    const follower = cluster.follower(leader);
    // The snapshot holds exactly the writes up to its index, though more were applied meanwhile.
    const snap = follower.storage.log.snapshot();
    const kv = new KvStateMachine();
    kv.restore((unpack(snap.data) as { app: Uint8Array }).app);
    expect(kv.size()).toBe(indexes.filter((i) => i <= snap.meta.index).length);
    await follower.node.stop();
    const restarted = await cluster.startNode(follower.id, follower.storage, new SlowSnapshotKv());
    await cluster.waitForLeader();
    await restarted.node.readBarrier();
    expect(restarted.kv.get('k0')?.value).toBe('0');
    expect(restarted.kv.get('k39')?.value).toBe('39');
  });
});

describe('RaftNode proposals across a leader change', () => {

  it('a follower forwards its proposal to the leader and answers once it applied it itself', async () => {
    cluster = new MemoryCluster();
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const follower = cluster.follower(leader);
    const { index, result } = await follower.node.propose(put('via', 'follower'));
    expect(result).toEqual({ rev: index });
    expect(follower.node.appliedIndex).toBeGreaterThanOrEqual(index);
    expect(follower.kv.get('via')?.value).toBe('follower');
  });

  it('at level 3, proposes again a write that a change of leader lost, and applies it once, with no error', async () => {
    cluster = new MemoryCluster();
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const [cut, other] = cluster.nodes.filter((n) => n !== leader);
    if (!cut || !other) throw new Error('need two followers');
    // The forwarded proposal is lost on the way to the leader.
    cluster.network.oneWay(cut.id, leader.id);
    const pending = cut.node.propose(put('lost', 'maybe'));
    await new Promise((r) => setTimeout(r, 30));
    await leader.node.transferLeadership(other.id);
    const { index } = await pending;
    cluster.network.heal();
    const next = await cluster.waitForLeader();
    await next.node.propose(put('after', 'x'));
    for (const n of cluster.nodes) {
      await n.node.readBarrier();
      expect(n.kv.get('lost')).toEqual({ value: 'maybe', rev: index });
    }
  });

  it('before level 3, fails a pending proposal with leader_changed (outcome unknown) as soon as leadership moves', async () => {
    cluster = new MemoryCluster({ featureLevelMax: () => 2 });
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const [cut, other] = cluster.nodes.filter((n) => n !== leader);
    if (!cut || !other) throw new Error('need two followers');
    cluster.network.oneWay(cut.id, leader.id);
    const started = Date.now();
    const pending = cut.node.propose(put('lost', 'maybe')).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 30));
    await leader.node.transferLeadership(other.id);
    const err = await pending;
    expect(err).toMatchObject({ code: 'leader_changed', retryable: true });
    expect(Date.now() - started).toBeLessThan(2000); // well before the 3 s proposal timeout
    cluster.network.heal();
  });

});

describe('what may overlap a Ready write', () => {
  const entry = (index: number, kind: 'normal' | 'conf' = 'normal'): Entry => (kind === 'normal'
    ? { kind, term: 2, index, data: new Uint8Array(0) }
    : { kind, term: 2, index, change: { changes: [{ type: 'addLearner', node: 'x' }] } });
  const ready = (over: Partial<Ready>): Ready => ({ entries: [], committedEntries: [], messages: [], readStates: [], mustSync: false, ...over });
  const durable: HardState = { term: 2, vote: 'a', commit: 5 };

  it('a leader sends first unless its term or vote changes in the Ready; nobody else does', () => {
    expect(maySendBeforeWrite(ready({ entries: [entry(6)] }), 'leader', durable)).toBe(true);
    expect(maySendBeforeWrite(ready({ hardState: { ...durable, commit: 6 } }), 'leader', durable)).toBe(true);
    expect(maySendBeforeWrite(ready({ hardState: { term: 3, vote: 'a', commit: 5 } }), 'leader', durable)).toBe(false);
    expect(maySendBeforeWrite(ready({ hardState: { term: 2, vote: 'b', commit: 5 } }), 'leader', durable)).toBe(false);
    expect(maySendBeforeWrite(ready({ softState: { leader: 'a', role: 'leader' } }), 'candidate', durable)).toBe(true);
    expect(maySendBeforeWrite(ready({ softState: { leader: '', role: 'follower' } }), 'leader', durable)).toBe(false);
    expect(maySendBeforeWrite(ready({}), 'follower', durable)).toBe(false);
  });

  it('committed entries are applied first only when all were durable before the Ready and none changes membership', () => {
    expect(mayApplyBeforeWrite(ready({ committedEntries: [entry(4), entry(5)], entries: [entry(6)] }))).toBe(true);
    expect(mayApplyBeforeWrite(ready({ committedEntries: [entry(5), entry(6)], entries: [entry(6)] }))).toBe(false);
    expect(mayApplyBeforeWrite(ready({ committedEntries: [entry(5, 'conf')] }))).toBe(false);
    expect(mayApplyBeforeWrite(ready({ committedEntries: [entry(5)], snapshot: { meta: { index: 4, term: 1, confState: { voters: ['a'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } }, data: new Uint8Array(0) } }))).toBe(false);
    expect(mayApplyBeforeWrite(ready({}))).toBe(false);
  });
});
