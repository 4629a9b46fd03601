// The commit index of a node never decreases while it runs, and no two nodes (or two lives of one
// node) ever disagree on the entry at a committed index. Across a crash the commit index may go
// back, because a commit-only hard state is written without sync; what was committed may not
// change, which the committed log checks.

import { CommittedLog } from './committed-log.ts';
import { Violation, type Checker, type SimEvent } from './events.ts';

export class CommitMonotonicChecker implements Checker {
  readonly name = 'commit-monotonic';
  private readonly last = new Map<string, number>();
  readonly committed = new CommittedLog(this.name);

  observe(e: SimEvent): void {
    if (e.kind !== 'settled') return;
    const key = `${e.node}#${e.life}`;
    const prev = this.last.get(key) ?? 0;
    if (e.commit < prev) throw new Violation(this.name, `${e.node} commit went back from ${prev} to ${e.commit} without a restart`);
    this.last.set(key, e.commit);
    this.committed.record(e.node, e.life, e.term, e.commit, e.log);
  }
}
