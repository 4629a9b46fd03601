// Ongaro's thesis §9.6, "Preventing disruptions when a server rejoins the cluster": a server
// cut off from the others keeps timing out; without PreVote each timeout raises its term, and on
// its return that term forces the healthy leader to step down. With PreVote the server first asks
// whether it could win, without raising its term; with CheckQuorum (thesis §4.2.3, §6.2) servers
// that hear from a leader refuse to take part in elections during their lease.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

const et = 10;

describe('§9.6 PreVote with CheckQuorum', () => {
  it('a node returning from a partition does not depose a healthy leader', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.clearTrace();
    c.isolate('c');
    c.tickAll(5 * et); // c times out again and again, alone
    expect(c.messages({ from: 'c', type: 'preVote' }).length).toBeGreaterThan(0);
    expect(c.status('c').term).toBe(2); // pre-elections do not raise the term
    expect(c.status('a')).toMatchObject({ role: 'leader', term: 2 });

    c.recover();
    c.tickAll(3 * et);
    for (const id of ['a', 'b', 'c']) expect(c.status(id)).toMatchObject({ term: 2, leader: 'a' });
    expect(c.status('a').role).toBe('leader');
    expect(c.messages({ type: 'vote' })).toEqual([]); // never a real election after the first
    expect(c.messages({ type: 'voteResp', reject: false }).every((m) => m.term === 2)).toBe(true);

    c.propose('a', 'x');
    c.stabilize();
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['x']);
  });

  it('a pre-election is refused while the voters hear from a leader, even by an up-to-date node', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.tickAll(2);
    c.clearTrace();
    c.campaign('c'); // c's log is as good as anyone's
    c.stabilize();
    expect(c.messages({ from: 'c', type: 'preVote' })).toHaveLength(2);
    expect(c.messages({ to: 'c', type: 'preVoteResp', reject: false })).toEqual([]);
    expect(c.messages({ type: 'vote' })).toEqual([]);
    for (const id of ['a', 'b', 'c']) expect(c.status(id).term).toBe(2);
    expect(c.status('a').role).toBe('leader');
  });

  it('control: without PreVote and CheckQuorum the returning node does depose the leader', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], config: { preVote: false, checkQuorum: false } });
    c.elect('a');
    c.isolate('c');
    c.tickAll(5 * et);
    const cTerm = c.status('c').term;
    expect(cTerm).toBeGreaterThan(2);
    c.recover();
    c.tickAll(3 * et);
    expect(c.status('a').term).toBeGreaterThanOrEqual(cTerm);
    expect(c.leaderIds()).toHaveLength(1);
    expect(c.status(c.leaderIds()[0] ?? '').term).toBeGreaterThan(2);
  });
});
