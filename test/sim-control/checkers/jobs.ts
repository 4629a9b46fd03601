// Checker 9: jobs (docs/control-plane.md, "Jobs"). At every instant anything changes:
// - never two runs of one job's forbid (or replace) policy running at once: by the ground truth
//   of the runtimes, at most one running container of the job on the machines awake (a frozen
//   shoal's containers still run; its lease fence kills them);
// - never a run created twice for one scheduled time: a run id, once in the committed store, is
//   never created again (a run deleted by history pruning and created anew would be a second run
//   of its time).
// The third property, no possible run skipped, is checked by the job loop's own model over many
// seeds (test/control/job-loop.test.ts), where "possible" can be known exactly.

import type { DocumentStore } from '../../../fsm/index.ts';
import { labelKeys } from '../../../src/executor/labels.ts';
import type { ContainerInfo } from '../../../src/executor/runtime.ts';
import { jobRunsCollection } from '../../../src/resources/jobs.ts';
import { allDocs } from '../../../src/resources/state.ts';
import { Violation } from './violation.ts';

export interface JobFact {
  nodeId: string;
  suspended: boolean;
  containers: readonly ContainerInfo[];
}

export class JobChecker {
  /** Every run id seen in the committed store, with the revision that created it. */
  private readonly created = new Map<string, number>();
  private seenRevision = -1;

  check(facts: readonly JobFact[], committed: DocumentStore, job: string, nowMs: number): void {
    const running: string[] = [];
    for (const f of facts) {
      if (f.suspended) continue;
      for (const c of f.containers) if (c.state === 'running' && c.labels[labelKeys.service] === job) running.push(`${c.name} on ${f.nodeId}`);
    }
    if (running.length > 1) throw new Violation('jobs', `job ${job} runs ${running.length} attempts at once at ${nowMs} ms: ${running.join(', ')}`);
    // The committed store changes far less often than the instants checked.
    if (committed.revision === this.seenRevision) return;
    this.seenRevision = committed.revision;
    for (const d of allDocs(committed, jobRunsCollection)) {
      const first = this.created.get(d.id);
      if (first === undefined) this.created.set(d.id, d.createRev);
      else if (first !== d.createRev) throw new Violation('jobs', `run ${d.id} was created twice (revisions ${first} and ${d.createRev})`);
    }
  }
}
