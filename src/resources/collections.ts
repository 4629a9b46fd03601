// Where the control plane's resources live in the replicated store. The collections under
// `shoal.` are reserved: /v1/docs and /v1/txn refuse to write them, so the typed API and the
// leader's loops are the only way in, and every write is validated as the resource it is.

/** Node records (NodeRecord), by node id. Written by the node's agent (registration, runtime), the operator (labels, availability) and the leader (state, epoch). */
export const nodesCollection = 'shoal.nodes';
/** Service records (ServiceRecord), by service name. Written by `apply` and the leader's loops (update status). */
export const servicesCollection = 'shoal.services';
/** Task records (TaskRecord), by task id. Written by the leader's loops, and by `service rebalance` (only a task's desired state, to shutdown, as a compare-and-set). */
export const tasksCollection = 'shoal.tasks';
/** Agents' reports (TaskStatus), by task id. Written only by the agent of the task's node. */
export const taskStatusCollection = 'shoal.task-status';
/** Workload secrets (SecretRecord, src/resources/secrets.ts), by name. Written by PUT and DELETE /v1/secrets/{name}; their values are never read back through the API. */
export const secretsCollection = 'shoal.secrets';

/** Exclusive-task leases (LeaseRecord, lease.ts), by node id. Written only by the node's agent, compared on its epoch. */
export const leasesCollection = 'shoal.leases';

export const reservedPrefix = 'shoal.';

export function isReservedCollection(collection: string): boolean {
  return collection.startsWith(reservedPrefix);
}

/** The feature level the control plane's commands need (fences, value compares): src/base/feature-level.ts. */
export const controlFeatureLevel = 2;

/** Registry logins (RegistryLogin, registry-logins.ts), by a hash of the registry's host; the password is the secret the record names (`registry-<hash>` in shoal.secrets). Written by PUT and DELETE /v1/registries/{host}. */
export const registriesCollection = 'shoal.registries';
