// Raft paper §7, "Log compaction": each server snapshots its committed state and discards the
// log up to the snapshot. A follower that lags behind the leader's first log entry is sent the
// snapshot (InstallSnapshot) and then the entries after it. A follower that receives a snapshot
// describing a prefix of what it already has ignores it. A server restarts from its latest
// snapshot plus the log after it.

import { describe, expect, it } from 'vitest';
import { emptyConfState } from '../../src/raft/storage.ts';
import { Cluster, encodeState, isMember, members, text } from './harness.ts';

const et = 10;

describe('§7 log compaction and snapshots', () => {
  it('a follower behind the compacted log receives the snapshot, then the entries after it', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('c');
    const want: string[] = [];
    for (let i = 0; i < 10; i++) {
      want.push(`p${i}`);
      c.propose('a', `p${i}`);
    }
    c.stabilize();
    expect(c.status('a').commit).toBe(12);
    const snap = c.compact('a');
    expect(snap.meta).toMatchObject({ index: 12, term: 2 });
    expect(c.peer('a').storage.firstIndex()).toBe(13);
    for (let i = 10; i < 13; i++) {
      want.push(`p${i}`);
      c.propose('a', `p${i}`);
    }
    c.stabilize();

    c.recover();
    c.clearTrace();
    c.tickUntil(() => c.state('c').length === want.length, 3 * et);
    expect(c.state('c')).toEqual(want);

    const snaps = c.messages({ from: 'a', to: 'c', type: 'snap' });
    expect(snaps).toHaveLength(1);
    expect(snaps[0]?.snapshot?.meta).toMatchObject({ index: 12, term: 2 });
    expect(c.peer('c').snapshotsApplied.map((s) => s.meta.index)).toEqual([12]);
    expect(c.peer('c').storage.firstIndex()).toBe(13);
    // Entries 13..15 came after the snapshot, by ordinary appends.
    const snapAt = c.sent.indexOf(snaps[0] as (typeof c.sent)[number]);
    const rest = c.messages({ from: 'a', to: 'c', type: 'app' })
      .filter((m) => m.entries.some((e) => e.kind === 'normal' && text(e.data) === 'p12'));
    expect(rest.length).toBeGreaterThan(0);
    expect(c.sent.indexOf(rest[0] as (typeof c.sent)[number])).toBeGreaterThan(snapAt);
    // Index 2 (a's no-op) before the partition; then nothing up to the snapshot; then 13..15.
    expect(c.peer('c').applied.map((e) => e.index)).toEqual([2, 13, 14, 15]);
    expect(c.status('a').progress?.['c']).toMatchObject({ match: 15, state: 'replicate' });

    c.propose('a', 'later');
    c.stabilize();
    expect(c.state('c')).toEqual([...want, 'later']);
  });

  it.each([
    ['while it still holds those entries', false],
    ['after it compacted past them', true],
  ])('a snapshot older than the follower\'s commit index is ignored, %s', (_name, compacted) => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    for (let i = 0; i < 5; i++) c.propose('a', `p${i}`);
    c.stabilize();
    if (compacted) c.compact('b'); // b's own snapshot at 7; a delayed older one arrives later
    const before = { log: c.log('b'), state: c.state('b'), status: c.status('b') };
    expect(before.status.commit).toBe(7);

    c.clearTrace();
    c.inject({
      type: 'snap', from: 'a', to: 'b', term: 2,
      snapshot: { meta: { index: 4, term: 2, confState: c.node('a').confState() }, data: encodeState(['p0', 'p1']) },
    });
    c.deliver({ to: 'b' });
    expect(c.peer('b').snapshotsApplied).toEqual([]);
    expect(c.log('b')).toEqual(before.log);
    expect(c.peer('b').storage.firstIndex()).toBe(before.status.firstIndex);
    expect(c.state('b')).toEqual(before.state);
    expect(c.status('b')).toMatchObject({ commit: 7, applied: 7, term: 2, lastIndex: 7 });
    // b answers with what it has, so the leader is not misled.
    const answers = c.messages({ from: 'b', to: 'a', type: 'appResp' });
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ reject: false, index: 7 });
    c.stabilize();
    expect(c.status('a').progress?.['b']?.match).toBe(7);
    c.propose('a', 'p5');
    c.stabilize();
    expect(c.state('b')).toEqual(['p0', 'p1', 'p2', 'p3', 'p4', 'p5']);
  });

  it('a new node restores a snapshot that predates its membership; the log after it adds the node', () => {
    // The leader sends the snapshot in its storage, here the bootstrap one (index 1), taken long
    // before d was added. d restores it although it is not listed, then follows the log, which
    // holds the conf change that adds it. (Refusing it would strand d until the leader's driver
    // happened to snapshot again.)
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    c.addNode('d');
    c.proposeConfChange('a', { changes: [{ type: 'addLearner', node: 'd' }] });
    c.stabilize();
    c.tickUntil(() => c.state('d').length === 1, 5);

    const snaps = c.messages({ from: 'a', to: 'd', type: 'snap' }).map((m) => m.snapshot?.meta);
    expect(snaps).toHaveLength(1);
    expect(snaps[0]?.index).toBe(1);
    expect(isMember(snaps[0]?.confState ?? emptyConfState(), 'd')).toBe(false);
    expect(c.peer('d').snapshotsApplied.map((s) => s.meta.index)).toEqual([1]);
    expect(c.peer('d').applied.map((e) => e.index)).toEqual([2, 3, 4]);
    expect(members(c.node('d').confState())).toEqual({ voters: ['a', 'b', 'c'], votersOutgoing: [], learners: ['d'] });
    expect(c.node('d').status().role).toBe('follower');
    expect(c.state('d')).toEqual(['x']);
  });

  it('a node restarts from its snapshot plus the log after it', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    for (let i = 0; i < 5; i++) c.propose('a', `p${i}`);
    c.stabilize();
    const snap = c.compact('b');
    expect(snap.meta.index).toBe(7);
    for (let i = 5; i < 8; i++) c.propose('a', `p${i}`);
    c.stabilize();
    const before = c.status('b');
    expect(before).toMatchObject({ commit: 10, lastIndex: 10, firstIndex: 8 });

    c.restart('b');
    const after = c.status('b');
    expect(after).toMatchObject({ term: before.term, vote: before.vote, commit: 10, lastIndex: 10, firstIndex: 8, applied: 10 });
    expect(after.role).toBe('follower');
    // The state machine came back from the snapshot (p0..p4) and the log replayed the rest.
    expect(c.peer('b').applied.map((e) => e.index)).toEqual([8, 9, 10]);
    expect(c.state('b')).toEqual(['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7']);
    expect(members(c.node('b').confState())).toEqual(members(c.node('a').confState()));

    c.propose('a', 'p8');
    c.stabilize();
    expect(c.state('b')).toEqual(['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7', 'p8']);
  });

  it('a node whose state machine survived restarts at its applied index, membership included', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'p0');
    c.stabilize();
    c.compact('b'); // b's snapshot at 3 lists a, b, c only
    c.addNode('d');
    c.proposeConfChange('a', { changes: [{ type: 'addLearner', node: 'd' }] });
    c.propose('a', 'p1');
    c.stabilize();
    c.propose('a', 'p2');
    c.stabilize();
    const before = c.status('b');
    expect(before).toMatchObject({ commit: 6, applied: 6, firstIndex: 4 });

    c.restart('b', { durableState: true });
    expect(c.status('b')).toMatchObject({ commit: 6, applied: 6, lastIndex: 6, term: before.term });
    expect(c.peer('b').applied).toEqual([]); // nothing applied twice
    expect(c.state('b')).toEqual(['p0', 'p1', 'p2']);
    // The conf change at index 4 lies between the snapshot and the applied index: still in force.
    expect(members(c.node('b').confState())).toEqual({ voters: ['a', 'b', 'c'], votersOutgoing: [], learners: ['d'] });
    c.propose('a', 'p3');
    c.stabilize();
    expect(c.state('b')).toEqual(['p0', 'p1', 'p2', 'p3']);
  });

  it('a node restarts with only a snapshot and no log after it', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    for (let i = 0; i < 3; i++) c.propose('a', `p${i}`);
    c.stabilize();
    c.compact('c');
    c.restart('c');
    expect(c.status('c')).toMatchObject({ commit: 5, lastIndex: 5, firstIndex: 6, applied: 5 });
    expect(c.peer('c').applied).toEqual([]);
    expect(c.state('c')).toEqual(['p0', 'p1', 'p2']);
    c.propose('a', 'p3');
    c.stabilize();
    expect(c.state('c')).toEqual(['p0', 'p1', 'p2', 'p3']);
  });
});
