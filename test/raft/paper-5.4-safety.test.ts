// Raft paper §5.4, "Safety". §5.4.1: a voter refuses a candidate whose log is less up-to-date
// than its own (compare last terms, then lengths). §5.4.2 and Figure 8: a leader never commits
// an entry of a previous term by counting replicas; such entries commit only indirectly, once an
// entry of the leader's own term commits. The core appends a no-op at the start of every term
// so that this happens without waiting for a client.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

describe('§5.4.1 election restriction', () => {
  describe.each([
    ['with PreVote', true],
    ['without PreVote', false],
  ])('%s', (_name, preVote) => {
    const responses = (c: Cluster, from: string, to: string, reject: boolean) =>
      c.messages({ from, to, type: ['preVoteResp', 'voteResp'], reject });

    it('a voter refuses a candidate whose last entry has an older term, even if its log is longer', () => {
      const c = new Cluster({
        voters: ['a', 'b', 'c'],
        config: { preVote },
        logs: { a: [2, 2, 2], b: [2, 3], c: [2, 3] },
      });
      c.campaign('a');
      c.stabilize();
      expect(c.status('a').role).not.toBe('leader');
      expect(responses(c, 'b', 'a', true).length).toBeGreaterThan(0);
      expect(responses(c, 'b', 'a', false)).toEqual([]);
      expect(responses(c, 'c', 'a', false)).toEqual([]);

      c.campaign('b');
      c.stabilize();
      expect(c.status('b').role).toBe('leader');
      expect(responses(c, 'a', 'b', false).length).toBeGreaterThan(0);
      // a's entries of term 2 beyond index 2 were never committed; b's log replaces them.
      expect(c.terms('a')).toEqual([...c.terms('b')]);
      expect(c.terms('a').slice(0, 2)).toEqual([2, 3]);
    });

    it('a voter refuses a candidate with the same last term but a shorter log', () => {
      const c = new Cluster({
        voters: ['a', 'b', 'c'],
        config: { preVote },
        logs: { a: [2], b: [2, 2], c: [2] },
      });
      c.isolate('c');
      c.campaign('a');
      c.stabilize();
      expect(c.status('a').role).not.toBe('leader');
      expect(responses(c, 'b', 'a', true).length).toBeGreaterThan(0);

      c.campaign('b');
      c.stabilize();
      expect(c.status('b').role).toBe('leader');
      expect(c.log('a').slice(0, 2)).toEqual(c.log('b').slice(0, 2));
    });
  });
});

describe('§5.4.2 Figure 8: committing entries from previous terms', () => {
  // The servers of Figure 8 at the start of (c). Index 1 (term 1) is everyone's snapshot.
  // (a) S1 led term 2 and replicated index 2 to S2 only. (b) S5 led term 3, voted in by S3, S4
  // and itself, and appended its own index 2; then it crashed. S1 has since heard of term 3.
  // PreVote and CheckQuorum are off: the figure is about the basic algorithm. One entry per
  // append message, so replication can be followed hop by hop.
  function figure8c(): Cluster {
    const c = new Cluster({
      voters: ['s1', 's2', 's3', 's4', 's5'],
      config: { preVote: false, checkQuorum: false, appendBytesMax: 1 },
      logs: { s1: [2], s2: [2], s3: [], s4: [], s5: [3] },
      hardStates: {
        s1: { term: 3 },
        s2: { term: 2, vote: 's1' },
        s3: { term: 3, vote: 's5' },
        s4: { term: 3, vote: 's5' },
        s5: { term: 3, vote: 's5' },
      },
    });
    c.isolate('s5'); // crashed
    c.drop({ from: 's1', to: 's2', type: 'app' }); // S2 hears only votes: it has index 2 already

    // (c) S1 is elected for term 4 ...
    c.campaign('s1');
    c.deliver({ type: 'vote' });
    c.deliver({ type: 'voteResp' });
    expect(c.status('s1')).toMatchObject({ role: 'leader', term: 4 });
    expect(c.terms('s1')).toEqual([2, 4]); // index 2 of term 2, its no-op at index 3

    // ... and replicates index 2 to S3 and S4: its probe is refused, it backs up, sends index 2.
    c.deliver({ type: 'app' });
    c.deliver({ type: 'appResp' });
    c.deliver({ type: 'app' });
    c.deliver({ type: 'appResp' });
    for (const id of ['s3', 's4']) expect(c.terms(id)).toEqual([2]);
    const progress = c.status('s1').progress ?? {};
    expect(progress['s3']?.match).toBe(2);
    expect(progress['s4']?.match).toBe(2);
    return c;
  }

  it('(c) the leader does not commit an entry of an older term stored on a majority', () => {
    const c = figure8c();
    // Index 2 is on S1, S2, S3 and S4, and S1 knows of three of them: a majority of five.
    expect(c.status('s1').commit).toBe(1);
    expect(c.state('s1')).toEqual([]);
    // The queued appends carry S1's no-op of term 4. Once that is on a majority, index 3
    // commits, and index 2 with it.
    c.stabilize();
    expect(c.status('s1').commit).toBe(3);
    for (const id of ['s1', 's3', 's4']) expect(c.state(id)).toEqual(['2@2']);
  });

  it('(d) which is why: S5 can still be elected and overwrite it', () => {
    const c = figure8c();
    c.dropQueued(); // S1's no-op never leaves it: S1 crashes
    c.recover();
    c.isolate('s1');
    c.campaign('s5'); // term 4: S2, S3 and S4 have voted in term 4 already
    c.stabilize();
    expect(c.status('s5')).toMatchObject({ term: 4 });
    expect(c.status('s5').role).not.toBe('leader');
    expect(c.messages({ to: 's5', type: 'voteResp', reject: false })).toEqual([]);
    c.campaign('s5'); // term 5: its last term (3) beats theirs (2)
    c.stabilize();
    expect(c.status('s5')).toMatchObject({ role: 'leader', term: 5 });
    for (const id of ['s2', 's3', 's4', 's5']) {
      expect(c.terms(id)).toEqual([3, 5]);
      expect(c.state(id)).toEqual(['2@3']);
    }
    // Nobody ever applied S1's index 2: committing it at (c) would have broken safety.
    for (const id of ['s1', 's2', 's3', 's4', 's5']) {
      expect(c.peer(id).applied.some((e) => e.index === 2 && e.term === 2)).toBe(false);
    }
  });

  it('(e) once an entry of the leader\'s term is on a majority, S5 can no longer win', () => {
    const c = figure8c();
    c.stabilize(); // S1's no-op (index 3, term 4) reaches S3 and S4
    expect(c.status('s1').commit).toBe(3);
    c.recover();
    c.isolate('s1'); // now S1 crashes
    c.campaign('s5');
    c.stabilize();
    c.campaign('s5');
    c.stabilize();
    c.campaign('s5');
    c.stabilize();
    expect(c.status('s5').role).not.toBe('leader');
    for (const id of ['s3', 's4']) {
      expect(c.terms(id)).toEqual([2, 4]);
      expect(c.messages({ from: id, to: 's5', type: 'voteResp', reject: false })).toEqual([]);
    }
  });
});

describe('§5.4.2 the no-op at the start of each term', () => {
  it('a new leader appends an empty entry of its term and commits it', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    for (const id of ['a', 'b', 'c']) {
      const [noop] = c.log(id);
      expect(noop).toMatchObject({ index: 2, term: 2, kind: 'normal' });
      expect(noop?.kind === 'normal' && noop.data.length).toBe(0);
      expect(c.status(id).commit).toBe(2);
    }
  });

  it('the next leader\'s no-op commits the entry its predecessor could not', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    // x reaches b but not c, and a never hears b's acknowledgement: x stays uncommitted.
    c.drop({ from: 'a', to: 'c', type: 'app' });
    c.drop({ from: 'b', to: 'a', type: 'appResp' });
    c.propose('a', 'x');
    c.stabilize();
    expect(c.terms('b')).toEqual([2, 2]);
    expect(c.status('a').commit).toBe(2);

    c.recover();
    c.isolate('a');
    c.tickUntil(() => c.status('b').role === 'leader', 50, ['b', 'c']);
    expect(c.status('b').term).toBe(3);
    c.stabilize();
    for (const id of ['b', 'c']) {
      expect(c.log(id).map((e) => [e.index, e.term])).toEqual([[2, 2], [3, 2], [4, 3]]);
      const noop = c.log(id)[2];
      expect(noop?.kind === 'normal' && noop.data.length).toBe(0);
      expect(c.status(id).commit).toBe(4);
      expect(c.state(id)).toEqual(['x']);
    }
  });
});
