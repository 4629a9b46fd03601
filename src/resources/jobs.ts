// Jobs and their runs as records of the store, in reserved collections (written only through the
// typed routes, `apply` and the leader's job loop, src/control/job-loop.ts).
//
// At most once per scheduled time: a run's id is derived from (job, scheduled time), and the
// leader creates it with "must not exist" in the same transaction that moves the job's
// `lastScheduledAt` past that time (a compare on the job's revision). A new leader reads
// `lastScheduledAt` and never decides that time again; a deposed leader's late write is refused
// (fenced by its term, and the run already exists). A run's attempts are tasks of the task
// machinery, named by the job (`service` = the job's name, `slot` = the run id), run by the
// node agent as an exclusive task (under its node's lease), so a frozen node's copy is killed
// before the leader starts another attempt elsewhere.

import { z } from 'zod';
import { jobSpecSchema, type JobSpec } from './spec/job-spec.ts';
import { type Assert, type Same, type ServiceSpec } from './spec/service-spec.ts';
import { imagePlatformsSchema, type ImagePlatforms, type ServiceRecord } from './records.ts';
import { compareText } from '../base/order.ts';

/** Job records (JobRecord), by job name. Written by `apply`, suspend/resume, and the leader's job loop. */
export const jobsCollection = 'shoal.jobs';
/** Job runs (JobRunRecord), by run id. Written by the leader's job loop, and by `job run` (a manual run). */
export const jobRunsCollection = 'shoal.job-runs';

export interface JobRecord {
  name: string;
  spec: JobSpec;
  /** 1 at creation, one more on every change of spec. A run's tasks run the version the run was created with. */
  specVersion: number;
  /** Suspended: no scheduled run is created (times passed meanwhile are skipped, not missed); running runs go on. */
  suspended: boolean;
  /**
   * Log time the schedule counts from: creation, a change of schedule, or a resume. Scheduled
   * times at or before it are never run.
   */
  scheduleFrom: number;
  /** The latest scheduled time the loop decided (a run created, or recorded missed); null before the first. */
  lastScheduledAt: number | null;
  /** The apply source that created it (as a service's), or null. */
  source: string | null;
  /**
   * What the spec's pinned image offers (issue 40), written by apply as a service's: its runs are
   * placed only on nodes of one of these platforms. Absent: not known (not pinned, or an older release).
   */
  imagePlatforms?: ImagePlatforms[];
  createdAt: number;
  updatedAt: number;
}

export type JobRunState = 'pending' | 'running' | 'succeeded' | 'failed' | 'missed' | 'cancelled';

export interface JobRunRecord {
  /** `<job>-<scheduled time, UTC, compact ISO>`, plus `-manual` for `job run`: one per scheduled time. */
  id: string;
  job: string;
  /** Log time (ms) it was scheduled for; for a manual run, when it was asked. */
  scheduledAt: number;
  cause: 'schedule' | 'manual';
  /** The job's specVersion its tasks run. */
  specVersion: number;
  /**
   * pending: created, no attempt started yet (waiting for the previous runs to stop, or a retry's
   * backoff); running: an attempt's task exists; succeeded: an attempt exited 0; failed: its
   * attempts failed (backoffLimit), or activeDeadline; missed: it could not start within
   * startingDeadline; cancelled: replaced by a later run (concurrency replace), or the job removed.
   */
  state: JobRunState;
  /** Attempts started (tasks created). */
  attempts: number;
  /** The current (or last) attempt's task; null before the first. */
  taskId: string | null;
  /** The node of the last attempt; null before it is placed. */
  nodeId: string | null;
  exitCode: number | null;
  /** What a person should know (why it failed or was missed); null if nothing. */
  message: string | null;
  /** The next attempt not before this log time (retry backoff); null when none waits. */
  notBefore: number | null;
  /** Log times: created, first attempt seen running, finished (any final state), last changed. */
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  updatedAt: number;
}

const nat = z.number().int().min(0);

export const jobRecordSchema = z.object({
  name: z.string().min(1),
  spec: jobSpecSchema,
  specVersion: z.number().int().min(1),
  suspended: z.boolean(),
  scheduleFrom: nat,
  lastScheduledAt: nat.nullable(),
  source: z.string().min(1).max(128).nullable(),
  imagePlatforms: imagePlatformsSchema.optional(),
  createdAt: nat,
  updatedAt: nat,
}).strict().refine((r) => r.name === r.spec.name, { path: ['name'], message: 'must equal spec.name' });

export const jobRunRecordSchema = z.object({
  id: z.string().min(1),
  job: z.string().min(1),
  scheduledAt: nat,
  cause: z.enum(['schedule', 'manual']),
  specVersion: z.number().int().min(1),
  state: z.enum(['pending', 'running', 'succeeded', 'failed', 'missed', 'cancelled']),
  attempts: nat,
  taskId: z.string().min(1).nullable(),
  nodeId: z.string().min(1).nullable(),
  exitCode: z.number().int().nullable(),
  message: z.string().nullable(),
  notBefore: nat.nullable(),
  createdAt: nat,
  startedAt: nat.nullable(),
  finishedAt: nat.nullable(),
  updatedAt: nat,
}).strict();

export type _JobRecordMatchesSchema = Assert<Same<z.infer<typeof jobRecordSchema>, JobRecord>>;
export type _JobRunRecordMatchesSchema = Assert<Same<z.infer<typeof jobRunRecordSchema>, JobRunRecord>>;

const finalStates: ReadonlySet<JobRunState> = new Set(['succeeded', 'failed', 'missed', 'cancelled']);

export function isFinishedRun(r: JobRunRecord): boolean {
  return finalStates.has(r.state);
}

/** `20261206t073000z`, with milliseconds when there are any (`@every 1500ms`). */
function compactTime(ms: number): string {
  const iso = new Date(ms).toISOString();
  const base = iso.slice(0, 19).replace(/[-:]/g, '').toLowerCase();
  return iso.endsWith('.000Z') ? `${base}z` : `${base}${iso.slice(20, 23)}z`;
}

/** The run of `job` scheduled at `scheduledAt`: the same id whoever decides it, so it is created once. */
export function runId(job: string, scheduledAt: number, cause: JobRunRecord['cause']): string {
  return `${job}-${compactTime(scheduledAt)}${cause === 'manual' ? '-manual' : ''}`;
}

export function newRun(job: JobRecord, scheduledAt: number, cause: JobRunRecord['cause'], now: number): JobRunRecord {
  return {
    id: runId(job.name, scheduledAt, cause), job: job.name, scheduledAt, cause, specVersion: job.specVersion, state: 'pending', attempts: 0,
    taskId: null, nodeId: null, exitCode: null, message: null, notBefore: null, createdAt: now, startedAt: null, finishedAt: null, updatedAt: now,
  };
}

export function newJob(spec: JobSpec, now: number, source: string | null): JobRecord {
  return { name: spec.name, spec, specVersion: 1, suspended: false, scheduleFrom: now, lastScheduledAt: null, source, createdAt: now, updatedAt: now };
}

/**
 * The service spec a job's task runs: the job's task fields, one slot, never restarted by the
 * agent (the job loop decides retries), exclusive (under the node's lease).
 */
export function jobTaskSpec(spec: JobSpec): ServiceSpec {
  return {
    name: spec.name, image: spec.image, registryLogin: spec.registryLogin, command: spec.command, args: spec.args, env: spec.env, user: spec.user, mode: 'replicated', replicas: 1,
    resources: spec.resources, constraints: spec.constraints, placement: { strategy: 'spread', spreadOver: null }, maxPerNode: null, ports: [],
    mounts: spec.mounts, devices: spec.devices, capAdd: spec.capAdd, capDrop: spec.capDrop, privileged: spec.privileged, hostNetwork: spec.hostNetwork,
    healthCheck: null, stopSignal: spec.stopSignal, stopGracePeriodMs: spec.stopGracePeriodMs, logs: spec.logs,
    restart: { condition: 'never', delayMs: 0, maxDelayMs: 0, maxAttempts: null },
    update: { parallelism: 1, delayMs: 0, monitorMs: 0, failureAction: 'pause', order: 'stop-first' }, disruption: null, exclusive: true,
    secrets: spec.secrets, networks: spec.networks,
    // A job's task has no network aliases (a job's run is not a name others look up).
    networkAliases: {},
    // Nor a fixed address (a Job has no networkAddresses).
    networkAddresses: {},
    workingDir: spec.workingDir, hostname: spec.hostname, init: spec.init, readOnlyRootfs: spec.readOnlyRootfs, shmSizeBytes: spec.shmSizeBytes,
    tmpfs: spec.tmpfs, extraHosts: spec.extraHosts, dns: spec.dns, dnsSearch: spec.dnsSearch, dnsOptions: spec.dnsOptions, ulimits: spec.ulimits,
    sysctls: spec.sysctls, labels: spec.labels,
  };
}

/**
 * The job as the service record its tasks are read against (placement, the node agent, network
 * addresses). A job keeps no previous spec: a task of an older version reads as the current
 * spec (a container already created keeps what it was created with; one not yet started starts
 * with the job's spec as it is now).
 */
export function jobAsService(job: JobRecord, specVersion: number = job.specVersion, runId: string | null = null): ServiceRecord {
  const spec = jobTaskSpec(job.spec);
  // The attempt knows its run: SHOAL_JOB and SHOAL_JOB_RUN (a chore can make itself idempotent by it).
  if (runId !== null) spec.env = Object.fromEntries(Object.entries({ ...spec.env, SHOAL_JOB: job.name, SHOAL_JOB_RUN: runId }).sort(([a], [b]) => compareText(a, b)));
  return {
    name: job.name, spec, specVersion, previousSpec: null, previousSpecVersion: null,
    updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: job.source, forcedDisruptions: [],
    // Placement reads them as a service's (placement.ts): a run goes only where the image runs.
    ...(job.imagePlatforms !== undefined ? { imagePlatforms: job.imagePlatforms } : {}),
    createdAt: job.createdAt, updatedAt: job.updatedAt,
  };
}
