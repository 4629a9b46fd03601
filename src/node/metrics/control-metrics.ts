// The control plane as metrics. Its state: nodes by state and availability, tasks by desired and
// observed state, services by update state, counted when scraped from this node's applied copy
// of the reserved collections, so every node reports the same figures (up to its apply lag):
// aggregate across nodes with max, not sum (docs/monitoring.md). Its work: the passes of the
// leader's loops (durations, errors, placements), counted by the node that ran them, the leader
// (aggregate with sum).

import { z } from 'zod';
import type { DocumentStore } from '../../../fsm/index.ts';
import { nodesCollection, servicesCollection, tasksCollection } from '../../resources/collections.ts';
import { allDocs } from '../../resources/state.ts';
import type { PassReport } from '../../control/leader-run.ts';
import { latencyBuckets, type Registry, type Sample } from '../../base/metrics.ts';

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

/** Registers the control plane's metrics; returns what the leader's loops report each pass to. */
export function registerControlMetrics(metrics: Registry, store: DocumentStore): (pass: PassReport) => void {
  registerStateMetrics(metrics, store);
  const duration = metrics.histogram('shoal_control_reconcile_duration_seconds', 'Passes of the leader\'s loops, by loop (service, placement, nodes) and outcome (done, conflict, error): reading the state, deciding, writing the plan.', latencyBuckets, ['loop', 'outcome']);
  const errors = metrics.counter('shoal_control_reconcile_errors_total', 'Passes of the leader\'s loops that failed and were retried later, by loop and error code.', ['loop', 'code']);
  const placements = metrics.counter('shoal_scheduler_placements_total', 'Tasks the leader\'s scheduler assigned to a node (plans written).');
  return (p) => {
    duration.observe(p.seconds, { loop: p.loop, outcome: p.outcome });
    if (p.outcome === 'error') errors.inc({ loop: p.loop, code: p.code ?? 'internal' });
    if (p.placements > 0) placements.inc(undefined, p.placements);
  };
}

function registerStateMetrics(metrics: Registry, store: DocumentStore): void {
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
