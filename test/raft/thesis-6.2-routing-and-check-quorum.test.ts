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
