// Compose's depends_on, honoured by the placement pass: a pending task of a service whose stack
// says it depends on others is placed only once each of them is running (service_started), runs
// healthy (service_healthy) or has a task that exited 0 (service_completed_successfully). Until
// then the task stays pending with the reason, as `stack ps` and `service ps` show it. The
// dependencies are read from the stacks' records (src/resources/stacks.ts); a dependency whose
// service is gone does not hold anything back (it was removed on purpose).
//
// A pure function of the control state and the records, as placement is. A member of an older
// release leading the cluster does not read the stacks' records: during a rolling upgrade the
// order is not enforced, and the services start as they would without depends_on.

import type { DocumentStore } from '../../fsm/index.ts';
import { allDocs, tasksOf, type ControlState } from '../resources/state.ts';
import { stackRecordSchema, stacksCollection, type StackRecord } from '../resources/stacks.ts';
import { viewOf } from '../resources/task-view.ts';

export type DependsCondition = StackRecord['dependsOn'][string][string];

/** Per service, what it depends on: read from every stack's record. */
export type Dependencies = ReadonlyMap<string, Readonly<Record<string, DependsCondition>>>;

export function readDependencies(store: DocumentStore): Dependencies {
  const out = new Map<string, Record<string, DependsCondition>>();
  for (const d of allDocs(store, stacksCollection)) {
    const r = stackRecordSchema.safeParse(d.doc);
    if (!r.success) continue;
    for (const [service, deps] of Object.entries(r.data.dependsOn)) out.set(service, deps);
  }
  return out;
}

const what: Record<DependsCondition, string> = {
  service_started: 'running',
  service_healthy: 'running and healthy',
  service_completed_successfully: 'completed successfully',
};

/** Whether a dependency's condition holds now. */
export function conditionHolds(state: ControlState, service: string, condition: DependsCondition): boolean {
  const svc = state.services.get(service)?.value;
  if (svc === undefined) return true;
  return tasksOf(state, service).some((t) => {
    const v = viewOf(state, t);
    if (condition === 'service_completed_successfully') return v.record.exitCode === 0 || v.status?.exitCode === 0;
    // A task of the dependency's current spec: during its rolling update, what depends on it
    // waits for the new version to run (the order holds for updates too).
    if (t.value.desired !== 'running' || v.observed !== 'running' || t.value.specVersion !== svc.specVersion) return false;
    return condition === 'service_started' || v.status?.health === 'healthy';
  });
}

/** Why a task of `service` must wait, or null when every dependency holds. */
export function waitingFor(state: ControlState, deps: Dependencies, service: string): string | null {
  const mine = deps.get(service);
  if (mine === undefined) return null;
  const unmet = Object.entries(mine).filter(([dep, c]) => !conditionHolds(state, dep, c));
  if (unmet.length === 0) return null;
  return `waiting for ${unmet.map(([dep, c]) => `${dep} to be ${what[c]}`).join(', ')} (depends_on)`;
}
