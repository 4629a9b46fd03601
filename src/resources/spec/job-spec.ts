// The normalized Job spec: what `parseSpecs` returns for a `kind: Job` document and what a
// JobRecord stores (src/resources/jobs.ts). Every field present, "none" is null, quantities in
// base units with the unit in the name, as for a Service (service-spec.ts).
//
// A Job is a chore: the task fields of a Service (what runs, with what, where it may run) plus
// when it runs (`schedule`), what happens when a run is still going at the next time
// (`concurrency`), how late a run may still start (`startingDeadlineMs`), how often a failed run
// is retried (`backoffLimit`), how long a run may take (`activeDeadlineMs`), and how many finished
// runs are kept (`history`, `ttlAfterFinishedMs`). Its runs are always fenced as exclusive tasks
// are (one run's task never runs twice at once, even across a partition).

import { z } from 'zod';
import { constraintSchema, containerSettingsShape, mountSchema, secretRefSchema, type Assert, type ContainerSettings, type Same, type ServiceSpec } from './service-spec.ts';

export type JobConcurrency = 'forbid' | 'replace' | 'allow';

/** The task fields a Job shares with a Service: what runs, with what, and where it may run (the container settings too). */
export type JobTaskFields = Pick<ServiceSpec,
  'image' | 'command' | 'args' | 'env' | 'user' | 'resources' | 'constraints' | 'mounts' | 'devices' | 'capAdd' | 'capDrop' | 'privileged'
  | 'hostNetwork' | 'stopSignal' | 'stopGracePeriodMs' | 'logs' | 'secrets' | 'networks' | 'registryLogin' | keyof ContainerSettings>;

export interface JobSpec extends JobTaskFields {
  /** A DNS label; a Job and a Service never share a name (their runs and tasks are named by it). */
  name: string;
  /** Five-field cron, `@every DURATION` or `@daily`...; null: runs only when asked (`shoal job run`). */
  schedule: string | null;
  /** The IANA time zone cron schedules are read in. */
  timezone: string;
  /** A scheduled time that comes while a run is still going: skip it (forbid), stop the old run (replace), or run both (allow). */
  concurrency: JobConcurrency;
  /** How late a scheduled run may still start (no leader, no capacity, forbid); later it is recorded missed. Null: however late (only the latest time). */
  startingDeadlineMs: number | null;
  /** Failed attempts of one run retried under the same run id (0: never retried). */
  backoffLimit: number;
  /** A run still going this long after its first start is stopped and failed; null: no limit. */
  activeDeadlineMs: number | null;
  /** A finished run is deleted this long after it finished, even within history; null: kept as history says. */
  ttlAfterFinishedMs: number | null;
  /** Finished runs kept: the last `succeeded` that succeeded, the last `failed` that failed, were missed or cancelled. */
  history: { succeeded: number; failed: number };
}

const nat = z.number().int().min(0);
const nonEmpty = z.string().min(1);
const dns = z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/);

export const jobSpecSchema = z.object({
  name: dns,
  image: nonEmpty,
  command: z.array(z.string()).min(1).nullable(),
  args: z.array(z.string()).nullable(),
  env: z.record(z.string(), z.string()),
  user: nonEmpty.nullable(),
  resources: z.object({
    reservations: z.object({ cpuMillis: nat, memoryBytes: nat }).strict(),
    limits: z.object({ cpuMillis: nat.nullable(), memoryBytes: nat.nullable() }).strict(),
  }).strict(),
  constraints: z.array(constraintSchema),
  // A job's mounts share the service's type; the job reader refuses `replicate` (issue 41), so it is never present.
  mounts: z.array(mountSchema),
  devices: z.array(z.object({ hostPath: nonEmpty, containerPath: nonEmpty, permissions: z.string().regex(/^r?w?m?$/).min(1) }).strict()),
  capAdd: z.array(nonEmpty),
  capDrop: z.array(nonEmpty),
  privileged: z.boolean(),
  hostNetwork: z.boolean(),
  stopSignal: nonEmpty,
  stopGracePeriodMs: nat,
  logs: z.object({ maxSizeBytes: nat, maxFiles: z.number().int().min(1) }).strict(),
  secrets: z.array(secretRefSchema),
  networks: z.array(dns),
  // Job records written before the container settings have none of them (jobs came in the same level: none do).
  ...containerSettingsShape,
  registryLogin: nonEmpty.nullable().default(null),
  schedule: nonEmpty.nullable(),
  timezone: nonEmpty,
  concurrency: z.enum(['forbid', 'replace', 'allow']),
  startingDeadlineMs: nat.nullable(),
  backoffLimit: nat,
  activeDeadlineMs: z.number().int().min(1).nullable(),
  ttlAfterFinishedMs: nat.nullable(),
  history: z.object({ succeeded: nat, failed: nat }).strict(),
}).strict();

export type _JobSpecMatchesSchema = Assert<Same<z.infer<typeof jobSpecSchema>, JobSpec>>;
