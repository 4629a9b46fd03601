// The control plane's collections (`shoal.*`, src/resources/collections.ts) are written only through
// the typed routes, which validate every record as the resource it is, and by the leader's loops
// and the agents. /v1/docs and /v1/txn refuse to write them, saying which route to use; they
// may still read them (a record read there is the `record` of the typed answers), except a
// secret's value, which no read path answers (redact.ts).

import { firewallPoliciesCollection, networksCollection } from '../resources/network-resources.ts';
import { isReservedCollection, nodesCollection, secretsCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../resources/collections.ts';
import type { Problem } from './validate.ts';
import { jobRunsCollection, jobsCollection } from '../resources/jobs.ts';

const typedRoutes: Readonly<Record<string, string>> = {
  [servicesCollection]: 'create and change services with POST /v1/apply (shoal apply -f), and use DELETE /v1/services/{name}, POST /v1/services/{name}/scale, /rollback or /rebalance',
  [nodesCollection]: 'use POST /v1/nodes/{ref}/availability (shoal node drain|pause|activate) and POST /v1/nodes/{ref}/labels (shoal node label)',
  [tasksCollection]: 'tasks are written by the leader\'s loops only; read them with GET /v1/tasks (shoal task ls)',
  [networksCollection]: 'create and change networks with POST /v1/apply (shoal apply -f), and use DELETE /v1/networks/{name} (shoal network rm)',
  [firewallPoliciesCollection]: 'create and change firewall policies with POST /v1/apply (shoal apply -f), and use DELETE /v1/firewall-policies/{name} (shoal policy rm)',
  [taskStatusCollection]: 'task reports are written by the nodes\' agents only; read them with GET /v1/tasks (shoal task ls)',
  [secretsCollection]: 'use PUT /v1/secrets/{name} (shoal secret create|set) and DELETE /v1/secrets/{name} (shoal secret rm)',
  [jobsCollection]: 'create and change jobs with POST /v1/apply (shoal apply -f), and use DELETE /v1/jobs/{name}, POST /v1/jobs/{name}/suspend or /resume (shoal job ...)',
  [jobRunsCollection]: 'runs are written by the leader\'s job loop, and by POST /v1/jobs/{name}/run (shoal job run)',
};

/** The refusal of a write to `collection` at `path`, or undefined when it is not reserved. */
export function reservedWrite(collection: string, path: string): Problem | undefined {
  if (!isReservedCollection(collection)) return undefined;
  const use = typedRoutes[collection] ?? 'collections under shoal. are reserved for the control plane\'s resources';
  return { path, message: `${collection} is reserved for the control plane and is not written through /v1/docs or /v1/txn: ${use}` };
}
