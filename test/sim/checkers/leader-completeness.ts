// Leader completeness (Raft §5.4.1): an entry committed in term C is in the log of every leader of
// a term after C. Checked both ways round, since commits and leaders are observed in some order:
// when a leader is first seen settled, against every entry known committed before its term; and
// when an entry becomes known committed, against every leader already seen of a later term.

import type { NodeId } from '../../../src/raft/types.ts';
import { CommittedLog } from './committed-log.ts';
import { Violation, type Checker, type LogView, type SimEvent } from './events.ts';

interface Leader {
  node: NodeId;
  term: number;
  log: LogView;
}

export class LeaderCompletenessChecker implements Checker {
  readonly name = 'leader-completeness';
  private readonly committed = new CommittedLog(this.name);
  private readonly leaders: Leader[] = [];
  private readonly seen = new Set<string>();
  private maxLeaderTerm = 0;

  observe(e: SimEvent): void {
    if (e.kind !== 'settled') return;
    const fresh = this.committed.record(e.node, e.life, e.term, e.commit, e.log);
    if (e.role === 'leader' && !this.seen.has(`${e.node}@${e.term}`)) this.addLeader({ node: e.node, term: e.term, log: e.log });
    if (this.maxLeaderTerm === 0) return;
    for (const c of fresh) {
      if (c.commitTerm >= this.maxLeaderTerm) continue;
      for (const l of this.leaders) if (l.term > c.commitTerm) this.expect(l, c.index, c.term, c.commitTerm);
    }
  }

  private addLeader(l: Leader): void {
    this.seen.add(`${l.node}@${l.term}`);
    this.leaders.push(l);
    if (l.term > this.maxLeaderTerm) this.maxLeaderTerm = l.term;
    this.committed.forEach((index, term, commitTerm) => {
      if (commitTerm < l.term) this.expect(l, index, term, commitTerm);
    });
  }

  private expect(l: Leader, index: number, term: number, commitTerm: number): void {
    const last = l.log.lastIndex();
    const have = l.log.termAt(index);
    if (index > last) {
      throw new Violation(this.name, `${l.node}, leader of term ${l.term}, lacks entry ${index}/${term} committed by term ${commitTerm} (its log ends at ${last})`);
    }
    if (have !== undefined && have !== term) {
      throw new Violation(this.name, `${l.node}, leader of term ${l.term}, has term ${have} at ${index} where ${term} was committed by term ${commitTerm}`);
    }
  }
}
