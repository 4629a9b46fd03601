// What a task runs against, whoever owns it (a service or a job), and a job's runs from the control
// state: kept apart from jobs.ts, which state.ts reads records with.

import { jobAsService, type JobRunRecord } from './jobs.ts';
import type { ServiceRecord, TaskRecord } from './records.ts';
import type { ControlState, Versioned } from './state.ts';
import { compareText } from '../base/order.ts';

/** The record a task is read against: its service's, or its job's. */
export function ownerOf(state: ControlState, task: TaskRecord): ServiceRecord | undefined {
  const svc = state.services.get(task.service)?.value;
  if (svc !== undefined) return svc;
  const job = state.jobs?.get(task.service)?.value;
  return job === undefined ? undefined : jobAsService(job, task.specVersion, String(task.slot));
}

/** Every job run of `job`, oldest scheduled first. */
export function runsOf(runs: ReadonlyMap<string, Versioned<JobRunRecord>>, job: string): Versioned<JobRunRecord>[] {
  return [...runs.values()].filter((r) => r.value.job === job)
    .sort((a, b) => a.value.scheduledAt - b.value.scheduledAt || compareText(a.value.id, b.value.id));
}

