// Log matching (Raft §5.3): if two logs hold an entry with the same index and term, the entries
// are identical and so are the logs up to there. Checked incrementally: every (index, term) ever
// written anywhere must always carry the same entry and follow the same previous term; by
// induction on the index the whole prefixes then agree.

import { Violation, type Checker, type SimEvent } from './events.ts';

interface Known {
  digest: string;
  prevTerm: number | undefined;
  node: string;
}

export class LogMatchingChecker implements Checker {
  readonly name = 'log-matching';
  private readonly known = new Map<string, Known>();

  observe(e: SimEvent): void {
    if (e.kind !== 'append') return;
    for (const f of e.entries) {
      const key = `${f.index}/${f.term}`;
      const k = this.known.get(key);
      if (k === undefined) {
        this.known.set(key, { digest: f.digest, prevTerm: f.prevTerm, node: e.node });
        continue;
      }
      if (k.digest !== f.digest) {
        throw new Violation(this.name, `entry ${key} differs between ${k.node} and ${e.node}`);
      }
      if (k.prevTerm === undefined) k.prevTerm = f.prevTerm;
      else if (f.prevTerm !== undefined && f.prevTerm !== k.prevTerm) {
        throw new Violation(this.name,
          `entry ${key} follows term ${k.prevTerm} on ${k.node} but term ${f.prevTerm} on ${e.node}: the logs differ before it`);
      }
    }
  }
}
