// What Docker answers, read through zod (bytes from a daemon are input like any other), and
// mapped to the runtime port's ContainerInfo and RuntimeEvent. Pure: tested without a daemon.
// Only the fields shoal reads are declared; the rest of Docker's answer is dropped.

import { z } from 'zod';
import type { ContainerInfo, ContainerState, HealthState, ImageInfo, Labels, RuntimeEvent } from './runtime.ts';

const labelsSchema = z.record(z.string(), z.string()).nullish().transform((l) => l ?? {});

/** GET /containers/{id}/json, the part shoal reads. */
export const containerInspectSchema = z.object({
  Id: z.string().min(1),
  Name: z.string(),
  Config: z.object({ Image: z.string(), Labels: labelsSchema }),
  State: z.object({
    Status: z.string(),
    ExitCode: z.number().int(),
    StartedAt: z.string(),
    FinishedAt: z.string(),
    OOMKilled: z.boolean().optional(),
    Error: z.string().optional(),
    Health: z.object({ Status: z.string() }).nullish(),
    Pid: z.number().int().optional(),
  }),
});

/** One entry of GET /containers/json. */
export const containerSummarySchema = z.object({ Id: z.string().min(1) });

/** One entry of GET /images/json. Untagged images list `<none>:<none>` (older daemons) or nothing. */
export const imageSummarySchema = z.object({
  Id: z.string().min(1),
  RepoTags: z.array(z.string()).nullish(),
  RepoDigests: z.array(z.string()).nullish(),
});

export function toImageInfo(raw: z.infer<typeof imageSummarySchema>): ImageInfo {
  const refs = [...(raw.RepoTags ?? []), ...(raw.RepoDigests ?? [])].filter((r) => !r.startsWith('<none>'));
  return { id: raw.Id, refs };
}

/** One line of GET /events (type container). */
export const dockerEventSchema = z.object({
  Type: z.string(),
  Action: z.string(),
  Actor: z.object({ ID: z.string().min(1), Attributes: z.record(z.string(), z.string()).nullish() }),
  time: z.number().optional(),
  timeNano: z.number().optional(),
});

const states: Record<string, ContainerState> = {
  created: 'created', running: 'running', paused: 'paused', restarting: 'restarting', exited: 'exited', dead: 'dead',
  // Being removed: it will not run again, and is gone at the next look.
  removing: 'dead',
};

const healthStates = new Set<string>(['starting', 'healthy', 'unhealthy']);

function toHealth(s: string | undefined): HealthState | null {
  return s !== undefined && healthStates.has(s) ? (s as HealthState) : null;
}

/** Docker's RFC 3339 times (nanosecond fractions) as wall ms; its zero time (year 1) as null. */
export function dockerTimeMs(s: string): number | null {
  const ms = Date.parse(s);
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

export function toContainerInfo(raw: z.infer<typeof containerInspectSchema>): ContainerInfo {
  const st = raw.State;
  const state = states[st.Status] ?? 'dead';
  const errors: string[] = [];
  if (st.OOMKilled === true) errors.push('OOM-killed: the container reached its memory limit');
  if (st.Error !== undefined && st.Error !== '') errors.push(st.Error);
  return {
    id: raw.Id,
    name: raw.Name.replace(/^\//, ''),
    image: raw.Config.Image,
    labels: raw.Config.Labels,
    state,
    exitCode: state === 'exited' || state === 'dead' ? st.ExitCode : null,
    startedAt: dockerTimeMs(st.StartedAt),
    finishedAt: dockerTimeMs(st.FinishedAt),
    health: toHealth(st.Health?.Status),
    error: errors.length > 0 ? errors.join('; ') : null,
    // The host pid of its first process: the agent kills it directly when Docker hangs at a lease's expiry.
    ...(state === 'running' && st.Pid !== undefined && st.Pid > 0 ? { pid: st.Pid } : {}),
  };
}

/** The attributes Docker adds to a container event next to the container's labels. */
const eventOwnAttributes = new Set(['image', 'name', 'exitCode']);

/** The actions shoal subscribes to, as Docker's `event` filter names them. */
export const subscribedActions = ['create', 'start', 'die', 'health_status', 'destroy', 'oom'] as const;

/** A Docker event as a RuntimeEvent; undefined for an action the port does not carry. */
export function toRuntimeEvent(raw: z.infer<typeof dockerEventSchema>): RuntimeEvent | undefined {
  if (raw.Type !== 'container') return undefined;
  const attrs = raw.Actor.Attributes ?? {};
  const labels: Labels = {};
  for (const [k, v] of Object.entries(attrs)) if (!eventOwnAttributes.has(k)) labels[k] = v;
  // timeNano exceeds 2^53 and loses nanoseconds as a JS number; milliseconds survive.
  const at = raw.timeNano !== undefined ? Math.floor(raw.timeNano / 1e6) : (raw.time ?? 0) * 1000;
  const base = { containerId: raw.Actor.ID, labels, at };
  const [action, detail] = raw.Action.split(/:\s*/, 2) as [string, string | undefined];
  switch (action) {
    case 'create': case 'start': case 'destroy': case 'oom':
      return { type: action, ...base };
    case 'die': {
      const code = Number(attrs.exitCode);
      return { type: 'die', ...base, ...(Number.isInteger(code) ? { exitCode: code } : {}) };
    }
    case 'health_status': {
      const health = toHealth(detail);
      return health === null ? undefined : { type: 'health', ...base, health };
    }
    default:
      return undefined;
  }
}
