// The durability half of the Ready contract: a Ready that carries entries, a snapshot, or a new
// term or vote must be synced. Written without sync, a crash could forget a vote or an entry that
// a message of the same Ready already promised to another node. And an entry is applied only
// once a commit index covering it is persisted.

import { Violation, type Checker, type SimEvent } from './events.ts';

export class ReadyContractChecker implements Checker {
  readonly name = 'ready-contract';

  observe(e: SimEvent): void {
    if (e.kind === 'apply' && e.index > e.persistedCommit) {
      throw new Violation(this.name, `${e.node} was handed entry ${e.index} to apply, but the commit index persisted is ${e.persistedCommit}`);
    }
    if (e.kind !== 'ready' || e.mustSync) return;
    if (e.entries > 0) throw new Violation(this.name, `${e.node}: Ready with ${e.entries} entries has mustSync false`);
    if (e.snapshot) throw new Violation(this.name, `${e.node}: Ready with a snapshot has mustSync false`);
    if (e.termOrVoteChanged) throw new Violation(this.name, `${e.node}: Ready with a new term or vote has mustSync false`);
  }
}
