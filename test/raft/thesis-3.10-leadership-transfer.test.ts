// Ongaro's thesis §3.10, "Leadership transfer extension": the leader stops accepting new
// requests, brings the target's log up to date, then sends it TimeoutNow; the target starts an
// election at once (no waiting for its timeout, no pre-election) and wins with the newer term.
// If the transfer does not complete within an election timeout, the leader aborts it and
// resumes accepting requests.

import { describe, expect, it } from 'vitest';
import { Cluster, dropReason } from './harness.ts';

const et = 10;

describe('§3.10 leadership transfer', () => {
  it('to an up-to-date follower: TimeoutNow at once, and it wins the next term', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    c.clearTrace();
    c.transferLeadership('a', 'b');
    expect(c.queue).toEqual([expect.objectContaining({ type: 'timeoutNow', from: 'a', to: 'b', term: 2 })]);
    c.stabilize();
    expect(c.status('b')).toMatchObject({ role: 'leader', term: 3 });
    for (const id of ['a', 'c']) expect(c.status(id)).toMatchObject({ role: 'follower', term: 3, leader: 'b' });
    expect(c.status('a').leadTransferee).toBe('');
    expect(c.messages({ type: 'preVote' })).toEqual([]); // forced: no pre-election
    c.propose('b', 'y');
    c.stabilize();
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['x', 'y']);
  });

  it('to a lagging follower: it is caught up first, then sent TimeoutNow', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('c');
    for (let i = 0; i < 5; i++) c.propose('a', `p${i}`);
    c.stabilize();
    const last = c.status('a').lastIndex;
    expect(last).toBe(7);
    expect(c.status('c').commit).toBe(2);

    c.recover();
    c.clearTrace();
    c.transferLeadership('a', 'c');
    expect(c.messages({ type: 'timeoutNow' })).toEqual([]);
    expect(c.status('a').leadTransferee).toBe('c');
    c.tickUntil(() => c.status('c').role === 'leader', et);

    const caughtUp = c.sent.findIndex((m) => m.type === 'appResp' && m.from === 'c' && !m.reject && m.index === last);
    const timeoutNow = c.sent.findIndex((m) => m.type === 'timeoutNow' && m.to === 'c');
    expect(caughtUp).toBeGreaterThanOrEqual(0);
    expect(timeoutNow).toBeGreaterThan(caughtUp);
    expect(c.status('c')).toMatchObject({ role: 'leader', term: 3 });
    c.stabilize();
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
  });

  it('proposals are refused while a transfer is in progress', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('c'); // the target cannot catch up
    c.propose('a', 'x');
    c.stabilize();
    c.transferLeadership('a', 'c');
    c.stabilize();
    expect(c.status('a')).toMatchObject({ role: 'leader', leadTransferee: 'c' });
    const lastIndex = c.status('a').lastIndex;
    expect(dropReason(() => c.propose('a', 'y'))).toBe('transferInProgress');
    // Forwarded proposals are dropped too; the log does not grow.
    c.propose('b', 'z');
    c.stabilize();
    expect(c.status('a').lastIndex).toBe(lastIndex);
  });

  it('is aborted after an election timeout if the target does not win', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.drop({ type: 'timeoutNow' }); // the target never hears it
    c.transferLeadership('a', 'c');
    c.stabilize();
    expect(c.status('a').leadTransferee).toBe('c');
    c.tickAll(1);
    expect(c.status('a').leadTransferee).toBe('c');
    expect(dropReason(() => c.propose('a', 'refused'))).toBe('transferInProgress');

    const t = c.tickUntil(() => c.status('a').leadTransferee === '', 2 * et);
    expect(1 + t).toBeGreaterThanOrEqual(et);
    expect(c.status('a')).toMatchObject({ role: 'leader', term: 2 });
    expect(dropReason(() => c.propose('a', 'accepted'))).toBeUndefined();
    c.stabilize();
    for (const id of ['a', 'b', 'c']) {
      expect(c.state(id)).toEqual(['accepted']);
      expect(c.status(id).term).toBe(2);
    }
  });
});
