// The control plane's state as metrics: nodes by state and availability, tasks by desired and
// observed state, services by update state. Counted when scraped from this node's applied copy
// of the reserved collections, so every node reports the same figures (up to its apply lag):
// aggregate across nodes with max, not sum (docs/monitoring.md).

import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';
import { nodesCollection, servicesCollection, tasksCollection } from '../control/collections.ts';
import { allDocs } from '../control/state.ts';
import type { Registry, Sample } from './metrics.ts';

// Only the fields counted: a record the control plane would refuse as a whole still counts by
// these, and one without them is left out.
const nodeFields = z.looseObject({ state: z.string().max(32), availability: z.string().max(32) });
const taskFields = z.looseObject({ desired: z.string().max(32), observed: z.string().max(32) });
const serviceFields = z.looseObject({ updateStatus: z.looseObject({ state: z.string().max(32) }) });

/** Counts of the documents of `collection`, by the labels `labelsOf` reads from each (undefined: skipped). */
function countBy(store: DocumentStore, collection: string, labelsOf: (doc: unknown) => Record<string, string> | undefined): Sample[] {
  const counts = new Map<string, Sample>();
  for (const d of allDocs(store, collection)) {
    const labels = labelsOf(d.doc);
    if (labels === undefined) continue;
    const key = JSON.stringify(labels);
    const s = counts.get(key);
    if (s === undefined) counts.set(key, { labels, value: 1 });
    else s.value++;
  }
  return [...counts.values()];
}

export function registerControlMetrics(metrics: Registry, store: DocumentStore): void {
  metrics.gauge({
    name: 'shoal_control_nodes', help: 'Node records by state (ready, suspect, down) and availability (active, pause, drain).', type: 'gauge',
    labelNames: ['state', 'availability'],
    read: () => countBy(store, nodesCollection, (doc) => {
      const r = nodeFields.safeParse(doc);
      return r.success ? { state: r.data.state, availability: r.data.availability } : undefined;
    }),
  });
  metrics.gauge({
    name: 'shoal_control_tasks', help: 'Task records by desired state (running, shutdown) and observed state (pending, assigned, starting, running, failed, shutdown, orphaned).', type: 'gauge',
    labelNames: ['desired', 'observed'],
    read: () => countBy(store, tasksCollection, (doc) => {
      const r = taskFields.safeParse(doc);
      return r.success ? { desired: r.data.desired, observed: r.data.observed } : undefined;
    }),
  });
  metrics.gauge({
    name: 'shoal_control_services', help: 'Service records by the state of their rolling update (none, updating, paused, completed, rolling-back, ...).', type: 'gauge',
    labelNames: ['update_state'],
    read: () => countBy(store, servicesCollection, (doc) => {
      const r = serviceFields.safeParse(doc);
      return r.success ? { update_state: r.data.updateStatus.state } : undefined;
    }),
  });
}
