// `shoal apply`: what a set of parsed specs changes in the store. A pure function of the control
// state, so the dry run shows exactly what the write would do, and the write is a compare-and-set
// on the revisions the plan read (a concurrent apply of the same service makes one of the two
// decide again).

import { putChange, deleteChange, type Plan } from '../resources/changes.ts';
import { servicesCollection } from '../resources/collections.ts';
import type { ServiceRecord } from '../resources/records.ts';
import { assessBudget, withForced } from './disruption-budget.ts';
import { withNewSpec } from './rolling-update.ts';
import { specChange, type SpecChange } from '../resources/spec/spec-change.ts';
import type { ServiceSpec } from '../resources/spec/service-spec.ts';
import { tasksOf, type ControlState } from '../resources/state.ts';

export interface ServiceOutcome {
  name: string;
  outcome: 'created' | 'updated' | 'unchanged' | 'removed';
  /** For an update: scale (tasks added or removed) or replace (a rolling update). */
  change?: Exclude<SpecChange, 'none'>;
  /** For a rolling update: the tasks that will be replaced. */
  replaces?: string[];
  /** With force: the rolling update this apply starts (or the one under way) may go past the disruption budget. */
  forced?: boolean;
}

export interface ApplyPlan {
  plan: Plan;
  services: ServiceOutcome[];
}

export interface ApplyOptions {
  /** The apply's source (a file's name): new services record it. */
  source?: string;
  /** Remove the services of `source` the specs no longer name (`shoal apply --prune`). */
  prune?: boolean;
  /** The rolling updates the apply starts may go past the disruption budget (`--force`); who forced them. */
  force?: { by: string | null };
}

export function planApply(state: ControlState, specs: readonly ServiceSpec[], now: number, opts: ApplyOptions = {}): ApplyPlan {
  const plan: Plan = { changes: [], compares: [] };
  const services: ServiceOutcome[] = [];
  const source = opts.source ?? null;
  for (const spec of specs) {
    const cur = state.services.get(spec.name);
    if (cur === undefined) {
      plan.changes.push(putChange(servicesCollection, spec.name, newService(spec, now, source), null));
      services.push({ name: spec.name, outcome: 'created' });
      continue;
    }
    const change = specChange(cur.value.spec, spec);
    if (change === 'none') {
      // Forcing the update under way: the same spec applied again with force lets it past the budget.
      const forced = opts.force !== undefined && updating.has(cur.value.updateStatus.state);
      if (forced && opts.force !== undefined) plan.changes.push(putChange(servicesCollection, spec.name, { ...forceUpdate(state, cur.value, now, opts.force.by), updatedAt: now }, cur.rev));
      services.push({ name: spec.name, outcome: 'unchanged', ...(forced ? { forced } : {}) });
      continue;
    }
    const next = withNewSpec(cur.value, spec, change === 'replace', now);
    const forced = opts.force !== undefined && (change === 'replace' || updating.has(next.updateStatus.state));
    const record = forced && opts.force !== undefined ? forceUpdate(state, next, now, opts.force.by) : next;
    plan.changes.push(putChange(servicesCollection, spec.name, record, cur.rev));
    const replaces = change === 'replace' ? tasksOf(state, spec.name).filter((t) => t.value.desired === 'running').map((t) => t.value.id) : undefined;
    services.push({ name: spec.name, outcome: 'updated', change, ...(replaces !== undefined ? { replaces } : {}), ...(forced ? { forced } : {}) });
  }
  if (opts.prune === true && source !== null) {
    // Only what this source created, and no longer names: never a service made by hand or by
    // another file.
    const named = new Set(specs.map((s) => s.name));
    for (const [name, cur] of state.services) {
      if (cur.value.source !== source || named.has(name)) continue;
      plan.changes.push(deleteChange(servicesCollection, name, cur.rev));
      services.push({ name, outcome: 'removed' });
    }
  }
  return { plan, services };
}

export function newService(spec: ServiceSpec, now: number, source: string | null = null): ServiceRecord {
  return {
    name: spec.name, spec, specVersion: 1, previousSpec: null, previousSpecVersion: null,
    updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source, forcedDisruptions: [], createdAt: now, updatedAt: now,
  };
}

/**
 * The record with its rolling update (or rollback) to the current spec version let past the
 * disruption budget: the leader replaces its tasks as parallelism allows, whatever is unavailable.
 */
export function forceUpdate(state: ControlState, svc: ServiceRecord, now: number, by: string | null): ServiceRecord {
  const a = assessBudget(state, svc);
  const message = `the rolling update to spec version ${svc.specVersion} may go past the disruption budget (${a.limit})${by === null ? '' : `; forced by ${by}`}`;
  return withForced(svc, { cause: 'update', nodeId: null, specVersion: svc.specVersion, at: now, by, message });
}

const updating: ReadonlySet<string> = new Set(['updating', 'rolling-back']);

/** Removing a service: its record goes; the orchestrator then shuts its tasks down and reaps them. */
export function planRemove(state: ControlState, name: string): Plan | undefined {
  const cur = state.services.get(name);
  if (cur === undefined) return undefined;
  return { changes: [deleteChange(servicesCollection, name, cur.rev)], compares: [] };
}
