// Raft paper §5.3, "Log replication": the leader appends a command to its log and replicates
// it; an entry is committed once the leader has replicated it on a majority, and every server
// applies committed entries in log order. AppendEntries carries the index and term of the entry
// before the new ones; a follower refuses when it does not hold that entry, the leader backs up,
// and conflicting entries of the follower are overwritten (Figure 7). The paper notes the
// backing-up can be made faster than one entry per round trip; the core uses a conflict hint.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

/** A log as the paper draws it, from index 1; index 1 (term 1) is the bootstrap snapshot. */
function paperLog(terms: string): number[] {
  const all = terms.trim().split(/\s+/).map(Number);
  if (all[0] !== 1) throw new Error('paper logs start with term 1 at index 1');
  return all.slice(1);
}

describe('§5.3 log replication', () => {
  it('the leader appends a proposal and replicates it to every follower', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    for (const id of ['a', 'b', 'c']) {
      const last = c.log(id).at(-1);
      expect(last).toMatchObject({ index: 3, term: 2, kind: 'normal' });
      expect(c.state(id)).toEqual(['x']);
      expect(c.status(id).commit).toBe(3);
    }
  });

  it('an entry commits once a majority holds it, not before', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c', 'd', 'e'] });
    c.elect('a');
    c.isolate('d');
    c.isolate('e');
    c.propose('a', 'x');
    c.stabilize(); // a, b, c: three of five
    expect(c.status('a').commit).toBe(3);
    for (const id of ['a', 'b', 'c']) expect(c.state(id)).toEqual(['x']);
    for (const id of ['d', 'e']) expect(c.state(id)).toEqual([]);

    c.isolate('c');
    c.propose('a', 'y');
    c.stabilize(); // a, b: two of five
    expect(c.log('b').at(-1)).toMatchObject({ index: 4, term: 2 });
    expect(c.status('a').commit).toBe(3);
    for (const id of ['a', 'b', 'c', 'd', 'e']) expect(c.state(id)).not.toContain('y');

    c.recover();
    c.tickUntil(() => c.status('a').commit === 4, 5);
    c.tickUntil(() => ['a', 'b', 'c', 'd', 'e'].every((id) => c.state(id).length === 2), 5);
    for (const id of ['a', 'b', 'c', 'd', 'e']) expect(c.state(id)).toEqual(['x', 'y']);
  });

  it('every server applies the committed entries in log order, each once', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    const want: string[] = [];
    for (let i = 0; i < 20; i++) {
      want.push(`p${i}`);
      c.propose('a', `p${i}`);
      if (i % 3 === 0) c.deliver(); // interleave proposals with replication
    }
    c.stabilize();
    for (const id of ['a', 'b', 'c']) {
      expect(c.state(id)).toEqual(want);
      expect(c.status(id)).toMatchObject({ commit: 22, applied: 22 });
      // The harness also refuses any applied index that is not the previous one plus one.
      expect(c.peer(id).applied.map((e) => e.index)).toEqual(Array.from({ length: 21 }, (_, i) => i + 2));
    }
  });

  describe('Figure 7: the leader of term 8 repairs every follower log to its own', () => {
    const leaderLog = '1 1 1 4 4 5 5 6 6 6';
    it.each([
      ['(a) missing entries', '1 1 1 4 4 5 5 6 6'],
      ['(b) missing many entries', '1 1 1 4'],
      ['(c) an extra uncommitted entry', '1 1 1 4 4 5 5 6 6 6 6'],
      ['(d) extra entries of term 7', '1 1 1 4 4 5 5 6 6 6 7 7'],
      ['(e) extra entries of term 4, missing others', '1 1 1 4 4 4 4'],
      ['(f) entries of terms 2 and 3 it never had', '1 1 1 2 2 2 3 3 3 3 3'],
    ])('%s', (_name, followerLog) => {
      // c holds the leader's log so a can win even when b's log is the more up-to-date one.
      const c = new Cluster({
        voters: ['a', 'b', 'c'],
        logs: { a: paperLog(leaderLog), b: paperLog(followerLog), c: paperLog(leaderLog) },
        hardStates: { a: { term: 7 }, b: { term: 7 }, c: { term: 7 } },
      });
      c.elect('a');
      expect(c.status('a').term).toBe(8);
      c.stabilize();
      const want = [...paperLog(leaderLog), 8]; // and a's no-op of term 8 at index 11
      for (const id of ['a', 'b', 'c']) {
        expect(c.terms(id)).toEqual(want);
        expect(c.status(id).commit).toBe(11);
      }
      expect(c.log('b')).toEqual(c.log('a'));
      expect(c.state('b')).toEqual(c.state('a'));
      expect(c.state('b')).toEqual(['2@1', '3@1', '4@4', '5@4', '6@5', '7@5', '8@6', '9@6', '10@6']);
    });
  });

  describe('fast backtracking: a diverging or lagging follower is repaired in a few round trips', () => {
    const repeat = (term: number, n: number): number[] => Array.from({ length: n }, () => term);

    it('a follower with 60 conflicting entries of an old term', () => {
      const c = new Cluster({
        voters: ['a', 'b', 'c'],
        logs: {
          a: [...repeat(2, 30), ...repeat(4, 30)],
          b: [...repeat(2, 30), ...repeat(3, 60)], // longer, but its last term is older
          c: [...repeat(2, 30), ...repeat(4, 30)],
        },
      });
      c.elect('a');
      c.stabilize();
      const rejected = c.messages({ from: 'b', to: 'a', type: 'appResp', reject: true });
      expect(rejected.length).toBeGreaterThan(0);
      expect(rejected.length).toBeLessThanOrEqual(2); // one per entry would be 30
      expect(c.log('b')).toEqual(c.log('a'));
      expect(c.status('b').commit).toBe(62);
    });

    it('a follower missing 100 entries', () => {
      const c = new Cluster({
        voters: ['a', 'b', 'c'],
        logs: { a: repeat(2, 100), c: repeat(2, 100) },
      });
      c.elect('a');
      c.stabilize();
      const rejected = c.messages({ from: 'b', to: 'a', type: 'appResp', reject: true });
      expect(rejected.length).toBeLessThanOrEqual(2);
      expect(c.log('b')).toEqual(c.log('a'));
      expect(c.state('b')).toHaveLength(100);
    });
  });
});
