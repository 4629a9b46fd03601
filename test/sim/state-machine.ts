// The state machine every simulated node applies committed entries to: a hash chain over the
// applied entries (no-ops and membership changes included), plus a count of client payloads.
// Its digest at index i names the whole applied prefix up to i, so two nodes that agree on the
// digest at i applied the same entries in the same order. Snapshots are small JSON documents.

import type { Entry } from '../../src/raft/types.ts';
import { chain, entryDigest, hashToString, initialHash, type Hash64 } from './hash.ts';

interface SnapshotDoc {
  index: number;
  a: number;
  b: number;
  payloads: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class HashChainStateMachine {
  private constructor(
    /** Index of the last applied entry. */
    public index: number,
    private hash: Hash64,
    /** Client payloads applied (entries with data). */
    public payloads: number,
  ) {}

  /** The state of a brand-new cluster, whose first index is `index` (the bootstrap snapshot). */
  static initial(index: number): HashChainStateMachine {
    return new HashChainStateMachine(index, initialHash(), 0);
  }

  /**
   * Restores from snapshot data taken at `index`. Empty data is the bootstrap snapshot. Throws if
   * the data names another index: the snapshot metadata and its data must agree.
   */
  static restore(data: Uint8Array, index: number): HashChainStateMachine {
    if (data.length === 0) return HashChainStateMachine.initial(index);
    const doc = JSON.parse(decoder.decode(data)) as SnapshotDoc;
    if (doc.index !== index) throw new Error(`snapshot data is at index ${doc.index}, its metadata says ${index}`);
    return new HashChainStateMachine(doc.index, { a: doc.a, b: doc.b }, doc.payloads);
  }

  /** Applies one entry (whose digest the caller may have at hand). The checkers verify the order. */
  apply(e: Entry, digest = entryDigest(e)): void {
    this.hash = chain(this.hash, digest);
    this.index = e.index;
    if (e.kind === 'normal' && e.data.length > 0) this.payloads++;
  }

  digest(): string {
    return hashToString(this.hash);
  }

  serialize(): Uint8Array<ArrayBuffer> {
    const doc: SnapshotDoc = { index: this.index, a: this.hash.a, b: this.hash.b, payloads: this.payloads };
    return encoder.encode(JSON.stringify(doc));
  }
}
