// `shoal apply` of Job documents: what they change in the store, as planApply does for services
// (apply.ts). A pure function of the control state, so a dry run shows exactly what the write does.
//
// A changed spec raises the job's specVersion; a changed schedule or time zone (or a job created)
// counts its times from now: times before the change are never run nor recorded missed.

import { deleteChange, putChange, type Plan } from '../resources/changes.ts';
import { jobsCollection, newJob, type JobRecord } from '../resources/jobs.ts';
import { servicesCollection } from '../resources/collections.ts';
import { jsonEqual } from '../resources/spec/spec-change.ts';
import type { JobSpec } from '../resources/spec/job-spec.ts';
import type { Problem } from '../resources/spec/reader.ts';
import type { ControlState } from '../resources/state.ts';

export interface JobOutcome {
  name: string;
  outcome: 'created' | 'updated' | 'unchanged' | 'removed';
  /** The spec fields that differ, for an update. */
  fields?: string[];
  specVersion: number;
}

/**
 * The problems of applying `jobs` and `services` (names) beside what the store holds: a job and a
 * service never share a name (a job's runs are tasks named by it).
 */
export function nameClashes(state: ControlState, jobs: readonly JobSpec[], serviceNames: readonly string[]): Problem[] {
  const out: Problem[] = [];
  jobs.forEach((j, i) => {
    if (state.services.has(j.name)) out.push({ path: `jobs[${i}].name`, message: `${j.name} is the name of a service; a job and a service never share a name (shoal service rm ${j.name}, or rename the job)` });
  });
  serviceNames.forEach((name, i) => {
    if (state.jobs?.has(name) === true) out.push({ path: `services[${i}].name`, message: `${name} is the name of a job; a job and a service never share a name (shoal job rm ${name}, or rename the service)` });
  });
  return out;
}

export function planJobApply(state: ControlState, specs: readonly JobSpec[], now: number, opts: { source?: string; prune?: boolean } = {}): { plan: Plan; jobs: JobOutcome[] } {
  const plan: Plan = { changes: [], compares: [] };
  const jobs: JobOutcome[] = [];
  const source = opts.source ?? null;
  for (const spec of specs) {
    const cur = state.jobs?.get(spec.name);
    // Compared absent: a service of that name created meanwhile refuses the write.
    plan.compares.push({ collection: servicesCollection, id: spec.name, target: 'exists', cmp: '=', value: false });
    if (cur === undefined) {
      plan.changes.push(putChange(jobsCollection, spec.name, newJob(spec, now, source), null));
      jobs.push({ name: spec.name, outcome: 'created', specVersion: 1 });
      continue;
    }
    if (jsonEqual(cur.value.spec, spec)) {
      jobs.push({ name: spec.name, outcome: 'unchanged', specVersion: cur.value.specVersion });
      continue;
    }
    const rescheduled = cur.value.spec.schedule !== spec.schedule || cur.value.spec.timezone !== spec.timezone;
    const next: JobRecord = {
      ...cur.value, spec, specVersion: cur.value.specVersion + 1, updatedAt: now, ...(rescheduled ? { scheduleFrom: now } : {}),
    };
    plan.changes.push(putChange(jobsCollection, spec.name, next, cur.rev));
    jobs.push({ name: spec.name, outcome: 'updated', fields: (Object.keys(spec) as (keyof JobSpec)[]).filter((k) => !jsonEqual(cur.value.spec[k], spec[k])), specVersion: next.specVersion });
  }
  if (opts.prune === true && source !== null) {
    const named = new Set(specs.map((s) => s.name));
    for (const [name, cur] of state.jobs ?? new Map()) {
      if (cur.value.source !== source || named.has(name)) continue;
      plan.changes.push(deleteChange(jobsCollection, name, cur.rev));
      jobs.push({ name, outcome: 'removed', specVersion: cur.value.specVersion });
    }
  }
  return { plan, jobs };
}
