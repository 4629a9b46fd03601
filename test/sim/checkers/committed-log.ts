// The entries known to be committed, learned from the commit index each node reports once it has
// settled (its whole log persisted). For each committed index it keeps the entry's term and the
// lowest term in which some node was seen to know it committed: the entry was committed in that
// term or earlier, since a node only learns a commit index from a leader of its term or older.

import type { NodeId } from '../../../src/raft/types.ts';
import { Violation, type LogView } from './events.ts';

export interface NewCommit {
  index: number;
  term: number;
  commitTerm: number;
}

export class CommittedLog {
  private readonly terms: number[] = [];
  private readonly commitTerms: number[] = [];
  /** Highest commit index scanned, per node and life. */
  private readonly scanned = new Map<string, number>();
  /** Highest committed index known. */
  maxIndex = 0;

  constructor(private readonly checker: string) {}

  termOf(index: number): number | undefined {
    return this.terms[index];
  }

  commitTermOf(index: number): number | undefined {
    return this.commitTerms[index];
  }

  /**
   * Records that `node` (currently in `term`) has `commit` as its commit index and returns the
   * indexes that became known as committed, or got an earlier commit term. Throws when the node's
   * log disagrees with what is known committed.
   */
  record(node: NodeId, life: number, term: number, commit: number, log: LogView): NewCommit[] {
    const key = `${node}#${life}`;
    const from = (this.scanned.get(key) ?? 0) + 1;
    if (commit < from) return [];
    if (commit > log.lastIndex()) {
      throw new Violation(this.checker, `${node} has commit ${commit} beyond its last persisted index ${log.lastIndex()}`);
    }
    this.scanned.set(key, commit);
    const out: NewCommit[] = [];
    for (let i = from; i <= commit; i++) {
      const t = log.termAt(i);
      if (t === undefined) continue; // compacted: covered by a snapshot of committed state
      const known = this.terms[i];
      if (known === undefined) {
        this.terms[i] = t;
        this.commitTerms[i] = term;
        out.push({ index: i, term: t, commitTerm: term });
        if (i > this.maxIndex) this.maxIndex = i;
      } else if (known !== t) {
        throw new Violation(this.checker, `index ${i} was committed with term ${known}, but ${node} has term ${t} there and commit ${commit}`);
      } else if (term < (this.commitTerms[i] as number)) {
        this.commitTerms[i] = term;
        out.push({ index: i, term: t, commitTerm: term });
      }
    }
    return out;
  }

  /** Calls `fn` for every known committed index. */
  forEach(fn: (index: number, term: number, commitTerm: number) => void): void {
    for (let i = 0; i < this.terms.length; i++) {
      const t = this.terms[i];
      if (t !== undefined) fn(i, t, this.commitTerms[i] as number);
    }
  }
}
