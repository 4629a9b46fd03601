// Ongaro's thesis §6.2, "Routing requests to the leader": a follower forwards a client's
// proposal to the leader it knows; without a leader the request fails at once so the client
// can retry elsewhere. And: "a leader steps down if an election timeout elapses without a
// successful round of heartbeats to a majority of its cluster" (CheckQuorum), so clients of a
// partitioned leader fail fast instead of waiting forever.

import { describe, expect, it } from 'vitest';
import { Cluster, dropReason, text } from './harness.ts';

const et = 10;

describe('§6.2 proposal forwarding', () => {
  it('a follower forwards a proposal to the leader, which commits it', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.clearTrace();
    c.propose('b', 'via-b');
    const [fwd] = c.queue;
    expect(fwd).toMatchObject({ type: 'prop', from: 'b', to: 'a' });
    expect(fwd?.entries.map((e) => (e.kind === 'normal' ? text(e.data) : e.kind))).toEqual(['via-b']);
    c.stabilize();
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['via-b']);
    expect(c.log('a').at(-1)).toMatchObject({ index: 3, term: 2 });
  });

  it('a proposal with no leader known is refused at once', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    expect(dropReason(() => c.propose('b', 'x'))).toBe('noLeader');
    expect(c.queue).toEqual([]);
  });

  it('a follower with forwarding disabled refuses proposals', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], configs: { b: { disableProposalForwarding: true } } });
    c.elect('a');
    c.clearTrace();
    expect(dropReason(() => c.propose('b', 'x'))).toBe('forwardingDisabled');
    expect(c.messages({ type: 'prop' })).toEqual([]);
    expect(dropReason(() => c.propose('c', 'y'))).toBeUndefined();
    c.stabilize();
    expect(c.state('b')).toEqual(['y']);
  });
});

// A follower that has not yet heard of a new leader forwards to the old one, which, a follower
// itself now, relays to the leader it knows. Each hop is sent in the relaying node's own name
// (the harness, like the transport, refuses a message whose sender is not the node at the
// other end) and names the node the request came from, which the leader answers.
describe('§6.2 a request relayed twice', () => {
  /** Heartbeats bring c, which the leader has only probed since it came back, up to date. */
  function settle(c: Cluster): void {
    for (let i = 0; i < 3; i++) {
      c.tickAll(1);
      c.stabilize();
    }
  }

  /** a led term 2 and handed over to b (term 3) while c was cut off: c still follows a. */
  function staleFollower(): Cluster {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('c');
    c.transferLeadership('a', 'b');
    c.stabilize();
    c.recover();
    c.clearTrace();
    expect(c.status('a')).toMatchObject({ role: 'follower', leader: 'b', term: 3 });
    expect(c.status('c')).toMatchObject({ role: 'follower', leader: 'a', term: 2 });
    return c;
  }

  it('a proposal reaches the leader through the deposed one, and commits everywhere', () => {
    const c = staleFollower();
    c.propose('c', 'via-c');
    expect(c.deliver({ type: 'prop' })).toMatchObject([{ from: 'c', to: 'a' }]);
    const [relayed] = c.messages({ type: 'prop', from: 'a' });
    expect(relayed).toMatchObject({ from: 'a', to: 'b', origin: 'c', term: 0 });
    settle(c);
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['via-c']);
  });

  it('a read is answered to the node that asked, not to the one that relayed it', () => {
    const c = staleFollower();
    c.readIndex('c', 'ctx-c');
    c.stabilize();
    expect(c.messages({ type: 'readIndex', from: 'a' })).toMatchObject([{ to: 'b', origin: 'c' }]);
    expect(c.messages({ type: 'readIndexResp' })).toMatchObject([{ from: 'b', to: 'c', context: 'ctx-c' }]);
    expect(c.peer('c').readStates).toEqual([{ index: c.status('b').commit, context: 'ctx-c' }]);
    expect(c.peer('a').readStates).toEqual([]);
  });

  it('a transfer asked for by a node goes to that node, not to the one that relayed it', () => {
    const c = staleFollower();
    c.node('c').transferLeadership('c');
    settle(c);
    expect(c.messages({ type: 'transferLeader', from: 'a' })).toMatchObject([{ to: 'b', origin: 'c' }]);
    expect(c.leaderIds()).toEqual(['c']);
  });

  it('a request relayed back to the node it came from, now the leader, is taken as its own', () => {
    const c = staleFollower();
    c.propose('b', 'x');
    settle(c);
    c.clearTrace();
    c.inject({ type: 'prop', from: 'a', to: 'b', origin: 'b', entries: [{ kind: 'normal', index: 0, term: 0, data: new TextEncoder().encode('looped') }] });
    settle(c);
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['x', 'looped']);
  });
});

describe('§6.2 CheckQuorum', () => {
  it('an isolated leader steps down after an election timeout without a quorum', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('a');
    const t = c.tickUntil(() => c.status('a').role !== 'leader', 2 * et);
    expect(t).toBeGreaterThanOrEqual(et);
    expect(c.status('a')).toMatchObject({ role: 'follower', term: 2, leader: '' });
    expect(dropReason(() => c.propose('a', 'x'))).toBe('noLeader');

    // Meanwhile b and c elect a leader of their own.
    c.tickUntil(() => c.leaderIds().length === 1, 3 * et);
    const [leader] = c.leaderIds();
    expect(['b', 'c']).toContain(leader);
    expect(c.status(leader ?? '').term).toBe(3);
  });

  it('a leader that hears from a quorum stays leader', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('c'); // b alone is enough
    c.tickAll(10 * et);
    expect(c.status('a')).toMatchObject({ role: 'leader', term: 2 });
  });

  it('control: without CheckQuorum an isolated leader stays leader', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], config: { checkQuorum: false } });
    c.elect('a');
    c.isolate('a');
    c.tickAll(10 * et);
    expect(c.status('a')).toMatchObject({ role: 'leader', term: 2 });
  });
});

// Not in the thesis: a follower whose transport loses its connection to the leader (a closed
// socket, as when the leader's process dies) campaigns within a few ticks instead of a whole
// election timeout, and stops honouring the leader's lease so the others' pre-votes can win too.
describe('losing the connection to the leader', () => {
  it('when every follower lost it, a new leader is elected within a few ticks', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('a');
    for (const id of ['b', 'c']) c.node(id).reportUnreachable('a');
    const ticks = c.tickUntil(() => c.leaderIds().some((id) => id !== 'a'), et, ['b', 'c']);
    expect(ticks).toBeLessThanOrEqual(4);
    expect(['b', 'c']).toContain(c.status('b').leader);
  });

  it('followers that lost it together do not split the vote: one election, one term', () => {
    // Ticks of every node fire together here, as on nodes started at the same moment: followers
    // that drew the same delay would campaign at once, each vote for itself, and all of them
    // wait a whole randomized election timeout for the next try.
    for (const voters of [['a', 'b', 'c'], ['a', 'b', 'c', 'd', 'e']]) {
      const others = voters.filter((id) => id !== 'a');
      for (let seed = 1; seed <= 40; seed++) {
        const c = new Cluster({ voters, seed });
        c.elect('a');
        const term = c.status('a').term;
        c.isolate('a');
        for (const id of others) c.node(id).reportUnreachable('a');
        const ticks = c.tickUntil(() => c.leaderIds().some((id) => id !== 'a'), 2 * et, others);
        const leader = c.leaderIds().find((id) => id !== 'a');
        expect({ voters: voters.length, seed, term: c.status(leader ?? 'a').term }).toEqual({ voters: voters.length, seed, term: term + 1 });
        expect(ticks).toBeLessThanOrEqual(2 * others.length);
      }
    }
  });

  it('repeated reports do not put the campaign off', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('a');
    const ticks = c.tickUntil(() => {
      // As a transport that fails to reconnect reports the peer again at every attempt.
      for (const id of ['b', 'c']) c.node(id).reportUnreachable('a');
      return c.leaderIds().some((id) => id !== 'a');
    }, et, ['b', 'c']);
    expect(ticks).toBeLessThanOrEqual(4);
  });

  it('a message dropped on its way to the leader (the connection still up) does not hasten the campaign', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('a');
    for (const id of ['b', 'c']) c.node(id).reportUnreachable('a', false);
    c.tickAll(5, ['b', 'c']);
    c.stabilize();
    expect(c.leaderIds().filter((id) => id !== 'a')).toEqual([]);
    // The election timeout still elects someone.
    const ticks = c.tickUntil(() => c.leaderIds().some((id) => id !== 'a'), 3 * et, ['b', 'c']);
    expect(ticks).toBeGreaterThanOrEqual(et - 5);
  });

  it('without the report, the followers wait out the election timeout', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('a');
    c.tickAll(5, ['b', 'c']);
    c.stabilize();
    expect(c.leaderIds().filter((id) => id !== 'a')).toEqual([]);
  });

  it('a follower that alone lost its link does not depose a leader the others still hear', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    const term = c.status('a').term;
    c.cut('a', 'b');
    c.node('b').reportUnreachable('a');
    for (let i = 0; i < et - 1; i++) {
      c.tickAll(1);
      c.stabilize();
    }
    expect(c.status('a')).toMatchObject({ role: 'leader', term });
    expect(c.status('c')).toMatchObject({ leader: 'a', term });
  });
});
