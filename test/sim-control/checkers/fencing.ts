// Checker 2: no decision of a deposed leader takes effect after the new leader's first decision.
// Fed every committed entry in log order with the world's record of who decided it (never the
// command's own fence field): a loop decision that took effect must have been decided in the
// term of the entry that carries it, and in no term older than that of a decision that already
// took effect.

import { Violation } from './violation.ts';

export interface EntryFact {
  index: number;
  term: number;
  /** The leader loop that decided it (node, term), or null for anything else. */
  decider: { node: string; term: number; key: string } | null;
  tookEffect: boolean;
}

export class FencingChecker {
  private newest: { term: number; index: number } | null = null;

  observe(e: EntryFact): void {
    const d = e.decider;
    if (d === null || !e.tookEffect) return;
    if (d.term !== e.term) {
      throw new Violation('fencing', `entry ${e.index} (term ${e.term}) took effect, but it was decided by ${d.node}'s loops of term ${d.term} (${d.key})`);
    }
    if (this.newest !== null && d.term < this.newest.term) {
      throw new Violation('fencing', `entry ${e.index}: a decision of ${d.node} as leader of term ${d.term} (${d.key}) took effect after the leader of term ${this.newest.term} had decided (entry ${this.newest.index})`);
    }
    if (this.newest === null || d.term > this.newest.term) this.newest = { term: d.term, index: e.index };
  }
}
