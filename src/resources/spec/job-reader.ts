// The Job kind: its field table (the whole authoring vocabulary of a job) and the checks that
// span fields. The task fields are read by the same readers as a Service's (service-fields.ts),
// so a mount or an env is written, defaulted and refused the same way in both.

import { contradiction } from './constraint.ts';
import { specLimits } from './limits.ts';
import {
  INVALID, Problems, boolean, defaultStruct, integer, list, nullable, oneOf, readFields, required, string, struct, withDefault, type Fields, type Read,
} from './reader.ts';
import { isTimeZone, parseSchedule } from './schedule.ts';
import {
  argv, capability, checkVolumeOptionsAgree, constraint, device, dnsLabel, duration, env, image, logs, mount, registryLogin, resources, secretPath, secretRef, signal, user,
} from './service-fields.ts';
import { checkSecretPaths } from './service-reader.ts';
import { canonicalRegistryHost } from '../registry-logins.ts';
import type { JobSpec } from './job-spec.ts';
import { buildContainerSettings, checkContainerSettings, containerSettingsFields, type ContainerSettingsInput } from './container-settings.ts';
import type { ContainerSettings } from './service-spec.ts';

/** Finished runs kept at most per outcome (each is a record, and its task for `job logs`). */
export const jobHistoryMax = 100;
/** Retries of one run at most. */
export const jobBackoffLimitMax = 100;

/** The authoring shape: the spec's fields, durations under their input names (in ms). */
type JobInput = Omit<JobSpec, 'stopGracePeriodMs' | 'startingDeadlineMs' | 'activeDeadlineMs' | 'ttlAfterFinishedMs' | keyof ContainerSettings> & ContainerSettingsInput & {
  stopGracePeriod: number;
  startingDeadline: number | null;
  activeDeadline: number | null;
  ttlAfterFinished: number | null;
};

const history = struct<{ succeeded: number; failed: number }, JobSpec['history']>({
  succeeded: withDefault(integer(0, jobHistoryMax), () => 3),
  failed: withDefault(integer(0, jobHistoryMax), () => 1),
}, (s) => s);

const scheduleText = string({ nonEmpty: true, maxChars: 256 });
const timezone = string({ nonEmpty: true, maxChars: 64 });

const jobFields: Fields<JobInput> = {
  name: required(dnsLabel),
  image: required(image),
  registryLogin: withDefault(nullable(registryLogin), () => null),
  command: withDefault(nullable(argv('entrypoint')), () => null),
  args: withDefault(nullable(list(string(), specLimits.argsItemsMax)), () => null),
  env: withDefault(env, () => ({})),
  user: withDefault(nullable(user), () => null),
  resources: defaultStruct(resources),
  constraints: withDefault(list(constraint), () => []),
  mounts: withDefault(list(mount), () => []),
  devices: withDefault(list(device), () => []),
  capAdd: withDefault(list(capability), () => []),
  capDrop: withDefault(list(capability), () => []),
  privileged: withDefault(boolean, () => false),
  hostNetwork: withDefault(boolean, () => false),
  stopSignal: withDefault(signal, () => 'SIGTERM'),
  stopGracePeriod: withDefault(duration(), () => 10_000),
  logs: defaultStruct(logs),
  secrets: withDefault(list(secretRef), () => []),
  networks: withDefault(list(dnsLabel), () => []),
  schedule: withDefault(nullable(scheduleText), () => null),
  timezone: withDefault(timezone, () => 'UTC'),
  concurrency: withDefault(oneOf(['forbid', 'replace', 'allow'] as const), () => 'forbid'),
  startingDeadline: withDefault(nullable(duration(1_000)), () => null),
  backoffLimit: withDefault(integer(0, jobBackoffLimitMax), () => 3),
  activeDeadline: withDefault(nullable(duration(1_000)), () => null),
  ttlAfterFinished: withDefault(nullable(duration()), () => null),
  history: defaultStruct(history),
  ...containerSettingsFields,
};

/** The names of the authoring fields of a Job (for docs and tests). */
export const jobFieldNames: readonly string[] = Object.keys(jobFields);

/** Reads one Job document (without apiVersion and kind) found at `at` (`jobs[0]`). */
export function readJob(value: unknown, at: string, problems: Problems): Read<JobSpec> {
  const r = readFields(value, at, problems, jobFields);
  if (r === INVALID) return INVALID;
  const s = r.values;
  const before = problems.count;
  if (s.timezone !== undefined && !isTimeZone(s.timezone)) {
    problems.add(`${at}.timezone`, `${JSON.stringify(s.timezone)} is not a time zone this runtime knows (an IANA name such as Europe/Paris or UTC)`);
  }
  if (s.schedule !== undefined && s.schedule !== null) {
    const parsed = parseSchedule(s.schedule, s.timezone !== undefined && isTimeZone(s.timezone) ? s.timezone : 'UTC');
    if (!parsed.ok) problems.add(`${at}.schedule`, parsed.message);
    else if (parsed.value.kind === 'every' && r.written.has('timezone')) {
      problems.add(`${at}.timezone`, '@every counts from 1970-01-01T00:00Z whatever the zone; remove timezone, or write a cron schedule');
    }
  } else if (s.schedule === null) {
    for (const f of ['timezone', 'startingDeadline'] as const) {
      if (r.written.has(f)) problems.add(`${at}.${f}`, 'applies to a scheduled job; write a schedule, or remove it');
    }
  }
  distinct(s.mounts?.map((m) => m.target), `${at}.mounts`, 'target', problems);
  checkVolumeOptionsAgree(s.mounts, `${at}.mounts`, problems);
  s.mounts?.forEach((m, i) => {
    if (m.replicate !== undefined) problems.add(`${at}.mounts[${i}].replicate`, 'a job cannot replicate a volume: only an exclusive service, its one writer, may (docs/volumes.md)');
  });
  // A secret's file path: `db` and `/run/secrets/db` are one file; an absolute one is no mount's or tmpfs's target.
  distinct(s.secrets?.map((x) => secretPath(x.target)), `${at}.secrets`, 'target', problems);
  checkSecretPaths(s, at, problems);
  distinct(s.networks, `${at}.networks`, '', problems);
  checkContainerSettings(s, s, at, problems);
  if (s.hostNetwork === true && (s.networks?.length ?? 0) > 0) {
    problems.add(`${at}.networks`, 'a job with hostNetwork uses the node\'s own network and cannot join overlay networks; drop hostNetwork or networks');
  }
  const added = new Set(s.capAdd ?? []);
  (s.capDrop ?? []).forEach((c, i) => {
    if (added.has(c)) problems.add(`${at}.capDrop[${i}]`, `${c} is also in capAdd; a capability is added or dropped, not both`);
  });
  if (s.constraints !== undefined) {
    const clash = contradiction(s.constraints);
    if (clash !== null) problems.add(`${at}.constraints`, `${clash}, so no node could ever take a run`);
  }
  if (!r.ok || problems.count > before) return INVALID;
  return build(s as JobInput);
}

function distinct(items: readonly string[] | undefined, at: string, field: string, problems: Problems): void {
  const seen = new Map<string, number>();
  (items ?? []).forEach((k, i) => {
    const first = seen.get(k);
    const where = field === '' ? `${at}[${i}]` : `${at}[${i}].${field}`;
    if (first !== undefined) problems.add(where, `${k} is already given by ${at.split('.').pop() ?? ''}[${first}]`);
    else seen.set(k, i);
  });
}

function build(s: JobInput): JobSpec {
  return {
    name: s.name, image: s.image, registryLogin: s.registryLogin === null ? null : canonicalRegistryHost(s.registryLogin), command: s.command, args: s.args, env: s.env, user: s.user, resources: s.resources, constraints: s.constraints,
    mounts: s.mounts, devices: s.devices, capAdd: [...s.capAdd].sort(), capDrop: [...s.capDrop].sort(), privileged: s.privileged,
    hostNetwork: s.hostNetwork, stopSignal: s.stopSignal, stopGracePeriodMs: s.stopGracePeriod, logs: s.logs, secrets: s.secrets,
    networks: [...s.networks].sort(), schedule: s.schedule === null ? null : s.schedule.trim(), timezone: s.timezone, concurrency: s.concurrency,
    startingDeadlineMs: s.startingDeadline, backoffLimit: s.backoffLimit, activeDeadlineMs: s.activeDeadline, ttlAfterFinishedMs: s.ttlAfterFinished,
    history: s.history,
    ...buildContainerSettings(s),
  };
}
