// The autopilot's decision (src/node/autopilot.ts), as a table: who is promoted, when, and never
// a promotion that leaves the cluster tolerating fewer failed voters.

import { describe, expect, it } from 'vitest';
import { autopilotDecision, failureTolerance, promotionKeepsTolerance, type AutopilotInput } from '../../src/node/autopilot.ts';

const base: AutopilotInput = { nowMs: 100_000, stabilizationMs: 10_000, voters: ['a'], healthyVoters: ['a'], candidates: [], healthySince: new Map() };

describe('autopilot', () => {
  it('tolerates healthy voters minus a quorum', () => {
    expect([[1, 1], [2, 2], [3, 3], [3, 2], [4, 4], [5, 5], [5, 3]].map(([v, h]) => failureTolerance(v ?? 0, h ?? 0))).toEqual([0, 0, 1, 0, 1, 2, 0]);
  });

  it('starts the clock when a candidate turns healthy, and promotes after the stabilisation time', () => {
    const first = autopilotDecision({ ...base, candidates: [{ id: 'b', healthy: true }] });
    expect(first.promote).toBeNull();
    expect(first.healthySince.get('b')).toBe(100_000);
    const early = autopilotDecision({ ...base, nowMs: 109_999, candidates: [{ id: 'b', healthy: true }], healthySince: first.healthySince });
    expect(early.promote).toBeNull();
    const due = autopilotDecision({ ...base, nowMs: 110_000, candidates: [{ id: 'b', healthy: true }], healthySince: first.healthySince });
    expect(due.promote).toBe('b');
  });

  it('starts over when a candidate stops being healthy', () => {
    const since = new Map([['b', 50_000]]);
    const lapse = autopilotDecision({ ...base, candidates: [{ id: 'b', healthy: false }], healthySince: since });
    expect(lapse.promote).toBeNull();
    expect(lapse.healthySince.has('b')).toBe(false);
  });

  it('promotes one at a time, the longest healthy first (then by id)', () => {
    const since = new Map([['c', 10_000], ['b', 20_000], ['d', 10_000]]);
    const d = autopilotDecision({ ...base, candidates: ['b', 'c', 'd'].map((id) => ({ id, healthy: true })), healthySince: since });
    expect(d.promote).toBe('c');
  });

  it('never promotes when, should the new voter fail, the cluster would tolerate less than before', () => {
    const ready = { candidates: [{ id: 'e', healthy: true }], healthySince: new Map([['e', 0]]) };
    const cases: Array<[voters: string[], healthy: string[], promoted: boolean]> = [
      [['a'], ['a'], true], // 1 -> 2: the only way to grow
      [['a', 'b'], ['a', 'b'], true], // 2 -> 3
      [['a', 'b', 'c'], ['a', 'b', 'c'], true], // 3 -> 4: still tolerates one failure if the new one fails
      [['a', 'b', 'c'], ['a', 'b'], false], // one down: a fourth that fails would cost the quorum
      [['a', 'b', 'c', 'd', 'e2'], ['a', 'b', 'c'], false], // two of five down
      [['a', 'b', 'c', 'd'], ['a', 'b', 'c', 'd'], true],
    ];
    for (const [voters, healthy, promoted] of cases) {
      expect(autopilotDecision({ ...base, voters, healthyVoters: healthy, ...ready }).promote, `${voters.length} voters, ${healthy.length} healthy`).toBe(promoted ? 'e' : null);
      expect(promotionKeepsTolerance(voters.length, healthy.length)).toBe(promoted);
    }
  });
});
