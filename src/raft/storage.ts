// The read-only view of the durable log that the core reads from, and an in-memory
// implementation of it. The driver writes (append, applySnapshot, setHardState, compact); the
// core only reads. A durable store (src/storage/) keeps a MemoryStorage as its cache and
// writes through to disk, so the core's reads never wait on I/O.

import { assert } from '../base/assert.ts';
import type { ConfState, Entry, HardState, Snapshot } from './types.ts';
import { entryBytes, limitBytes } from './util.ts';

/** The requested index has been compacted away; the follower needs a snapshot. */
export class CompactedError extends Error {
  constructor(readonly index: number, readonly firstIndex: number) {
    super(`index ${index} is compacted (first index ${firstIndex})`);
    this.name = 'CompactedError';
  }
}

/** A snapshot is being prepared; try again later. */
export class SnapshotUnavailableError extends Error {
  constructor() {
    super('snapshot temporarily unavailable');
    this.name = 'SnapshotUnavailableError';
  }
}

export interface InitialState {
  hardState: HardState;
  confState: ConfState;
}

/**
 * What the core reads. Indexes in (snapshot index, lastIndex] are available; `term(i)` also
 * answers for the snapshot index itself.
 */
export interface LogStorage {
  initialState(): InitialState;
  /** Entries [lo, hi), at most `bytesMax` bytes (always at least one entry). */
  entries(lo: number, hi: number, bytesMax: number): Entry[];
  term(index: number): number;
  firstIndex(): number;
  lastIndex(): number;
  snapshot(): Snapshot;
}

export const emptyConfState = (): ConfState => ({
  voters: [], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false,
});

export const emptySnapshot = (): Snapshot => ({
  meta: { index: 0, term: 0, confState: emptyConfState() },
  data: new Uint8Array(0),
});

/**
 * The log held in memory. `ents[0]` is a dummy entry holding the index and term of the last
 * compacted entry (the snapshot's), so `term()` answers for it.
 */
export class MemoryStorage implements LogStorage {
  private hardState: HardState = { term: 0, vote: '', commit: 0 };
  private snap: Snapshot = emptySnapshot();
  // Invariant: ents.length >= 1; ents[i].index === ents[0].index + i.
  private ents: Entry[] = [{ kind: 'normal', term: 0, index: 0, data: new Uint8Array(0) }];

  initialState(): InitialState {
    return { hardState: { ...this.hardState }, confState: this.snap.meta.confState };
  }

  setHardState(hs: HardState): void {
    this.hardState = { ...hs };
  }

  hardStateNow(): HardState {
    return { ...this.hardState };
  }

  entries(lo: number, hi: number, bytesMax: number): Entry[] {
    const offset = this.offset();
    if (lo <= offset) throw new CompactedError(lo, offset + 1);
    assert(hi <= this.lastIndex() + 1, `entries hi ${hi} is out of bound last ${this.lastIndex()}`);
    assert(lo <= hi, `entries lo ${lo} > hi ${hi}`);
    return limitBytes(this.ents.slice(lo - offset, hi - offset), bytesMax);
  }

  term(index: number): number {
    const offset = this.offset();
    if (index < offset) throw new CompactedError(index, offset + 1);
    const e = this.ents[index - offset];
    if (e === undefined) throw new RangeError(`term(${index}) beyond last index ${this.lastIndex()}`);
    return e.term;
  }

  firstIndex(): number {
    return this.offset() + 1;
  }

  lastIndex(): number {
    return this.offset() + this.ents.length - 1;
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  /** Replaces the whole contents with a snapshot; older snapshots are ignored. */
  applySnapshot(snap: Snapshot): void {
    if (snap.meta.index <= this.snap.meta.index) return;
    this.snap = snap;
    this.ents = [{ kind: 'normal', term: snap.meta.term, index: snap.meta.index, data: new Uint8Array(0) }];
  }

  /**
   * Records a snapshot of the state machine at `index` (which must be applied). Does not compact;
   * call `compact()` for that.
   */
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Snapshot {
    if (index <= this.snap.meta.index) return this.snap;
    assert(index <= this.lastIndex(), `snapshot ${index} beyond last index ${this.lastIndex()}`);
    this.snap = { meta: { index, term: this.term(index), confState }, data };
    return this.snap;
  }

  /**
   * Puts other bytes under the current snapshot at `index`: none, once a durable copy lets them
   * leave memory, or the same bytes read back. False (and nothing changes) when the current
   * snapshot is no longer the one at `index`.
   */
  setSnapshotData(index: number, data: Uint8Array): boolean {
    if (this.snap.meta.index !== index) return false;
    this.snap = { meta: this.snap.meta, data };
    return true;
  }

  /** Discards entries up to and including `index`, which must not exceed the snapshot's index. */
  compact(index: number): void {
    const offset = this.offset();
    if (index <= offset) return;
    assert(index <= this.lastIndex(), `compact ${index} beyond last index ${this.lastIndex()}`);
    const e = this.ents[index - offset];
    assert(e !== undefined, 'compact: entry present');
    this.ents = [{ kind: 'normal', term: e.term, index: e.index, data: new Uint8Array(0) }, ...this.ents.slice(index - offset + 1)];
  }

  /** Appends entries, truncating any conflicting suffix. Entries must be contiguous. */
  append(entries: readonly Entry[]): void {
    const first = entries[0];
    if (first === undefined) return;
    const offset = this.offset();
    const last = first.index + entries.length - 1;
    if (last <= offset) return; // all compacted already
    const skip = Math.max(0, offset + 1 - first.index);
    const kept = entries.slice(skip);
    const start = kept[0];
    assert(start !== undefined, 'append: non-empty after skip');
    assert(start.index <= this.lastIndex() + 1, `append: gap (last ${this.lastIndex()}, appending ${start.index})`);
    if (start.index === this.lastIndex() + 1) {
      for (const e of kept) this.ents.push(e); // the common case: no truncation, no copy
    } else {
      this.ents = this.ents.slice(0, start.index - offset).concat(kept);
    }
  }

  /** Bytes held in the log, for metrics and tests. */
  bytes(): number {
    let n = 0;
    for (const e of this.ents) n += entryBytes(e);
    return n;
  }

  private offset(): number {
    const head = this.ents[0];
    assert(head !== undefined, 'storage holds its dummy entry');
    return head.index;
  }
}

/**
 * Prepares the storage of a node of a brand-new cluster: the initial membership as a snapshot
 * at index 1, term 1, holding the empty state machine. Every founding member must be bootstrapped
 * with the same membership; nodes that join later start empty and receive a snapshot.
 */
export function bootstrapStorage(storage: MemoryStorage, voters: string[], learners: string[] = [], data: Uint8Array = new Uint8Array(0)): void {
  assert(storage.lastIndex() === 0, 'bootstrap: storage must be empty');
  assert(voters.length > 0, 'bootstrap: at least one voter');
  storage.applySnapshot({
    meta: { index: 1, term: 1, confState: { ...emptyConfState(), voters: [...voters], learners: [...learners] } },
    data,
  });
  storage.setHardState({ term: 1, vote: '', commit: 1 });
}
