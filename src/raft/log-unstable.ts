// The tail of the log not yet persisted: entries (and possibly a snapshot) that the core has
// accepted and handed to the driver in a Ready, but that the driver has not yet confirmed in
// advance(). Entries here may still be truncated by a new leader.

import { assert } from '../base/assert.ts';
import type { Entry, Snapshot } from './types.ts';

export class Unstable {
  snapshot: Snapshot | undefined = undefined;
  entries: Entry[] = [];
  // Invariant: entries[i].index === offset + i; if snapshot, offset === snapshot.meta.index + 1.
  offset: number;

  constructor(offset: number) {
    this.offset = offset;
  }

  maybeFirstIndex(): number | undefined {
    return this.snapshot ? this.snapshot.meta.index + 1 : undefined;
  }

  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    return this.snapshot ? this.snapshot.meta.index : undefined;
  }

  maybeTerm(index: number): number | undefined {
    if (index < this.offset) {
      return this.snapshot && this.snapshot.meta.index === index ? this.snapshot.meta.term : undefined;
    }
    return this.entries[index - this.offset]?.term;
  }

  /** The driver persisted entries up to `index` of term `term`; drop them unless since truncated. */
  stableTo(index: number, term: number): void {
    const t = this.maybeTerm(index);
    if (t === undefined || t !== term || index < this.offset) return;
    this.entries = this.entries.slice(index + 1 - this.offset);
    this.offset = index + 1;
  }

  stableSnapTo(index: number): void {
    if (this.snapshot && this.snapshot.meta.index === index) this.snapshot = undefined;
  }

  restore(snap: Snapshot): void {
    this.offset = snap.meta.index + 1;
    this.entries = [];
    this.snapshot = snap;
  }

  truncateAndAppend(ents: readonly Entry[]): void {
    const first = ents[0];
    if (first === undefined) return;
    const after = first.index;
    if (after === this.offset + this.entries.length) {
      for (const e of ents) this.entries.push(e);
    } else if (after <= this.offset) {
      // Replaces everything unstable, and rewrites part of the stable log too.
      this.offset = after;
      this.entries = [...ents];
    } else {
      this.entries = this.entries.slice(0, after - this.offset).concat(ents);
    }
  }

  slice(lo: number, hi: number): Entry[] {
    assert(lo >= this.offset && hi <= this.offset + this.entries.length && lo <= hi,
      `unstable slice [${lo}, ${hi}) out of [${this.offset}, ${this.offset + this.entries.length})`);
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}
