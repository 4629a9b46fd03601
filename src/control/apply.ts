// `shoal apply`: what a set of parsed specs changes in the store. A pure function of the control
// state, so the dry run shows exactly what the write would do, and the write is a compare-and-set
// on the revisions the plan read (a concurrent apply of the same service makes one of the two
// decide again).

import { putChange, deleteChange, type Plan } from './changes.ts';
import { servicesCollection } from './collections.ts';
import type { ServiceRecord } from './resources.ts';
import { withNewSpec } from './rolling-update.ts';
import { specChange, type SpecChange } from './spec/spec-change.ts';
import type { ServiceSpec } from './spec/service-spec.ts';
import { tasksOf, type ControlState } from './state.ts';

export interface ServiceOutcome {
  name: string;
  outcome: 'created' | 'updated' | 'unchanged';
  /** For an update: scale (tasks added or removed) or replace (a rolling update). */
  change?: Exclude<SpecChange, 'none'>;
  /** For a rolling update: the tasks that will be replaced. */
  replaces?: string[];
}

export interface ApplyPlan {
  plan: Plan;
  services: ServiceOutcome[];
}

export function planApply(state: ControlState, specs: readonly ServiceSpec[], now: number): ApplyPlan {
  const plan: Plan = { changes: [], compares: [] };
  const services: ServiceOutcome[] = [];
  for (const spec of specs) {
    const cur = state.services.get(spec.name);
    if (cur === undefined) {
      plan.changes.push(putChange(servicesCollection, spec.name, newService(spec, now), null));
      services.push({ name: spec.name, outcome: 'created' });
      continue;
    }
    const change = specChange(cur.value.spec, spec);
    if (change === 'none') {
      services.push({ name: spec.name, outcome: 'unchanged' });
      continue;
    }
    plan.changes.push(putChange(servicesCollection, spec.name, withNewSpec(cur.value, spec, change === 'replace', now), cur.rev));
    const replaces = change === 'replace' ? tasksOf(state, spec.name).filter((t) => t.value.desired === 'running').map((t) => t.value.id) : undefined;
    services.push({ name: spec.name, outcome: 'updated', change, ...(replaces !== undefined ? { replaces } : {}) });
  }
  return { plan, services };
}

export function newService(spec: ServiceSpec, now: number): ServiceRecord {
  return {
    name: spec.name, spec, specVersion: 1, previousSpec: null, previousSpecVersion: null,
    updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, createdAt: now, updatedAt: now,
  };
}

/** Removing a service: its record goes; the orchestrator then shuts its tasks down and reaps them. */
export function planRemove(state: ControlState, name: string): Plan | undefined {
  const cur = state.services.get(name);
  if (cur === undefined) return undefined;
  return { changes: [deleteChange(servicesCollection, name, cur.rev)], compares: [] };
}
