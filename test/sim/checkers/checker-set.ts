// All the checkers, fed every event of the history in order.

import { AcknowledgedWritesChecker } from './acknowledged-writes.ts';
import { CommitMonotonicChecker } from './commit-monotonic.ts';
import { ElectionSafetyChecker } from './election-safety.ts';
import type { Checker, SimEvent } from './events.ts';
import { LeaderCompletenessChecker } from './leader-completeness.ts';
import { LogMatchingChecker } from './log-matching.ts';
import { ReadLinearizabilityChecker } from './read-linearizability.ts';
import { ReadyContractChecker } from './ready-contract.ts';
import { StateMachineSafetyChecker } from './state-machine-safety.ts';
import { TermAndVoteChecker } from './term-and-vote.ts';

export class CheckerSet {
  readonly elections = new ElectionSafetyChecker();
  readonly acks = new AcknowledgedWritesChecker();
  readonly commits = new CommitMonotonicChecker();
  private readonly all: Checker[];

  constructor() {
    this.all = [
      new ReadyContractChecker(),
      new TermAndVoteChecker(),
      this.elections,
      new LogMatchingChecker(),
      this.commits,
      new LeaderCompletenessChecker(),
      new StateMachineSafetyChecker(),
      this.acks,
      new ReadLinearizabilityChecker(),
    ];
  }

  /** Throws a Violation from the first checker the event breaks. */
  observe(e: SimEvent): void {
    for (const c of this.all) c.observe(e);
  }
}
