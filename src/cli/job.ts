// shoal job: the jobs of the control plane (kind: Job, created with shoal apply) and their runs.
//   ls                  every job: schedule, next time, last run
//   ps NAME             a job's runs, newest first
//   logs NAME [--run ID]  a run's container log (the newest run's by default)
//   run NAME            a run now
//   suspend | resume NAME  stop or restart the schedule
//   rm NAME             remove the job (its running attempt is stopped)

import { z } from 'zod';
import { jobRunsCollection, jobsCollection } from '../resources/jobs.ts';
import { parse, UsageError } from './args.ts';
import { CliFailure, request, resolveAddr, retryNotice } from './client.ts';
import { read } from './control-api.ts';
import { cell, jsonRendered, tableText } from './control-format.ts';
import { oneName } from './control-args.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { printList, watchList, type Rendered } from './list-watch.ts';
import { logsFlags, logsFlagsHelp, logsPaths, printLogs, sinceFlag, tailFlag } from './logs-stream.ts';
import { exitCodes } from './args.ts';

const enc = encodeURIComponent;
const jobPaths = {
  jobs: '/v1/jobs',
  job: (name: string): string => `/v1/jobs/${enc(name)}`,
  action: (name: string, action: 'run' | 'suspend' | 'resume'): string => `/v1/jobs/${enc(name)}/${action}`,
};

const runSchema = z.object({
  id: z.string(), job: z.string(), scheduledAt: z.number(), cause: z.string(), state: z.string(), attempts: z.number(), taskId: z.string().nullable(),
  nodeName: z.string().nullable(), exitCode: z.number().nullable(), message: z.string().nullable(), startedAt: z.number().nullable(), finishedAt: z.number().nullable(),
}).loose();
type RunView = z.infer<typeof runSchema>;
const jobViewSchema = z.object({
  name: z.string(), schedule: z.string().nullable(), concurrency: z.string(), suspended: z.boolean(), nextAt: z.number().nullable(), active: z.number(),
  lastRun: runSchema.nullable(), lastFinished: runSchema.nullable(),
}).loose();
type JobView = z.infer<typeof jobViewSchema>;
/** The answering node's view of the jobs' clock rule (absent from a release without it). */
const jobClockSchema = z.object({ leader: z.boolean(), hold: z.string().nullable() }).loose();
const jobListSchema = z.object({ items: z.array(jobViewSchema), rev: z.number(), clock: jobClockSchema.optional() }).loose();
const jobDetailSchema = z.object({ job: jobViewSchema, runs: z.array(runSchema), rev: z.number() }).loose();
const writtenSchema = z.object({ rev: z.number().nullable() }).loose();
const runAnswerSchema = z.object({ id: z.string(), rev: z.number().nullable() }).loose();

const time = (ms: number | null): string => (ms === null ? '-' : new Date(ms).toISOString().replace('.000Z', 'Z'));

export const jobLsHelp = `Usage: shoal job ls [--stale] [--watch] [--addr HOST:PORT] [--json]

Lists the jobs (kind: Job, created with shoal apply): the schedule (cron in its time zone,
@every, @daily, or 'manual' for a job run only by hand), the concurrency policy, whether it is
suspended, the next scheduled time (UTC), the runs going on, and the last finished run's state.
When the node asked leads and holds scheduled runs (its clock is not synchronized, or is far
from the members': docs/control-plane.md, Jobs, "Clocks"), a last line says why.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            print the list again on every change, until Ctrl-C
${commonFlagsHelp}

With --json prints {items, rev, clock} (GET /v1/jobs).
${clientExitCodes}`;

export const jobPsHelp = `Usage: shoal job ps NAME [--stale] [--watch] [--addr HOST:PORT] [--json]

Lists a job's runs, newest first: the run id (the job and its scheduled time, so one per time),
why it ran (schedule or manual), its state (pending, running, succeeded, failed, missed,
cancelled), the attempts made (a failed attempt is retried under the same id, backoffLimit
times), the node of the last attempt, its exit code, and what a person should know.
Finished runs are kept as the job's history says.

Options:
  --stale            read the node's local copy (no leader needed; may be behind)
  --watch            print the list again on every change, until Ctrl-C
${commonFlagsHelp}

With --json prints {job, runs, rev} (GET /v1/jobs/NAME).
${clientExitCodes} An unknown job exits 1 (not_found).`;

export const jobLogsHelp = `Usage: shoal job logs NAME [--run ID] [--follow] [--tail N] [--since DURATION] [--addr HOST:PORT] [--json]

Prints the container log of a run's last attempt (the newest run that started, or --run ID from
'shoal job ps NAME'), from whichever node ran it, as 'shoal task logs' does. A run's log stays
while the run is kept in the job's history and its node keeps the container.

Options:
  --run ID           the run (default: the newest run that has an attempt)
${logsFlagsHelp}
${commonFlagsHelp}

With --json prints one object per line: {at, stream, text}.
${clientExitCodes} An unknown job or run exits 1 (not_found); a run that never started an attempt (missed,
or still waiting) exits 1 (task_not_started).`;

export const jobRunHelp = `Usage: shoal job run NAME [--addr HOST:PORT] [--json]

Starts a run of the job now (a manual run, beside its schedule), on some healthy node, and
prints its id; follow it with 'shoal job ps NAME'. A job with concurrency forbid (the default)
refuses while one of its runs is pending or running (exit 1, job_run_active).

Options:
${commonFlagsHelp}

With --json prints {id, run, rev}.
${clientExitCodes}`;

export const jobSuspendHelp = `Usage: shoal job suspend NAME [--addr HOST:PORT] [--json]

Stops the job's schedule: no scheduled run starts until 'shoal job resume'. Runs going on
finish; 'shoal job run' still works.

Options:
${commonFlagsHelp}

${clientExitCodes}`;

export const jobResumeHelp = `Usage: shoal job resume NAME [--addr HOST:PORT] [--json]

Restarts the job's schedule. The times that passed while it was suspended are skipped: they
are neither run late nor recorded missed.

Options:
${commonFlagsHelp}

${clientExitCodes}`;

export const jobRmHelp = `Usage: shoal job rm NAME [--addr HOST:PORT] [--json]

Removes the job: a run going on is stopped (its run is recorded cancelled), then its runs and
their tasks are deleted.

Options:
${commonFlagsHelp}

${clientExitCodes} An unknown job exits 1 (not_found).`;

export const jobGroup: Group = {
  name: 'job',
  about: 'Jobs: chores that run at most once per scheduled time, on some healthy node (kind: Job, created with shoal apply).',
  subcommands: {
    ls: { summary: 'list jobs: schedule, next time, last run', help: jobLsHelp, run: jobLsCommand },
    ps: { summary: "list a job's runs, newest first", help: jobPsHelp, run: jobPsCommand },
    logs: { summary: "print a run's container log (the newest run's by default)", help: jobLogsHelp, run: jobLogsCommand },
    run: { summary: 'start a run now', help: jobRunHelp, run: (argv) => actionCommand(argv, 'run', jobRunHelp) },
    suspend: { summary: "stop the job's schedule", help: jobSuspendHelp, run: (argv) => actionCommand(argv, 'suspend', jobSuspendHelp) },
    resume: { summary: "restart the job's schedule", help: jobResumeHelp, run: (argv) => actionCommand(argv, 'resume', jobResumeHelp) },
    rm: { summary: 'remove a job', help: jobRmHelp, run: jobRmCommand },
  },
};

export const jobHelps: Record<string, string> = { ls: jobLsHelp, ps: jobPsHelp, logs: jobLogsHelp, run: jobRunHelp, suspend: jobSuspendHelp, resume: jobResumeHelp, rm: jobRmHelp };
export const jobGroupHelp = groupHelp(jobGroup);

export function jobCommand(argv: string[]): Promise<number> {
  return runGroup(jobGroup, argv);
}

const listFlags = { ...commonFlags, stale: { type: 'boolean', default: false }, watch: { type: 'boolean', default: false } } as const;

export const jobHead = ['NAME', 'SCHEDULE', 'CONCURRENCY', 'SUSPENDED', 'NEXT', 'ACTIVE', 'LAST'];

export function jobRows(items: readonly JobView[]): string[][] {
  return items.map((j) => [
    j.name, cell(j.schedule ?? 'manual'), j.concurrency, j.suspended ? 'yes' : 'no', time(j.nextAt), String(j.active),
    j.lastFinished === null ? '-' : `${j.lastFinished.state} ${time(j.lastFinished.finishedAt)}`,
  ]);
}

export const runHead = ['RUN', 'CAUSE', 'STATE', 'ATTEMPTS', 'NODE', 'EXIT', 'MESSAGE'];

export function runRows(runs: readonly RunView[]): string[][] {
  return runs.map((r) => [r.id, r.cause, r.state, String(r.attempts), r.nodeName ?? '-', r.exitCode === null ? '-' : String(r.exitCode), cell(r.message ?? '')]);
}

async function jobLsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, listFlags, jobLsHelp);
  if (values.help) return help(jobLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const render = async (): Promise<Rendered> => {
    const body = await read(addr, jobPaths.jobs, jobListSchema, 'job ls', values.stale);
    if (values.json) return jsonRendered(body, values.watch, body.items);
    const text = body.items.length === 0 ? 'no jobs' : tableText(jobHead, jobRows(body.items));
    // Only the leader's hold counts (a follower's says what the rule would do were it leading).
    const held = body.clock?.leader === true && body.clock.hold !== null ? `\n\nscheduled runs held: ${body.clock.hold}` : '';
    return { text: text + held, rev: body.rev };
  };
  if (!values.watch) return printList(render);
  return watchList({ addr, collections: [jobsCollection, jobRunsCollection], command: 'job ls', json: values.json, render });
}

async function jobPsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, listFlags, jobPsHelp);
  if (values.help) return help(jobPsHelp);
  const name = oneName(positionals, 'NAME');
  const addr = resolveAddr(values.addr);
  const render = async (): Promise<Rendered> => {
    const body = await read(addr, jobPaths.job(name), jobDetailSchema, 'job ps', values.stale);
    if (values.json) return jsonRendered(body, values.watch, body.runs);
    return { text: body.runs.length === 0 ? `no runs of ${name} yet` : tableText(runHead, runRows(body.runs)), rev: body.rev };
  };
  if (!values.watch) return printList(render);
  return watchList({ addr, collections: [jobsCollection, jobRunsCollection], command: 'job ps', json: values.json, render });
}

async function jobLogsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...logsFlags, run: { type: 'string' } }, jobLogsHelp);
  if (values.help) return help(jobLogsHelp);
  const name = oneName(positionals, 'NAME');
  const addr = resolveAddr(values.addr);
  const body = await read(addr, jobPaths.job(name), jobDetailSchema, 'job logs');
  const run = values.run === undefined ? body.runs.find((r) => r.taskId !== null) : body.runs.find((r) => r.id === values.run);
  if (run === undefined) {
    const what = values.run === undefined ? `job ${name} has no run that started yet` : `job ${name} has no run ${values.run} (kept runs: shoal job ps ${name})`;
    throw new CliFailure(what, exitCodes.failed);
  }
  if (run.taskId === null) throw new CliFailure(`run ${run.id} never started an attempt (${run.state}${run.message === null ? '' : `: ${run.message}`})`, exitCodes.failed);
  return printLogs({
    addr, path: logsPaths.task(run.taskId), follow: values.follow, tailLines: tailFlag(values.tail), sinceMs: sinceFlag(values.since), json: values.json, command: 'job logs',
  });
}

async function actionCommand(argv: string[], action: 'run' | 'suspend' | 'resume', usage: string): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, usage);
  if (values.help) return help(usage);
  const name = oneName(positionals, 'NAME');
  const addr = resolveAddr(values.addr);
  // A manual run is not retried when its outcome is unknown: a retry could start a second run.
  const schema = action === 'run' ? runAnswerSchema : writtenSchema;
  const { body } = await request(addr, 'POST', jobPaths.action(name, action), schema, { body: {}, retry: 'not-applied', onRetry: retryNotice(`job ${action}`) });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(body)}\n`);
  } else if (action === 'run') {
    process.stdout.write(`started run ${(body as z.infer<typeof runAnswerSchema>).id}; follow it with: shoal job ps ${name}\n`);
  } else {
    process.stdout.write(`${name} ${action === 'suspend' ? 'suspended: no scheduled run starts until shoal job resume' : 'resumed'}\n`);
  }
  return exitCodes.ok;
}

async function jobRmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, commonFlags, jobRmHelp);
  if (values.help) return help(jobRmHelp);
  const name = oneName(positionals, 'NAME');
  const { body } = await request(resolveAddr(values.addr), 'DELETE', jobPaths.job(name), writtenSchema, { retry: 'not-applied', onRetry: retryNotice('job rm') });
  process.stdout.write(values.json ? `${JSON.stringify(body)}\n` : `removed job ${name}\n`);
  return exitCodes.ok;
}
