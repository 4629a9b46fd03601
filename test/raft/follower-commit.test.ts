// followerCommit: a follower that forwarded a proposal asks the leader for a 'persisted' notice,
// and commits the entries by itself once they are durable on it and on the leader, when the
// two are a quorum of a settled configuration. It saves the hop of the leader's commit notice.

import { describe, expect, it } from 'vitest';
import { Cluster, text, type NodeConfig } from './harness.ts';
import type { Message } from '../../src/raft/types.ts';

const emptyAppend = (m: Message): boolean => m.type === 'app' && m.entries.length === 0;

function elected(voters: string[], config: NodeConfig = {}): Cluster {
  const c = new Cluster({ voters, config: { commitNotice: 'proposers', followerCommit: true, ...config } });
  c.elect(voters[0] as string);
  c.stabilize();
  c.clearTrace();
  return c;
}

/** b forwards a proposal and the leader a appends it: the appends and a's notice are queued. */
function forwarded(c: Cluster, data: string): void {
  c.propose('b', data);
  const [prop] = c.deliver({ type: 'prop' });
  expect(prop?.context).toBe('persisted?');
}

/** b's forwarded write 'x' was answered the old way: no notice, one empty append from a. */
function expectCommitNoticeInstead(c: Cluster): void {
  expect(c.messages({ type: 'persisted' })).toEqual([]);
  expect(c.messages({ from: 'a', to: 'b' }).filter(emptyAppend)).toHaveLength(1);
  expect(c.state('b')).toEqual(['x']);
}

describe('followerCommit', () => {
  it('a follower commits its forwarded write on the leader\'s notice, before the leader hears any acknowledgement', () => {
    const c = elected(['a', 'b', 'c']);
    forwarded(c, 'via-b');
    const notices = c.messages({ type: 'persisted' });
    expect(notices.map((m) => m.to)).toEqual(['b']);
    expect(notices[0]?.index).toBe(c.status('a').lastIndex);
    // Only b hears anything: neither follower's acknowledgement reaches a.
    c.deliver({ to: 'b' });
    expect(c.state('b')).toEqual(['via-b']);
    expect(c.status('b').commit).toBe(c.status('a').lastIndex);
    expect(c.status('a').commit).toBeLessThan(c.status('a').lastIndex);
    expect(c.state('a')).toEqual([]);
    // The notice stood in for the commit notice: a sends b no empty append when it commits.
    c.stabilize();
    expect(c.state('a')).toEqual(['via-b']);
    expect(c.messages({ from: 'a', to: 'b' }).filter(emptyAppend)).toEqual([]);
  });

  it('commits only once the entries are durable on the follower too', () => {
    const c = elected(['a', 'b', 'c']);
    forwarded(c, 'x');
    const [app] = c.dropQueued({ type: 'app', to: 'b' });
    const [notice] = c.dropQueued({ type: 'persisted' });
    const b = c.node('b');
    b.step(notice as Message);
    b.step(app as Message);
    // Appended, not yet written: the notice alone does not commit.
    expect(b.status().lastIndex).toBe(c.status('a').lastIndex);
    expect(b.status().commit).toBeLessThan(b.status().lastIndex);
    const rd = b.ready();
    expect(rd.entries.map((e) => (e.kind === 'normal' ? text(e.data) : ''))).toContain('x');
    expect(rd.committedEntries.map((e) => e.index)).not.toContain(b.status().lastIndex);
    c.peer('b').storage.append(rd.entries);
    b.advance(rd); // the write is durable from here
    expect(b.status().commit).toBe(b.status().lastIndex);
    expect(b.ready().committedEntries.map((e) => (e.kind === 'normal' ? text(e.data) : ''))).toContain('x');
  });

  it('a notice that arrives before the entries commits nothing beyond what the follower holds', () => {
    const c = elected(['a', 'b', 'c']);
    forwarded(c, 'x');
    const [app] = c.dropQueued({ type: 'app', to: 'b' });
    c.deliver({ type: 'persisted' });
    expect(c.status('b').lastIndex).toBeLessThan(c.status('a').lastIndex);
    expect(c.status('b').commit).toBeLessThan(c.status('a').lastIndex);
    expect(c.state('b')).toEqual([]);
    c.node('b').step(app as Message);
    c.flush('b');
    expect(c.state('b')).toEqual(['x']);
  });

  it('with five voters the leader and one follower are no quorum: no notice, the commit notice as before', () => {
    const c = elected(['a', 'b', 'c', 'd', 'e']);
    forwarded(c, 'x');
    c.stabilize();
    expectCommitNoticeInstead(c);
  });

  it('no notice while a membership change is pending on the leader', () => {
    const c = elected(['a', 'b', 'c']);
    c.proposeConfChange('a', { changes: [{ type: 'addLearner', node: 'd' }] });
    forwarded(c, 'x');
    c.stabilize();
    expect(c.messages({ type: 'persisted' })).toEqual([]);
    expect(c.state('b')).toEqual(['x']);
  });

  it('a follower without followerCommit does not ask, and gets the commit notice', () => {
    const c = elected(['a', 'b', 'c'], { followerCommit: false });
    c.propose('b', 'x');
    const [prop] = c.deliver({ type: 'prop' });
    expect(prop?.context).toBeUndefined();
    c.stabilize();
    expectCommitNoticeInstead(c);
  });

  it('a notice from a leader of an older term is ignored', () => {
    const c = elected(['a', 'b', 'c']);
    forwarded(c, 'x');
    const [notice] = c.dropQueued({ type: 'persisted' });
    c.dropQueued();
    c.transferLeadership('a', 'c');
    c.stabilize();
    expect(c.status('c').role).toBe('leader');
    const commit = c.status('b').commit;
    c.node('b').step({ ...(notice as Message), index: c.status('b').lastIndex });
    c.flush('b');
    expect(c.status('b').commit).toBe(commit);
  });

  it('a read on the leader after a follower committed on a notice sees that write', () => {
    const c = elected(['a', 'b', 'c']);
    forwarded(c, 'x');
    c.deliver({ to: 'b' });
    const written = c.status('b').commit;
    expect(c.state('b')).toEqual(['x']);
    expect(c.status('a').commit).toBeLessThan(written);
    // The read's index is not the leader's commit index, which lags b's.
    c.readIndex('a', 'r1');
    c.stabilize();
    const read = c.peer('a').readStates.at(-1);
    expect(read?.context).toBe('r1');
    expect(read?.index).toBeGreaterThanOrEqual(written);
    expect(c.state('a')).toEqual(['x']);
  });
});
