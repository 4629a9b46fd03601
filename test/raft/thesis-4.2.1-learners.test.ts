// Ongaro's thesis §4.2.1, "Catching up new servers": a new server joins as a non-voting member
// (a learner). The leader replicates to it, but it is not counted in majorities: not for
// commitment, not for elections; and it never starts an election itself.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

const et = 10;

describe('§4.2.1 learners', () => {
  it('a learner receives the log and applies it', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], learners: ['d'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    expect(c.state('d')).toEqual(['x']);
    expect(c.log('d')).toEqual(c.log('a'));
    expect(c.status('a').progress?.['d']).toMatchObject({ learner: true, match: 3 });
  });

  it('a learner never counts toward commitment', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], learners: ['d'] });
    c.elect('a');
    c.isolate('b');
    c.isolate('c');
    c.propose('a', 'x');
    c.stabilize();
    // The learner holds x and acknowledged it; the leader alone is not a majority of three.
    expect(c.log('d').at(-1)).toMatchObject({ index: 3, term: 2 });
    expect(c.messages({ from: 'd', to: 'a', type: 'appResp', reject: false }).some((m) => m.index === 3)).toBe(true);
    expect(c.status('a').commit).toBe(2);
    for (const id of ['a', 'b', 'c', 'd']) expect(c.state(id)).toEqual([]);
  });

  it('a learner never campaigns, whatever its clock says', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], learners: ['d'] });
    c.isolate('a');
    c.isolate('b');
    c.isolate('c');
    c.tick('d', 10 * et);
    c.campaign('d');
    expect(c.messages({ from: 'd' })).toEqual([]);
    expect(c.status('d')).toMatchObject({ role: 'follower', term: 1 });
  });

  it('a learner\'s vote does not count: voters cut off from each other elect nobody', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], learners: ['d'] });
    c.isolate('b');
    c.isolate('c');
    c.campaign('a');
    c.stabilize();
    c.tickAll(5 * et);
    expect(c.leaderIds()).toEqual([]);
    expect(c.messages({ to: 'd', type: ['vote', 'preVote'] })).toEqual([]);
  });
});
