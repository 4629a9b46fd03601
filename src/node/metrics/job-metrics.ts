// Jobs as metrics, counted when scraped from this node's applied copy of the job records (every
// node reports the same figures up to its apply lag: aggregate across nodes with max). Labelled
// by job name (`job_name`: Prometheus keeps `job` for the scrape job): a homelab has a handful of
// jobs, and an alert names the one that failed.
//
//   shoal_job_last_finished_state{job_name,state}   1 for the state of the job's newest finished run
//   shoal_job_last_success_timestamp_seconds{job_name}  when its newest kept succeeded run finished (log time)
//   shoal_job_active_runs{job_name}               runs pending or running
//   shoal_job_suspended{job_name}                 1 while its schedule is suspended

import type { DocumentStore } from '../../../fsm/index.ts';
import { jobRecordSchema, jobRunRecordSchema, jobRunsCollection, jobsCollection, type JobRunRecord } from '../../resources/jobs.ts';
import { allDocs } from '../../resources/state.ts';
import type { Registry, Sample } from '../../base/metrics.ts';

function runs(store: DocumentStore): JobRunRecord[] {
  const out: JobRunRecord[] = [];
  for (const d of allDocs(store, jobRunsCollection)) {
    const r = jobRunRecordSchema.safeParse(d.doc);
    if (r.success) out.push(r.data);
  }
  return out;
}

export function registerJobMetrics(metrics: Registry, store: DocumentStore): void {
  metrics.gauge({
    name: 'shoal_job_last_finished_state', help: 'The state of each job\'s newest finished run (succeeded, failed, missed, cancelled): 1 for that state.', type: 'gauge',
    labelNames: ['job_name', 'state'],
    read: () => {
      const newest = new Map<string, JobRunRecord>();
      for (const r of runs(store)) {
        if (r.finishedAt === null) continue;
        const cur = newest.get(r.job);
        if (cur === undefined || r.scheduledAt > cur.scheduledAt) newest.set(r.job, r);
      }
      return [...newest.values()].map((r): Sample => ({ labels: { job_name: r.job, state: r.state }, value: 1 }));
    },
  });
  metrics.gauge({
    name: 'shoal_job_last_success_timestamp_seconds', help: 'When each job\'s newest kept succeeded run finished (log time, Unix seconds).', type: 'gauge',
    labelNames: ['job_name'],
    read: () => {
      const at = new Map<string, number>();
      for (const r of runs(store)) if (r.state === 'succeeded' && r.finishedAt !== null) at.set(r.job, Math.max(at.get(r.job) ?? 0, r.finishedAt));
      return [...at].map(([job, ms]): Sample => ({ labels: { job_name: job }, value: ms / 1000 }));
    },
  });
  metrics.gauge({
    name: 'shoal_job_active_runs', help: 'Runs of each job pending or running.', type: 'gauge', labelNames: ['job_name'],
    read: () => {
      const n = new Map<string, number>();
      for (const d of allDocs(store, jobsCollection)) {
        const j = jobRecordSchema.safeParse(d.doc);
        if (j.success) n.set(j.data.name, 0);
      }
      for (const r of runs(store)) if (r.finishedAt === null && n.has(r.job)) n.set(r.job, (n.get(r.job) ?? 0) + 1);
      return [...n].map(([job, value]): Sample => ({ labels: { job_name: job }, value }));
    },
  });
  metrics.gauge({
    name: 'shoal_job_suspended', help: 'Jobs whose schedule is suspended (1).', type: 'gauge', labelNames: ['job_name'],
    read: () => {
      const out: Sample[] = [];
      for (const d of allDocs(store, jobsCollection)) {
        const j = jobRecordSchema.safeParse(d.doc);
        if (j.success) out.push({ labels: { job_name: j.data.name }, value: j.data.suspended ? 1 : 0 });
      }
      return out;
    },
  });
}
