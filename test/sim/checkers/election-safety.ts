// Election safety (Raft §5.2): at most one leader is elected in a given term.

import type { NodeId } from '../../../src/raft/types.ts';
import { Violation, type Checker, type SimEvent } from './events.ts';

export class ElectionSafetyChecker implements Checker {
  readonly name = 'election-safety';
  private readonly leaderOf = new Map<number, NodeId>();

  observe(e: SimEvent): void {
    if (e.kind !== 'role' || e.role !== 'leader') return;
    const other = this.leaderOf.get(e.term);
    if (other === undefined) this.leaderOf.set(e.term, e.node);
    else if (other !== e.node) throw new Violation(this.name, `two leaders in term ${e.term}: ${other} and ${e.node}`);
  }

  /** Terms that had a leader. */
  elections(): number {
    return this.leaderOf.size;
  }
}
