// commitNotice: which followers are told at once that the commit index moved. 'all' (the Raft
// paper, etcd): an empty append to every follower, each answered. 'proposers': only to a
// follower that forwarded a proposal now committed (it answers its client when it applies it);
// the others learn the commit index from the next append or heartbeat.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

const emptyAppend = (m: { type: string; entries: readonly unknown[] }): boolean => m.type === 'app' && m.entries.length === 0;

function elected(commitNotice: 'all' | 'proposers'): Cluster {
  const c = new Cluster({ voters: ['a', 'b', 'c'], config: { commitNotice } });
  c.elect('a');
  c.stabilize();
  c.clearTrace();
  return c;
}

describe('commitNotice', () => {
  it("'all': a commit sends every follower an empty append, and each answers it", () => {
    const c = elected('all');
    c.propose('a', 'x');
    c.stabilize();
    expect(c.messages({ from: 'a' }).filter(emptyAppend).map((m) => m.to).sort()).toEqual(['b', 'c']);
    for (const id of ['b', 'c']) expect(c.status(id).commit).toBe(c.status('a').commit);
  });

  it("'proposers': a leader's own write is committed without an empty append; followers learn it from the next message", () => {
    const c = elected('proposers');
    c.propose('a', 'x');
    c.stabilize();
    expect(c.messages().filter(emptyAppend)).toEqual([]);
    expect(c.messages({ type: 'appResp' })).toHaveLength(2); // one answer per follower, for the entry
    const committed = c.status('a').commit;
    expect(c.state('a')).toEqual(['x']);
    for (const id of ['b', 'c']) expect(c.status(id).commit).toBeLessThan(committed);
    // The next write's append carries the commit index.
    c.propose('a', 'y');
    c.deliver({ type: 'app' });
    for (const id of ['b', 'c']) expect(c.state(id)).toEqual(['x']);
    // And with no more writes, the heartbeat does.
    c.stabilize();
    c.tick('a', 1);
    c.stabilize();
    for (const id of ['b', 'c']) expect(c.state(id)).toEqual(['x', 'y']);
  });

  it("'proposers': a follower that forwarded a proposal is told of its commit at once, the other follower is not", () => {
    const c = elected('proposers');
    c.propose('b', 'via-b');
    c.stabilize();
    const notices = c.messages({ from: 'a' }).filter(emptyAppend);
    expect(notices.map((m) => m.to)).toEqual(['b']);
    expect(c.state('b')).toEqual(['via-b']);
    expect(c.state('c')).toEqual([]);
    expect(c.status('b').commit).toBe(c.status('a').commit);
  });

  it("'proposers': a linearizable read on a lagging follower still sees every committed write", () => {
    const c = elected('proposers');
    c.propose('a', 'x');
    c.stabilize();
    expect(c.state('c')).toEqual([]);
    c.readIndex('c', 'r1');
    c.stabilize();
    const read = c.peer('c').readStates.at(-1);
    expect(read?.context).toBe('r1');
    expect(read?.index).toBe(c.status('a').commit);
    // The heartbeat round of the read carried the commit index: c has applied up to it.
    expect(c.status('c').commit).toBeGreaterThanOrEqual(read?.index ?? Infinity);
    expect(c.state('c')).toEqual(['x']);
  });
});
