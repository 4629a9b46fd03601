// Flow control toward each follower (design.md: "per-follower progress (probe / replicate /
// snapshot) with a bounded number of in-flight appends and bounded bytes per message"). Not in
// the paper, which leaves batching and pipelining to the implementation; bounded so that a slow
// or silent follower costs the leader bounded memory and bandwidth.

import { describe, expect, it } from 'vitest';
import { entryBytes } from '../../src/raft/util.ts';
import { Cluster } from './harness.ts';

const et = 10;

describe('flow control', () => {
  it('never more than appendsInflightMax unacknowledged appends to a follower in replicate state', () => {
    const c = new Cluster({ voters: ['a', 'b', 'c'], config: { appendsInflightMax: 3 } });
    c.elect('a');
    expect(c.status('a').progress?.['c']?.state).toBe('replicate');
    c.drop({ from: 'c', to: 'a' }); // c's acknowledgements are lost
    c.clearTrace();
    const want: string[] = [];
    for (let i = 0; i < 10; i++) {
      want.push(`p${i}`);
      c.propose('a', `p${i}`);
      c.stabilize(); // one append per proposal, while the window lasts
    }
    const toC = c.messages({ from: 'a', to: 'c', type: 'app' }).filter((m) => m.entries.length > 0);
    expect(toC).toHaveLength(3);
    expect(c.status('a').progress?.['c']?.inflight).toBeLessThanOrEqual(3);
    // b is not held back by c.
    expect(c.messages({ from: 'a', to: 'b', type: 'app' }).filter((m) => m.entries.length > 0)).toHaveLength(10);
    expect(c.state('b')).toEqual(want);
    expect(c.status('a').commit).toBe(12);

    c.recover();
    c.tickUntil(() => c.state('c').length === 10, 3 * et);
    expect(c.state('c')).toEqual(want);
  });

  it('never more than appendBytesMax bytes of entries per append message (but at least one entry)', () => {
    const bytesMax = 100;
    const c = new Cluster({ voters: ['a', 'b', 'c'], config: { appendBytesMax: bytesMax } });
    c.elect('a');
    c.isolate('c');
    const want: string[] = [];
    for (let i = 0; i < 10; i++) want.push(`p${i}`.padEnd(30, '.')); // 46 bytes each as counted
    for (const p of want) c.propose('a', p);
    c.propose('a', 'big'.padEnd(300, '!')); // alone over the limit: still sent, alone
    want.push('big'.padEnd(300, '!'));
    c.stabilize();

    c.recover();
    c.clearTrace();
    c.tickUntil(() => c.state('c').length === want.length, 5 * et);
    expect(c.state('c')).toEqual(want);
    const toC = c.messages({ from: 'a', to: 'c', type: 'app' }).filter((m) => m.entries.length > 0);
    for (const m of toC) {
      const size = m.entries.reduce((n, e) => n + entryBytes(e), 0);
      expect(m.entries.length === 1 || size <= bytesMax).toBe(true);
    }
    expect(Math.max(...toC.map((m) => m.entries.length))).toBe(2); // batched, within the bound
    expect(toC.length).toBeGreaterThanOrEqual(6);
  });
});
