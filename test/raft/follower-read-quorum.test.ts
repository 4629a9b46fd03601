// followerReadQuorum: a follower's ReadIndex is answered by the leader at once, without a
// heartbeat round, when the leader and that follower are a quorum of a settled configuration.
// The follower taking the answer in a term no lower than its own is the other half of the
// quorum (docs/raft.md). Two hops instead of four.

import { describe, expect, it } from 'vitest';
import { Cluster, type NodeConfig } from './harness.ts';
import type { Message } from '../../src/raft/types.ts';

function elected(voters: string[], config: NodeConfig = {}, learners: string[] = []): Cluster {
  const c = new Cluster({ voters, learners, config: { followerReadQuorum: true, ...config } });
  c.elect(voters[0] as string);
  c.stabilize();
  c.clearTrace();
  return c;
}

const readHeartbeats = (c: Cluster): Message[] => c.messages({ type: 'heartbeat' }).filter((m) => m.context !== undefined);

/** `id` asks for a read; the request reaches the leader a. */
function ask(c: Cluster, id: string, context: string): void {
  c.readIndex(id, context);
  const [req] = c.deliver({ type: 'readIndex' });
  expect(req?.from).toBe(id);
}

/** The read was confirmed the usual way: a heartbeat round, then the answer. */
function expectHeartbeatRound(c: Cluster, id: string, context: string): void {
  expect(c.messages({ type: 'readIndexResp' })).toEqual([]);
  expect(readHeartbeats(c).length).toBeGreaterThan(0);
  c.stabilize();
  expect(c.peer(id).readStates.map((r) => r.context)).toEqual([context]);
}

describe('followerReadQuorum', () => {
  it('the leader answers a follower\'s read at once with its commit index, without a heartbeat round', () => {
    const c = elected(['a', 'b', 'c']);
    c.propose('a', 'x');
    c.stabilize();
    c.clearTrace();
    ask(c, 'b', 'r1');
    const answers = c.messages({ type: 'readIndexResp' });
    expect(answers.map((m) => [m.to, m.index, m.context])).toEqual([['b', c.status('a').commit, 'r1']]);
    expect(readHeartbeats(c)).toEqual([]);
    c.deliver({ type: 'readIndexResp' });
    expect(c.peer('b').readStates).toEqual([{ index: c.status('a').commit, context: 'r1' }]);
    // Nothing else was sent for it: no node was asked anything.
    c.stabilize();
    expect(c.messages({ type: ['heartbeat', 'heartbeatResp'] })).toEqual([]);
  });

  it('the index covers a write another follower committed on a \'persisted\' notice', () => {
    const c = elected(['a', 'b', 'c'], { commitNotice: 'proposers', followerCommit: true });
    c.propose('c', 'x');
    c.deliver({ type: 'prop' });
    c.deliver({ to: 'c' });
    const written = c.status('c').commit;
    expect(c.state('c')).toEqual(['x']);
    expect(c.status('a').commit).toBeLessThan(written);
    // b holds the entries too (its acknowledgement has not reached a).
    c.deliver({ type: 'app', to: 'b' });
    expect(c.status('b').lastIndex).toBe(written);
    ask(c, 'b', 'r1');
    c.deliver({ type: 'readIndexResp' });
    expect(c.peer('b').readStates.at(-1)?.index).toBeGreaterThanOrEqual(written);
    // But b does not commit that far on the answer: the notice named entries that commit only
    // once c holds them durably, which b cannot know; it commits as far as a has.
    expect(c.status('b').commit).toBe(c.status('a').commit);
    expect(c.status('b').commit).toBeLessThan(written);
  });

  it('the answer brings the leader\'s commit index, so the follower can serve the read without waiting for a heartbeat', () => {
    const c = elected(['a', 'b', 'c'], { commitNotice: 'proposers' });
    c.propose('a', 'x');
    c.stabilize();
    // With commit notices only to proposers, b holds the entry but has not heard it committed.
    expect(c.status('a').commit).toBe(c.status('a').lastIndex);
    expect(c.status('b').lastIndex).toBe(c.status('a').lastIndex);
    expect(c.status('b').commit).toBeLessThan(c.status('a').commit);
    ask(c, 'b', 'r1');
    c.deliver({ type: 'readIndexResp' });
    expect(c.peer('b').readStates.at(-1)?.index).toBe(c.status('a').commit);
    expect(c.status('b').commit).toBe(c.status('a').commit);
    expect(c.state('b')).toEqual(['x']);
  });

  it('an answer that reaches the follower after it moved to a later term is dropped', () => {
    const c = elected(['a', 'b', 'c']);
    ask(c, 'b', 'r1');
    const [answer] = c.dropQueued({ type: 'readIndexResp' });
    c.transferLeadership('a', 'c');
    c.stabilize();
    expect(c.status('c').role).toBe('leader');
    expect(c.status('b').term).toBeGreaterThan(answer?.term ?? 0);
    c.node('b').step(answer as Message);
    c.flush('b');
    expect(c.peer('b').readStates).toEqual([]);
  });

  it('a read that arrives before the leader committed an entry of its term waits for one, then is answered at once', () => {
    const c = elected(['a', 'b', 'c']);
    // c takes over; its no-op entry is held back, so nothing of its term is committed yet.
    c.transferLeadership('a', 'c');
    c.deliver({ type: 'timeoutNow' });
    c.deliver({ type: ['vote', 'preVote'] });
    c.deliver({ type: ['voteResp', 'preVoteResp'] });
    expect(c.status('c').role).toBe('leader');
    c.drop({ type: 'app', from: 'c' });
    c.dropQueued({ type: 'app' });
    // A heartbeat tells b who leads.
    c.tick('c');
    c.deliver({ type: 'heartbeat' });
    expect(c.status('b').leader).toBe('c');
    expect(c.status('c').commit).toBeLessThan(c.status('c').lastIndex);
    c.clearTrace();
    c.readIndex('b', 'r1');
    c.deliver({ type: 'readIndex' });
    expect(c.messages({ type: 'readIndexResp' })).toEqual([]);
    c.recover();
    c.tickAll(2);
    c.stabilize();
    expect(c.peer('b').readStates.map((r) => r.context)).toEqual(['r1']);
    expect(c.peer('b').readStates[0]?.index).toBe(c.status('c').commit);
    expect(readHeartbeats(c)).toEqual([]);
  });

  it('with five voters the leader and one follower are no quorum: a heartbeat round as before', () => {
    const c = elected(['a', 'b', 'c', 'd', 'e']);
    ask(c, 'b', 'r1');
    expectHeartbeatRound(c, 'b', 'r1');
  });

  it('a learner\'s read goes through a heartbeat round', () => {
    const c = elected(['a', 'b', 'c'], {}, ['l']);
    ask(c, 'l', 'r1');
    expectHeartbeatRound(c, 'l', 'r1');
  });

  it('a heartbeat round while a membership change is pending on the leader', () => {
    const c = elected(['a', 'b', 'c']);
    c.proposeConfChange('a', { changes: [{ type: 'addLearner', node: 'd' }] });
    ask(c, 'b', 'r1');
    expectHeartbeatRound(c, 'b', 'r1');
  });

  it('without the option, a heartbeat round', () => {
    const c = elected(['a', 'b', 'c'], { followerReadQuorum: false });
    ask(c, 'b', 'r1');
    expectHeartbeatRound(c, 'b', 'r1');
  });

  it('the leader\'s own reads still need a follower\'s answer', () => {
    const c = elected(['a', 'b', 'c']);
    c.readIndex('a', 'r1');
    expect(c.peer('a').readStates).toEqual([]);
    expect(readHeartbeats(c).length).toBe(2);
    c.stabilize();
    expect(c.peer('a').readStates.map((r) => r.context)).toEqual(['r1']);
  });
});
