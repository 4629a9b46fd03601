// Raft paper §5.1, "Raft basics": terms are a logical clock. Servers exchange their current term
// on every message; a server that sees a larger term adopts it, and a candidate or leader that
// learns its term is out of date reverts to follower at once. A request carrying a stale term is
// rejected, and the answer tells the sender the newer term.

import { describe, expect, it } from 'vitest';
import { Cluster, bytes } from './harness.ts';

describe('§5.1 terms', () => {
  it('a message with a higher term makes the receivers adopt it, and the leader steps down', () => {
    // Without PreVote or CheckQuorum, so that nothing but the term rule is at work.
    const c = new Cluster({ voters: ['a', 'b', 'c'], config: { preVote: false, checkQuorum: false } });
    c.isolate('c');
    c.elect('a');
    expect(c.status('a')).toMatchObject({ role: 'leader', term: 2 });

    // Partitioned, c campaigns three times in vain and reaches term 4.
    c.campaign('c');
    c.campaign('c');
    c.campaign('c');
    c.stabilize();
    expect(c.status('c')).toMatchObject({ role: 'candidate', term: 4 });

    c.recover();
    c.campaign('c'); // term 5
    c.deliver({ from: 'c', type: 'vote' });
    expect(c.status('a')).toMatchObject({ role: 'follower', term: 5 });
    expect(c.status('b')).toMatchObject({ role: 'follower', term: 5 });

    // The term carries no authority over the log: c lacks a's no-op, so both refuse it.
    c.stabilize();
    expect(c.status('c').term).toBe(5);
    expect(c.status('c').role).not.toBe('leader');
    expect(c.messages({ type: 'voteResp', to: 'c', reject: false })).toEqual([]);
    expect(c.leaderIds()).toEqual([]);
  });

  it('a deposed leader learns the newer term from the answers to its stale appends', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    // a is partitioned and its clock stands still, so it still believes it leads term 2.
    c.isolate('a');
    c.tickUntil(() => c.leaderIds().some((id) => id !== 'a'), 40, ['b', 'c']);
    const leader = c.leaderIds().find((id) => id !== 'a');
    expect(leader).toBeDefined();
    expect(c.status(leader ?? '').term).toBe(3);
    expect(c.status('a')).toMatchObject({ role: 'leader', term: 2 });

    c.recover();
    c.clearTrace();
    c.propose('a', 'stale');
    const stale = c.deliver({ from: 'a', type: 'app' });
    expect(stale.length).toBeGreaterThan(0);
    expect(stale.every((m) => m.term === 2)).toBe(true);
    // The answers carry term 3 ...
    const answers = c.deliver({ to: 'a' });
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.every((m) => m.term === 3)).toBe(true);
    // ... and a reverts to follower in term 3.
    expect(c.status('a')).toMatchObject({ role: 'follower', term: 3 });

    // The stale entry was never committed; the new leader's log wins.
    c.tickAll(3);
    for (const id of ['a', 'b', 'c']) {
      expect(c.state(id)).toEqual([]);
      expect(c.status(id).term).toBe(3);
      expect(c.terms(id)).toEqual([2, 3]);
    }
    expect(c.status('a').leader).toBe(leader);
  });

  it('a request from an older term is refused and leaves the receiver unchanged', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    const before = { status: c.status('b'), log: c.log('b') };
    expect(before.status).toMatchObject({ term: 2, vote: 'a', commit: 3 });

    c.clearTrace();
    // A vote request from term 1 with a log that would win on length.
    c.inject({ type: 'vote', from: 'c', to: 'b', term: 1, logTerm: 1, index: 100 });
    // An append from term 1 that would overwrite index 3 and move the commit index.
    c.inject({
      type: 'app', from: 'c', to: 'b', term: 1, logTerm: 2, index: 2, commit: 3,
      entries: [{ kind: 'normal', term: 1, index: 3, data: bytes('evil') }],
    });
    c.deliver({ to: 'b' });

    const after = c.status('b');
    expect(after).toMatchObject({ term: 2, vote: 'a', commit: 3, leader: 'a', role: 'follower' });
    expect(c.log('b')).toEqual(before.log);
    expect(c.state('b')).toEqual(['x']);
    // No grant; any answer carries b's term so the sender can update.
    expect(c.messages({ from: 'b', type: 'voteResp', reject: false })).toEqual([]);
    for (const m of c.messages({ from: 'b', to: 'c' })) expect(m.term).toBe(2);
  });

  it('a candidate that sees a higher term reverts to follower', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], config: { preVote: false } });
    c.isolate('a');
    c.isolate('b');
    c.campaign('a'); // a: candidate of term 2, alone
    c.campaign('b');
    c.campaign('b'); // b: term 3
    c.stabilize();
    c.recover();
    c.isolate('a');
    c.campaign('b'); // b: term 4, wins with c
    c.stabilize();
    expect(c.status('a')).toMatchObject({ role: 'candidate', term: 2 });
    expect(c.status('b')).toMatchObject({ role: 'leader', term: 4 });

    c.recover();
    c.tick('b'); // a heartbeat of term 4 reaches a
    c.stabilize();
    expect(c.status('a')).toMatchObject({ role: 'follower', term: 4, leader: 'b' });
  });
});
