// The Raft log as the core sees it: what storage holds (read-only here) followed by the unstable
// tail, with the commit and applied indexes.

import { assert } from '../base/assert.ts';
import { Unstable } from './log-unstable.ts';
import { CompactedError, type LogStorage } from './storage.ts';
import type { Entry, Snapshot } from './types.ts';
import { limitBytes } from './util.ts';

export class RaftLog {
  readonly unstable: Unstable;
  // Invariant: firstIndex() - 1 <= applied <= committed <= lastIndex().
  committed: number;
  applied: number;

  constructor(readonly storage: LogStorage, private readonly committedBytesMax: number) {
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    this.unstable = new Unstable(last + 1);
    this.committed = first - 1;
    this.applied = first - 1;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  /** The term of entry `index`. Throws CompactedError below the first available index. */
  term(index: number): number {
    const dummy = this.firstIndex() - 1;
    if (index < dummy) throw new CompactedError(index, dummy + 1);
    assert(index <= this.lastIndex(), `term(${index}) beyond last index ${this.lastIndex()}`);
    return this.unstable.maybeTerm(index) ?? this.storage.term(index);
  }

  /** The term of `index`, or undefined if it is compacted or beyond the end. */
  termOrUndefined(index: number): number | undefined {
    if (index < this.firstIndex() - 1 || index > this.lastIndex()) return undefined;
    return this.term(index);
  }

  lastTerm(): number {
    return this.term(this.lastIndex());
  }

  matchTerm(index: number, term: number): boolean {
    return this.termOrUndefined(index) === term;
  }

  isUpToDate(lastIndex: number, term: number): boolean {
    const myTerm = this.lastTerm();
    return term > myTerm || (term === myTerm && lastIndex >= this.lastIndex());
  }

  /** Entries [lo, lastIndex], at most `bytesMax` bytes but at least one entry. */
  entries(lo: number, bytesMax: number): Entry[] {
    if (lo > this.lastIndex()) return [];
    return this.slice(lo, this.lastIndex() + 1, bytesMax);
  }

  /** Entries [lo, hi). Throws CompactedError if lo is compacted. */
  slice(lo: number, hi: number, bytesMax: number): Entry[] {
    assert(lo <= hi, `slice lo ${lo} > hi ${hi}`);
    const first = this.firstIndex();
    if (lo < first) throw new CompactedError(lo, first);
    assert(hi <= this.lastIndex() + 1, `slice hi ${hi} beyond last index ${this.lastIndex()}`);
    if (lo === hi) return [];
    const offset = this.unstable.offset;
    let ents: Entry[] = [];
    if (lo < offset) {
      ents = this.storage.entries(lo, Math.min(hi, offset), bytesMax);
      // Storage gave fewer than asked: the byte limit was reached.
      if (ents.length < Math.min(hi, offset) - lo) return ents;
    }
    if (hi > offset) {
      const tail = this.unstable.slice(Math.max(lo, offset), hi);
      ents = ents.length > 0 ? ents.concat(tail) : tail;
    }
    return limitBytes(ents, bytesMax);
  }

  /**
   * Appends `ents` after the entry (`index`, `logTerm`) if the log has it, truncating any
   * conflicting suffix, and raises the commit to min(`commit`, last new index). Returns the last
   * new index, or undefined if the log does not contain (`index`, `logTerm`).
   */
  maybeAppend(index: number, logTerm: number, commit: number, ents: readonly Entry[]): number | undefined {
    if (!this.matchTerm(index, logTerm)) return undefined;
    const lastNew = index + ents.length;
    const conflict = this.findConflict(ents);
    if (conflict !== 0) {
      assert(conflict > this.committed, `entry ${conflict} conflicts with committed entry (committed ${this.committed})`);
      this.append(ents.slice(conflict - (index + 1)));
    }
    this.commitTo(Math.min(commit, lastNew));
    return lastNew;
  }

  append(ents: readonly Entry[]): number {
    const first = ents[0];
    if (first === undefined) return this.lastIndex();
    assert(first.index - 1 >= this.committed, `append after ${first.index - 1} is below committed ${this.committed}`);
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  /** The index of the first entry that is new or conflicts with the log; 0 if none. */
  findConflict(ents: readonly Entry[]): number {
    for (const e of ents) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * The largest index at or below `index` whose term is at most `term`, with that term: the point
   * where the logs may agree. Used for the rejection hint that makes backtracking skip whole terms.
   */
  findConflictByTerm(index: number, term: number): { index: number; term: number } {
    for (; index > 0; index--) {
      const t = this.termOrUndefined(index);
      if (t === undefined) return { index, term: 0 };
      if (t <= term) return { index, term: t };
    }
    return { index: 0, term: 0 };
  }

  commitTo(index: number): void {
    if (this.committed >= index) return;
    assert(index <= this.lastIndex(), `commit ${index} beyond last index ${this.lastIndex()}`);
    this.committed = index;
  }

  /** Commits up to `index` only if that entry is of `term` (the leader's current term). */
  maybeCommit(index: number, term: number): boolean {
    if (index > this.committed && this.termOrUndefined(index) === term) {
      this.commitTo(index);
      return true;
    }
    return false;
  }

  appliedTo(index: number): void {
    if (index === 0) return;
    assert(index <= this.committed && index >= this.applied, `applied ${index} outside [${this.applied}, ${this.committed}]`);
    this.applied = index;
  }

  /** The last index the driver has made durable: 0 while a snapshot awaits its write. */
  stableIndex(): number {
    return this.unstable.snapshot === undefined ? this.unstable.offset - 1 : 0;
  }

  stableTo(index: number, term: number): void {
    this.unstable.stableTo(index, term);
  }

  stableSnapTo(index: number): void {
    this.unstable.stableSnapTo(index);
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  restore(snap: Snapshot): void {
    this.committed = snap.meta.index;
    this.unstable.restore(snap);
  }

  hasPendingSnapshot(): boolean {
    return this.unstable.snapshot !== undefined;
  }

  unstableEntries(): Entry[] {
    return this.unstable.entries;
  }

  /** Committed entries not yet applied; none while a snapshot is waiting to be applied. */
  nextCommittedEntries(): Entry[] {
    if (this.hasPendingSnapshot() || this.committed <= this.applied) return [];
    return this.slice(this.applied + 1, this.committed + 1, this.committedBytesMax);
  }

  hasNextCommittedEntries(): boolean {
    return !this.hasPendingSnapshot() && this.committed > this.applied;
  }
}
