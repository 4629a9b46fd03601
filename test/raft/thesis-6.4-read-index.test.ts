// Ongaro's thesis §6.4, "Processing read-only queries more efficiently" (ReadIndex): the leader
// records its commit index as the read index, but only once it has committed an entry of its
// own term (its no-op), and only after a round of heartbeats answered by a majority confirms it
// is still the leader. A follower asks the leader for the read index and serves the read
// itself once it has applied that far.

import { describe, expect, it } from 'vitest';
import { Cluster } from './harness.ts';

describe('§6.4 ReadIndex', () => {
  it('the leader answers a read only after a majority has acknowledged its heartbeat', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    const commit = c.status('a').commit;
    expect(commit).toBe(3);

    c.readIndex('a', 'r1');
    expect(c.peer('a').readStates).toEqual([]);
    const beats = c.deliver({ from: 'a', type: 'heartbeat' });
    expect(beats.map((m) => m.to).sort()).toEqual(['b', 'c']);
    expect(c.peer('a').readStates).toEqual([]); // the answers are still on the way
    c.deliver({ from: 'b', to: 'a', type: 'heartbeatResp' }); // a and b: a majority of three
    expect(c.peer('a').readStates).toEqual([{ index: commit, context: 'r1' }]);
    c.stabilize();
    expect(c.peer('a').readStates).toHaveLength(1);
  });

  it('a leader cut off from the majority never answers', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.isolate('a');
    c.readIndex('a', 'r1');
    c.stabilize();
    c.tickAll(5);
    expect(c.peer('a').readStates).toEqual([]);
  });

  it('a new leader answers no read before the no-op of its term commits', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.drop({ type: 'app' }); // the no-op cannot be replicated
    c.elect('a');
    expect(c.status('a').commit).toBe(1);
    c.readIndex('a', 'r1');
    c.stabilize();
    // Heartbeats flow and are answered, yet commit 1 is of term 1: not a safe read index.
    c.tickAll(3);
    expect(c.messages({ to: 'a', type: 'heartbeatResp' }).length).toBeGreaterThan(0);
    expect(c.status('a')).toMatchObject({ role: 'leader', commit: 1 });
    expect(c.peer('a').readStates).toEqual([]);

    c.recover();
    c.tickUntil(() => c.peer('a').readStates.length > 0, 5);
    expect(c.status('a').commit).toBe(2);
    expect(c.peer('a').readStates).toEqual([{ index: 2, context: 'r1' }]);
  });

  it('a follower obtains the read index from the leader', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.propose('a', 'x');
    c.stabilize();
    c.clearTrace();
    c.readIndex('b', 'rb');
    expect(c.queue).toEqual([expect.objectContaining({ type: 'readIndex', from: 'b', to: 'a' })]);
    c.stabilize();
    expect(c.peer('b').readStates).toEqual([{ index: 3, context: 'rb' }]);
    expect(c.peer('a').readStates).toEqual([]);
    // The leader confirmed its leadership before answering.
    const confirmed = c.sent.findIndex((m) => m.type === 'heartbeatResp' && m.to === 'a');
    const answered = c.sent.findIndex((m) => m.type === 'readIndexResp' && m.to === 'b');
    expect(confirmed).toBeGreaterThanOrEqual(0);
    expect(answered).toBeGreaterThan(confirmed);
    expect(c.status('b').applied).toBeGreaterThanOrEqual(3);
  });

  it('a single-node leader answers at once: it is its own majority', () => {
    const c = new Cluster({ voters: ['a'] });
    c.campaign('a');
    c.propose('a', 'x');
    c.stabilize();
    c.readIndex('a', 'solo');
    expect(c.peer('a').readStates).toEqual([{ index: 3, context: 'solo' }]);
    expect(c.sent).toEqual([]);
  });

  it('several reads, each answered with its own context', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'] });
    c.elect('a');
    c.readIndex('a', 'r1');
    c.readIndex('c', 'r2');
    c.stabilize();
    c.propose('a', 'x');
    c.stabilize();
    c.readIndex('a', 'r3');
    c.stabilize();
    expect(c.peer('a').readStates).toEqual([{ index: 2, context: 'r1' }, { index: 3, context: 'r3' }]);
    expect(c.peer('c').readStates).toEqual([{ index: 2, context: 'r2' }]);
  });
});
