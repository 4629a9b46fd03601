import { describe, expect, it } from 'vitest';
import { ProposalBook, type PendingProposal } from '../../src/node/proposals.ts';

function pending(reproposable = true): PendingProposal & { made: number[] } {
  const made: number[] = [];
  return {
    made,
    make: (term) => { made.push(term); return new Uint8Array([term]); },
    resolve: () => undefined,
    reject: () => undefined,
    timer: setTimeout(() => undefined, 0),
    stampedTerm: null,
    attempts: 0,
    reproposable,
  };
}

describe('the proposal book', () => {
  it('stamps queued proposals with the term they are stepped in, in order', () => {
    const book = new ProposalBook();
    const a = pending();
    const b = pending();
    book.add(1, a);
    book.add(2, b);
    expect(book.takeQueued(4).map((q) => q.seq)).toEqual([1, 2]);
    expect([a.stampedTerm, b.stampedTerm]).toEqual([4, 4]);
    expect(book.hasQueued()).toBe(false);
    expect(book.size).toBe(2);
  });

  it('queues again only reproposable proposals stamped before the applied term, once per term', () => {
    const book = new ProposalBook();
    const old = pending();
    const fixed = pending(false);
    const current = pending();
    book.add(1, old);
    book.add(2, fixed);
    book.takeQueued(3);
    book.add(3, current);
    book.takeQueued(4);
    expect(book.reproposeOlderThan(3)).toBe(false);
    expect(book.reproposeOlderThan(4)).toBe(true);
    expect(book.takeQueued(4).map((q) => q.seq)).toEqual([1]);
    expect(old.made).toEqual([3, 4]);
    expect(old.attempts).toBe(2);
    // Term 4 was scanned already: nothing new until a newer term is applied.
    expect(book.reproposeOlderThan(4)).toBe(false);
    expect(book.reproposeOlderThan(5)).toBe(true);
    expect(book.takeQueued(5).map((q) => q.seq).sort()).toEqual([1, 3]);
    expect(book.reproposed).toBe(3);
  });

  it('never proposes again a proposal in flight when a snapshot is installed (it may be inside)', () => {
    const book = new ProposalBook();
    const inFlight = pending();
    const queued = pending();
    book.add(1, inFlight);
    book.takeQueued(4);
    book.add(2, queued);
    book.snapshotInstalled();
    expect([inFlight.reproposable, queued.reproposable]).toEqual([false, true]);
    book.takeQueued(5);
    expect(book.reproposeOlderThan(6)).toBe(true);
    expect(book.takeQueued(6).map((q) => q.seq)).toEqual([2]);
  });

  it('scans again when a proposal is stamped below the last scanned term', () => {
    const book = new ProposalBook();
    expect(book.reproposeOlderThan(6)).toBe(false);
    book.add(1, pending());
    book.takeQueued(5);
    expect(book.reproposeOlderThan(6)).toBe(true);
  });

  it('holds refused proposals until a leader is known, and fails only those held for want of one too long', () => {
    const book = new ProposalBook();
    book.add(1, pending());
    book.add(2, pending());
    book.takeQueued(2);
    book.hold(1, 'noLeader', 1000);
    book.hold(2, 'transfer', 1000);
    expect(book.get(1)?.stampedTerm).toBeNull();
    // A held proposal is in no log: a scan does not queue it.
    expect(book.reproposeOlderThan(9)).toBe(false);
    expect(book.takeHeldLongerThan(1500, 1000)).toEqual([]);
    const failed = book.takeHeldLongerThan(2500, 1000);
    expect(failed).toHaveLength(1);
    expect(book.get(1)).toBeUndefined();
    expect(book.releaseHeld()).toBe(true);
    expect(book.releaseHeld()).toBe(false);
    expect(book.takeQueued(9).map((q) => q.seq)).toEqual([2]);
  });

  it('drains the proposals that cannot be proposed again, and everything on stop', () => {
    const book = new ProposalBook();
    book.add(1, pending(false));
    book.add(2, pending(true));
    expect(book.drainNotReproposable()).toHaveLength(1);
    expect(book.size).toBe(1);
    expect(book.drain()).toHaveLength(1);
    expect(book.size).toBe(0);
    expect(book.hasQueued()).toBe(false);
    expect(book.take(2)).toBeUndefined();
  });
});
