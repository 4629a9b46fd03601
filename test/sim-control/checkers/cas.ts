// Checker 6: every write that took effect was decided on state that still held when its entry
// applied (design.md, Fencing: "a loop command is also a compare-and-set on what the loop read").
// Fed every committed entry in log order with the world's record of who decided it and which
// revision of its store it read (never the command's own expectations), and the documents the
// entry changed with the revision each had before it (the reference store's events):
//
// - a leader loop's decision writes only documents no other write has changed since the revision
//   it read (every loop write is a compare-and-set); so does an agent writing its node's record
//   (the operator and the leader write other fields of it);
// - an agent's report (a task status, a lease renewal) takes effect only in its node's epoch in
//   the committed state, and only for a task that exists (a node declared down meanwhile has had
//   its work replaced: its report must change nothing);
// - a node's epoch never goes down (a write that lost the raise would bring its old work back).
//
// A placement's own reliance (the node ready, active and in the task's epoch) is checked by the
// placement checker.

import { Violation } from './violation.ts';

export interface WrittenDoc {
  collection: string;
  id: string;
  /** The document's revision before the entry; null when it did not exist. */
  prevRev: number | null;
}

export interface DecisionFact {
  index: number;
  /** Who decided (for the message): `loop n1/t3 place`, `agent n2`. */
  decider: string;
  /** The revision of the store the decision read. */
  readRevision: number;
  /** The documents the entry wrote that the decision had read (for an agent, its node's record). */
  writes: readonly WrittenDoc[];
}

export interface ReportFact {
  index: number;
  node: string;
  what: string;
  /** The epoch the report was made in. */
  epoch: number;
  /** The node's epoch in the committed state when the entry applied (null: no record). */
  committedEpoch: number | null;
  /** The task it reports on, if any, and whether the committed state holds it. */
  task?: { id: string; exists: boolean };
}

export class CasChecker {
  private readonly epochs = new Map<string, { epoch: number; index: number }>();

  /** A decision that took effect. */
  observeDecision(d: DecisionFact): void {
    for (const w of d.writes) {
      if (w.prevRev === null || w.prevRev <= d.readRevision) continue;
      throw new Violation('cas', `entry ${d.index} (${d.decider}) wrote ${w.collection}/${w.id}, which was changed at revision ${w.prevRev}, after the revision ${d.readRevision} the decision read: a lost update`);
    }
  }

  /** An agent's report that took effect. */
  observeReport(r: ReportFact): void {
    const what = `entry ${r.index}: ${r.node}'s ${r.what} of epoch ${r.epoch}`;
    if (r.committedEpoch !== r.epoch) throw new Violation('cas', `${what} took effect, but the node's epoch was ${String(r.committedEpoch)}`);
    if (r.task !== undefined && !r.task.exists) throw new Violation('cas', `${what} took effect, but its task ${r.task.id} no longer existed`);
  }

  /** A node record as committed: its epoch never goes down. */
  observeNode(index: number, id: string, epoch: number): void {
    const before = this.epochs.get(id);
    if (before !== undefined && epoch < before.epoch) {
      throw new Violation('cas', `entry ${index} put node ${id} back to epoch ${epoch}; it was raised to ${before.epoch} at entry ${before.index}`);
    }
    if (before === undefined || epoch > before.epoch) this.epochs.set(id, { epoch, index });
  }
}
