// A node's term never decreases, in memory or on disk, across restarts included; and it casts at
// most one vote per term (the vote survives a crash once written).

import type { NodeId } from '../../../src/raft/types.ts';
import { Violation, type Checker, type SimEvent } from './events.ts';

interface Durable {
  term: number;
  vote: NodeId;
}

export class TermAndVoteChecker implements Checker {
  readonly name = 'term-and-vote';
  private readonly durable = new Map<NodeId, Durable>();
  private readonly memoryTerm = new Map<string, number>();

  observe(e: SimEvent): void {
    if (e.kind === 'role') {
      const key = `${e.node}#${e.life}`;
      const prev = this.memoryTerm.get(key) ?? 0;
      if (e.term < prev) throw new Violation(this.name, `${e.node} term went back from ${prev} to ${e.term}`);
      this.memoryTerm.set(key, e.term);
      return;
    }
    if (e.kind !== 'hardState' && e.kind !== 'boot') return;
    const prev = this.durable.get(e.node);
    if (prev !== undefined) {
      const what = e.kind === 'boot' ? 'after a restart' : 'on disk';
      if (e.term < prev.term) throw new Violation(this.name, `${e.node} term went back ${what} from ${prev.term} to ${e.term}`);
      if (e.term === prev.term && prev.vote !== '' && e.vote !== prev.vote) {
        throw new Violation(this.name, `${e.node} vote in term ${e.term} changed ${what} from ${prev.vote} to '${e.vote}'`);
      }
    }
    this.durable.set(e.node, { term: e.term, vote: e.vote });
  }
}
