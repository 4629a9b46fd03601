// What a change of spec does to a service's running tasks: nothing, only the number or the
// management of tasks ('scale'), or new tasks in place of the old ones ('replace').
//
// Each field is classified in one table typed over every key of ServiceSpec, so a field added
// to the spec does not compile until someone decides which it is.

import type { ServiceSpec } from './service-spec.ts';

export type SpecChange = 'none' | 'scale' | 'replace';

/**
 * 'replace': the field is part of what a task runs (the container's configuration) or of where
 * it may run (constraints and reservations: a task placed under the old ones may break the new
 * ones). 'scale': the field says how many tasks there are or how the leader manages them; tasks
 * already running are kept as they are and the new value applies to the next decision.
 */
const effect: { readonly [K in keyof ServiceSpec]-?: Exclude<SpecChange, 'none'> } = {
  name: 'replace',
  image: 'replace',
  // The login is read when a task's image is pulled: tasks running keep what they pulled.
  registryLogin: 'scale',
  command: 'replace',
  args: 'replace',
  env: 'replace',
  user: 'replace',
  // A replicated service becoming global (or back) changes what a slot is: every task is new.
  mode: 'replace',
  replicas: 'scale',
  resources: 'replace',
  constraints: 'replace',
  // Strategy, spread label and the per-node cap steer placements to come, not the ones made.
  placement: 'scale',
  maxPerNode: 'scale',
  ports: 'replace',
  mounts: 'replace',
  devices: 'replace',
  capAdd: 'replace',
  capDrop: 'replace',
  privileged: 'replace',
  hostNetwork: 'replace',
  healthCheck: 'replace',
  // The stop signal is written into the container when it is created (Docker's StopSignal).
  stopSignal: 'replace',
  // The grace period is given when a task is stopped, so the next stop uses the new one.
  stopGracePeriodMs: 'scale',
  logs: 'replace',
  restart: 'scale',
  update: 'scale',
  // The budget steers the voluntary disruptions to come (src/control/disruption-budget.ts).
  disruption: 'scale',
  exclusive: 'replace',
  // The files are written when a task's container is created. A secret's value changed later
  // reaches new tasks only (as Swarm's secrets, which cannot change at all): to roll it out to
  // every task, reference a secret of a new name.
  secrets: 'replace',
  networks: 'replace',
  // The service resolver reads the aliases from the spec as it answers: running tasks keep running.
  networkAliases: 'scale',
  // The address is given to a task's container when it is created.
  networkAddresses: 'replace',
  // The container settings are written into the container when it is created.
  workingDir: 'replace',
  hostname: 'replace',
  init: 'replace',
  readOnlyRootfs: 'replace',
  shmSizeBytes: 'replace',
  tmpfs: 'replace',
  extraHosts: 'replace',
  dns: 'replace',
  dnsSearch: 'replace',
  dnsOptions: 'replace',
  ulimits: 'replace',
  sysctls: 'replace',
  labels: 'replace',
};

/** Which fields differ between two specs (deep comparison of their JSON values). */
export function changedFields(before: ServiceSpec, after: ServiceSpec): (keyof ServiceSpec)[] {
  return (Object.keys(effect) as (keyof ServiceSpec)[]).filter((k) => !jsonEqual(before[k], after[k]));
}

export function specChange(before: ServiceSpec, after: ServiceSpec): SpecChange {
  const changed = changedFields(before, after);
  if (changed.length === 0) return 'none';
  return changed.some((k) => effect[k] === 'replace') ? 'replace' : 'scale';
}

/** Equality of JSON values; object key order does not matter. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const keys = Object.keys(ao);
  return keys.length === Object.keys(bo).length && keys.every((k) => Object.hasOwn(bo, k) && jsonEqual(ao[k], bo[k]));
}
