// The checkers themselves, on hand-made histories: each must report the violation it exists for
// and accept a correct history, or a passing simulation would mean nothing.

import { describe, expect, it } from 'vitest';
import { CheckerSet } from './checkers/checker-set.ts';
import { Violation, type LogView, type SimEvent } from './checkers/events.ts';

/** A log view over a fixed list of terms, index 1 first. */
function logOf(terms: number[]): LogView {
  return { termAt: (i) => terms[i - 1], lastIndex: () => terms.length };
}

function violationOf(events: SimEvent[]): Violation | undefined {
  const checkers = new CheckerSet();
  try {
    for (const e of events) checkers.observe(e);
  } catch (e) {
    if (e instanceof Violation) return e;
    throw e;
  }
  return undefined;
}

const apply = (node: string, index: number, digest: string, stateDigest: string): SimEvent =>
  ({ kind: 'apply', node, life: 0, index, digest, stateDigest, persistedCommit: index });

describe('checkers', () => {
  it('accept a correct history', () => {
    expect(violationOf([
      { kind: 'role', node: 'a', life: 0, term: 2, role: 'leader' },
      { kind: 'append', node: 'a', entries: [{ index: 2, term: 2, prevTerm: 1, digest: 'x' }] },
      { kind: 'append', node: 'b', entries: [{ index: 2, term: 2, prevTerm: 1, digest: 'x' }] },
      { kind: 'settled', node: 'a', life: 0, term: 2, role: 'leader', commit: 2, log: logOf([1, 2]) },
      { kind: 'restore', node: 'a', life: 0, index: 1, stateDigest: 's1', reason: 'boot' },
      { kind: 'restore', node: 'b', life: 0, index: 1, stateDigest: 's1', reason: 'boot' },
      apply('a', 2, 'x', 's2'),
      apply('b', 2, 'x', 's2'),
      { kind: 'role', node: 'b', life: 0, term: 3, role: 'leader' },
      { kind: 'settled', node: 'b', life: 0, term: 3, role: 'leader', commit: 2, log: logOf([1, 2]) },
    ])).toBeUndefined();
  });

  it('report two leaders in one term', () => {
    const v = violationOf([
      { kind: 'role', node: 'a', life: 0, term: 5, role: 'leader' },
      { kind: 'role', node: 'b', life: 0, term: 5, role: 'leader' },
    ]);
    expect(v?.checker).toBe('election-safety');
  });

  it('report divergent applied entries', () => {
    const v = violationOf([
      { kind: 'restore', node: 'a', life: 0, index: 1, stateDigest: 's1', reason: 'boot' },
      { kind: 'restore', node: 'b', life: 0, index: 1, stateDigest: 's1', reason: 'boot' },
      apply('a', 2, 'x', 's2'),
      apply('b', 2, 'y', 's2b'),
    ]);
    expect(v?.checker).toBe('state-machine-safety');
  });

  it('report an applied gap', () => {
    const v = violationOf([
      { kind: 'restore', node: 'a', life: 0, index: 1, stateDigest: 's1', reason: 'boot' },
      apply('a', 3, 'x', 's3'),
    ]);
    expect(v?.checker).toBe('state-machine-safety');
  });

  it('report logs that match at an entry but differ before it', () => {
    const v = violationOf([
      { kind: 'append', node: 'a', entries: [{ index: 3, term: 2, prevTerm: 1, digest: 'x' }] },
      { kind: 'append', node: 'b', entries: [{ index: 3, term: 2, prevTerm: 2, digest: 'x' }] },
    ]);
    expect(v?.checker).toBe('log-matching');
  });

  it('report a commit index that goes back within a life', () => {
    const v = violationOf([
      { kind: 'settled', node: 'a', life: 0, term: 2, role: 'follower', commit: 3, log: logOf([1, 2, 2]) },
      { kind: 'settled', node: 'a', life: 0, term: 2, role: 'follower', commit: 2, log: logOf([1, 2, 2]) },
    ]);
    expect(v?.checker).toBe('commit-monotonic');
  });

  it('report a committed entry that changed', () => {
    const v = violationOf([
      { kind: 'settled', node: 'a', life: 0, term: 2, role: 'follower', commit: 3, log: logOf([1, 2, 2]) },
      { kind: 'settled', node: 'b', life: 0, term: 3, role: 'follower', commit: 3, log: logOf([1, 2, 3]) },
    ]);
    expect(v?.checker).toBe('commit-monotonic');
  });

  it('report a leader that lacks a committed entry', () => {
    const v = violationOf([
      { kind: 'settled', node: 'a', life: 0, term: 2, role: 'leader', commit: 3, log: logOf([1, 2, 2]) },
      { kind: 'settled', node: 'b', life: 0, term: 3, role: 'leader', commit: 1, log: logOf([1, 2]) },
    ]);
    expect(v?.checker).toBe('leader-completeness');
  });

  it('report a lost acknowledged write', () => {
    const checkers = new CheckerSet();
    // Seen alone, without the state machine checker, which would also object.
    const acks = checkers.acks;
    acks.observe({ kind: 'ack', node: 'a', index: 4, digest: 'w', payload: 'p1' });
    expect(() => acks.observe(apply('b', 4, 'other', 's'))).toThrow(/acknowledged/);
  });

  it('report a stale read', () => {
    const v = violationOf([
      { kind: 'ack', node: 'a', index: 7, digest: 'w', payload: 'p1' },
      { kind: 'readIssue', node: 'b', context: 'r1' },
      { kind: 'readState', node: 'b', context: 'r1', index: 6 },
    ]);
    expect(v?.checker).toBe('read-linearizability');
  });

  it('report a vote changed within a term, and a new term written without sync', () => {
    expect(violationOf([
      { kind: 'hardState', node: 'a', life: 0, term: 4, vote: 'b', commit: 0 },
      { kind: 'boot', node: 'a', life: 1, term: 4, vote: 'c', commit: 0 },
    ])?.checker).toBe('term-and-vote');
    expect(violationOf([
      { kind: 'ready', node: 'a', mustSync: false, entries: 0, snapshot: false, termOrVoteChanged: true },
    ])?.checker).toBe('ready-contract');
  });
});
