// /v1/jobs: the jobs, each with its schedule, next time and last run, and one at a time with its
// runs (newest first). Writes: remove, run now (a manual run), suspend and resume. Each write is a
// compare-and-set on the records it read (control-write.ts). Creating and changing jobs is
// POST /v1/apply with `kind: Job` documents. A run's log is its task's: GET /v1/tasks/{id}/logs
// (`shoal job logs` finds the task). The list carries the answering node's view of the clocks
// (`clock`: src/node/clock-watch.ts): on the leader, whether the clock rule holds scheduled runs.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { deleteChange, putChange } from '../resources/changes.ts';
import { isFinishedRun, jobRunsCollection, jobsCollection, newRun, runId, type JobRecord, type JobRunRecord } from '../resources/jobs.ts';
import { runsOf } from '../resources/task-owner.ts';
import { describeSchedule, nextAfter, parseSchedule } from '../resources/spec/schedule.ts';
import type { JobSpec } from '../resources/spec/job-spec.ts';
import type { ControlState, Versioned } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery, serviceNameSchema } from './control-schemas.ts';
import { readControl, readLocal } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export const jobParams = z.object({ name: serviceNameSchema }).strict();
export const jobRunBody = z.union([z.undefined(), z.object({}).strict()]);

export interface JobRunView extends JobRunRecord {
  /** The node's name of the last attempt; null before it is placed. */
  nodeName: string | null;
}

export interface JobView {
  name: string;
  /** The schedule as written, with its zone (`0 3 * * * (Europe/Paris)`); null: run only by hand. */
  schedule: string | null;
  concurrency: JobSpec['concurrency'];
  suspended: boolean;
  specVersion: number;
  /** Log time of the next scheduled run; null when suspended or unscheduled. */
  nextAt: number | null;
  lastScheduledAt: number | null;
  /** Runs pending or running. */
  active: number;
  /** The newest run (by scheduled time), whatever its state; null if none. */
  lastRun: JobRunView | null;
  /** The newest finished run; null if none. */
  lastFinished: JobRunView | null;
}

function runView(state: ControlState, r: JobRunRecord): JobRunView {
  return { ...r, nodeName: r.nodeId === null ? null : state.nodes.get(r.nodeId)?.value.name ?? r.nodeId };
}

export function jobView(state: ControlState, j: JobRecord, now: number): JobView {
  const runs = runsOf(state.runs ?? new Map(), j.name).map((r) => r.value);
  const parsed = j.spec.schedule === null ? null : parseSchedule(j.spec.schedule, j.spec.timezone);
  const schedule = parsed !== null && parsed.ok ? parsed.value : null;
  const last = runs[runs.length - 1];
  const finished = runs.filter(isFinishedRun);
  const lastFinished = finished[finished.length - 1];
  return {
    name: j.name, schedule: schedule === null ? null : describeSchedule(schedule), concurrency: j.spec.concurrency, suspended: j.suspended,
    specVersion: j.specVersion, nextAt: schedule === null || j.suspended ? null : nextAfter(schedule, Math.max(now, j.lastScheduledAt ?? 0, j.scheduleFrom)),
    lastScheduledAt: j.lastScheduledAt, active: runs.filter((r) => !isFinishedRun(r)).length,
    lastRun: last === undefined ? null : runView(state, last), lastFinished: lastFinished === undefined ? null : runView(state, lastFinished),
  };
}

export function findJob(state: ControlState, name: string): Versioned<JobRecord> {
  const j = state.jobs?.get(name);
  if (j === undefined) throw new ShoalError('not_found', `no job named '${name}'; list them with: shoal job ls`, { job: name });
  return j;
}

function setSuspended(ctx: ApiContext, req: Parameters<typeof decideAndWrite>[1], name: string, suspended: boolean): Promise<{ rev: number | null }> {
  return decideAndWrite(ctx, req, `${suspended ? 'suspending' : 'resuming'} job ${name}`, (state) => {
    const j = findJob(state, name);
    if (j.value.suspended === suspended) return { plan: null, answer: null };
    const now = ctx.node.logTimeNow();
    // Resumed: the times that passed while suspended are skipped, not run late nor recorded missed.
    const next: JobRecord = { ...j.value, suspended, updatedAt: now, ...(suspended ? {} : { scheduleFrom: now }) };
    return { plan: { changes: [putChange(jobsCollection, name, next, j.rev)], compares: [] }, answer: null };
  });
}

export const jobsRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/jobs', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const now = ctx.node.logTimeNow();
    const items = [...(state.jobs?.values() ?? [])].map((j) => jobView(state, j.value, now)).sort((a, b) => compareText(a.name, b.name));
    // The answering node's view of the clocks: the leader's says whether scheduled runs are held.
    return { items, rev: state.revision, ...(ctx.jobClock !== undefined ? { clock: ctx.jobClock() } : {}) };
  });

  app.get('/v1/jobs/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [jobParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const j = findJob(state, v.params.name);
    const runs = runsOf(state.runs ?? new Map(), j.value.name).map((r) => runView(state, r.value)).reverse();
    return { job: jobView(state, j.value, ctx.node.logTimeNow()), spec: j.value.spec, runs, rev: state.revision };
  });

  app.delete('/v1/jobs/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [jobParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing job ${v.params.name}`, (state) => {
      const j = findJob(state, v.params.name);
      return { plan: { changes: [deleteChange(jobsCollection, j.value.name, j.rev)], compares: [] }, answer: null };
    });
    return { name: v.params.name, removed: true, rev: w.rev };
  });

  app.post('/v1/jobs/:name/run', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [jobParams, req.params], query: [noQuery, req.query], body: [jobRunBody, req.body] });
    const w = await decideAndWrite(ctx, req, `running job ${v.params.name}`, (state) => {
      const j = findJob(state, v.params.name);
      const active = runsOf(state.runs ?? new Map(), j.value.name).filter((r) => !isFinishedRun(r.value));
      if (j.value.spec.concurrency === 'forbid' && active[0] !== undefined) {
        throw new ShoalError('job_run_active', `job ${j.value.name} forbids overlapping runs and run ${active[0].value.id} is ${active[0].value.state}; wait for it (shoal job ps ${j.value.name}), or set concurrency: replace or allow`, {
          job: j.value.name, run: active[0].value.id,
        });
      }
      const now = ctx.node.logTimeNow();
      const run = newRun(j.value, now, 'manual', now);
      // The job is compared: a job removed or changed meanwhile decides again.
      return {
        plan: { changes: [putChange(jobRunsCollection, run.id, run, null)], compares: [{ collection: jobsCollection, id: j.value.name, target: 'rev', cmp: '=', value: j.rev }] },
        answer: run.id,
      };
    });
    const state = readLocal(ctx);
    const run = state.runs?.get(w.answer)?.value;
    return { run: run === undefined ? null : runView(state, run), id: w.answer, rev: w.rev };
  });

  app.post('/v1/jobs/:name/suspend', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [jobParams, req.params], query: [noQuery, req.query], body: [jobRunBody, req.body] });
    const w = await setSuspended(ctx, req, v.params.name, true);
    return { name: v.params.name, suspended: true, rev: w.rev };
  });

  app.post('/v1/jobs/:name/resume', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [jobParams, req.params], query: [noQuery, req.query], body: [jobRunBody, req.body] });
    const w = await setSuspended(ctx, req, v.params.name, false);
    return { name: v.params.name, suspended: false, rev: w.rev };
  });
};

/** The run id of a manual run asked at `at` (for tests and the CLI's messages). */
export const manualRunId = (job: string, at: number): string => runId(job, at, 'manual');
