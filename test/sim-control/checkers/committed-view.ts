// The committed state as plain records, read straight from the reference store (a DocumentStore
// that applies every entry the moment it is appended: what the cluster has committed, with no
// node's lag). The checkers do their own accounting on it; they never call the loops' predicates.

import type { DocumentStore } from '../../../fsm/index.ts';
import type { Doc } from '../../../fsm/types.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../../src/resources/collections.ts';
import type { NodeRecord, ServiceRecord, TaskRecord, TaskStatus } from '../../../src/resources/records.ts';
import type { ServiceSpec } from '../../../src/resources/spec/service-spec.ts';

export interface CommittedView {
  nodes: ReadonlyMap<string, NodeRecord>;
  services: ReadonlyMap<string, ServiceRecord>;
  tasks: ReadonlyMap<string, TaskRecord>;
  statuses: ReadonlyMap<string, TaskStatus>;
}

export function readCommitted(store: DocumentStore): CommittedView {
  return {
    nodes: docsOf<NodeRecord>(store, nodesCollection),
    services: docsOf<ServiceRecord>(store, servicesCollection),
    tasks: docsOf<TaskRecord>(store, tasksCollection),
    statuses: docsOf<TaskStatus>(store, taskStatusCollection),
  };
}

function docsOf<T>(store: DocumentStore, collection: string): Map<string, T> {
  const out = new Map<string, T>();
  let after: string | undefined;
  for (;;) {
    const page = store.list(collection, { limit: 1000, ...(after !== undefined ? { after } : {}) });
    for (const d of page.items as Doc[]) out.set(d.id, d.doc as unknown as T);
    if (page.next === null) return out;
    after = page.next;
  }
}

/** The spec a task runs: its version's, else the service's current one. */
export function specOfTask(svc: ServiceRecord, t: TaskRecord): ServiceSpec {
  if (t.specVersion === svc.previousSpecVersion && svc.previousSpec !== null) return svc.previousSpec;
  return svc.spec;
}

/**
 * Whether a task still holds its place on its node: wanted running, placed in the node's
 * current epoch (a raised epoch means its node was declared down and it is lost), and not known
 * to have ended (failed or shut down, by the record or by its node's report of that epoch).
 */
export function holdsPlace(view: CommittedView, t: TaskRecord): boolean {
  if (t.desired !== 'running' || t.nodeId === null) return false;
  const node = view.nodes.get(t.nodeId);
  if (node === undefined || node.epoch !== t.nodeEpoch) return false;
  if (t.observed === 'failed' || t.observed === 'shutdown' || t.observed === 'orphaned') return false;
  const s = view.statuses.get(t.id);
  const ended = s !== undefined && s.nodeId === t.nodeId && s.nodeEpoch === t.nodeEpoch && (s.state === 'failed' || s.state === 'shutdown');
  return !ended;
}
