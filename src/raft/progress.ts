// What the leader knows of one follower's log, and the flow control of appends to it.
//
// probe:     the leader does not know where the follower's log ends. It sends one append at a
//            time and waits for the answer (or a heartbeat answer) before sending the next.
// replicate: the follower is known to match up to `match`; appends are pipelined optimistically
//            (`next` advances when sent), at most `inflight.capacity` unacknowledged at once.
// snapshot:  the follower needs entries the leader compacted away; a snapshot is being sent and
//            nothing else is until it is acknowledged or reported failed.

import { assert } from '../base/assert.ts';
import type { ProgressState, ProgressStatus } from './types.ts';

/** A ring of the last index of each append message in flight, oldest first. */
export class Inflights {
  private readonly buffer: number[];
  private start = 0;
  count = 0;

  constructor(readonly capacity: number) {
    assert(capacity > 0, 'inflights capacity must be positive');
    this.buffer = new Array<number>(capacity).fill(0);
  }

  full(): boolean {
    return this.count === this.capacity;
  }

  add(lastIndex: number): void {
    assert(!this.full(), 'inflights: add to a full window');
    this.buffer[(this.start + this.count) % this.capacity] = lastIndex;
    this.count++;
  }

  /** Frees every message whose last index is at or below `index`. */
  freeLE(index: number): void {
    while (this.count > 0 && (this.buffer[this.start] as number) <= index) {
      this.start = (this.start + 1) % this.capacity;
      this.count--;
    }
  }

  freeFirstOne(): void {
    if (this.count === 0) return;
    this.start = (this.start + 1) % this.capacity;
    this.count--;
  }

  reset(): void {
    this.start = 0;
    this.count = 0;
  }
}

export class Progress {
  // Invariant: 0 <= match < next.
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** In snapshot state: the index of the snapshot being sent. */
  pendingSnapshot = 0;
  /** Heard from since the last CheckQuorum round. */
  recentActive = true;
  /** In probe state: an append is out and unanswered. */
  probeSent = false;
  /** Survived one full CheckQuorum round in snapshot state: the snapshot was probably lost. */
  snapshotStale = false;
  readonly inflights: Inflights;

  constructor(next: number, inflightMax: number, public learner: boolean) {
    this.next = Math.max(next, 1);
    this.inflights = new Inflights(inflightMax);
  }

  private resetState(state: ProgressState): void {
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.snapshotStale = false;
    this.state = state;
    this.inflights.reset();
  }

  becomeProbe(): void {
    // After a snapshot, the follower has at least the snapshot's index.
    const from = this.state === 'snapshot' ? Math.max(this.match + 1, this.pendingSnapshot + 1) : this.match + 1;
    this.resetState('probe');
    this.next = from;
  }

  becomeReplicate(): void {
    this.resetState('replicate');
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState('snapshot');
    this.pendingSnapshot = snapshotIndex;
  }

  /** Records an acknowledgement up to `index`; returns whether `match` moved. */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (this.match < index) {
      this.match = index;
      this.probeSent = false;
      updated = true;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /**
   * Handles a rejection of the append whose previous index was `rejected`; `hint` is where the
   * follower suggests probing. Returns false when the rejection is stale and was ignored.
   */
  maybeDecrTo(rejected: number, hint: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, hint + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /** Records that an append carrying `entries` entries ending at `lastIndex` was sent. */
  sentEntries(entries: number, lastIndex: number): void {
    if (this.state === 'replicate') {
      if (entries > 0) {
        this.next = lastIndex + 1;
        this.inflights.add(lastIndex);
      }
    } else if (this.state === 'probe') {
      this.probeSent = true;
    } else {
      assert(false, `sending entries in state ${this.state}`);
    }
  }

  isPaused(): boolean {
    switch (this.state) {
      case 'probe': return this.probeSent;
      case 'replicate': return this.inflights.full();
      case 'snapshot': return true;
    }
  }

  status(): ProgressStatus {
    return {
      match: this.match, next: this.next, state: this.state, recentActive: this.recentActive,
      learner: this.learner, inflight: this.inflights.count, pendingSnapshot: this.pendingSnapshot,
    };
  }
}
