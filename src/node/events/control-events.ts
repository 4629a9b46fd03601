// The control plane's changes as cluster events (src/node/events/event-log.ts), from the applied
// records every node holds; only the leader records them, so each is recorded once:
//
//   service.created / .updated / .removed   a service record appeared, its spec version rose, it went
//   service.rollout                         its rolling update changed state (updating, completed, paused, rolling-back, ...)
//   service.disruption-forced               a voluntary disruption was forced past its disruption budget (--force)
//   node.registered                         a node record appeared (a node joined the control plane)
//   node.suspect / .down / .ready           the leader's node health changed a node's state
//   node.drained / .paused / .activated     an operator changed a node's availability
//   task.failed                             a node's agent reported a task failed (exited, could not start, unhealthy); not a job's attempt (job-events.ts)
//
// Each node keeps the few fields compared, read from the store at start and after a snapshot is
// installed (which changes the state without events, and records none). A change applied while
// no node leads, or across a change of leader, may go unrecorded: events are for people, the
// records stay the truth.

import { z } from 'zod';
import type { DocumentStore, JsonObject } from '../../../fsm/index.ts';
import type { WatchEvent } from '../../../fsm/types.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../resources/collections.ts';
import { allDocs } from '../../resources/state.ts';
import { jobsCollection } from '../../resources/jobs.ts';
import type { EventLog } from './event-log.ts';
import type { RaftNode } from '../raft-node.ts';

// Only the fields compared: a record the control plane would refuse as a whole is still followed by these.
const forcedFields = z.looseObject({
  cause: z.string().max(32), nodeId: z.string().max(256).nullable(), specVersion: z.number().nullable(), at: z.number(), by: z.string().max(256).nullable(), message: z.string().max(1024),
});
const serviceFields = z.looseObject({ specVersion: z.number(), updateStatus: z.looseObject({ state: z.string().max(32) }), forcedDisruptions: z.array(forcedFields).max(64).optional() });
const nodeFields = z.looseObject({ name: z.string().max(256), state: z.string().max(32), availability: z.string().max(32) });
const statusFields = z.looseObject({ state: z.string().max(32), nodeId: z.string().max(256), exitCode: z.number().nullable(), message: z.string().nullable() });
/** A task's message in an event is cut to this many characters (the task record keeps it whole). */
const messageCharsMax = 256;
type ServiceSeen = z.infer<typeof serviceFields>;
type NodeSeen = z.infer<typeof nodeFields>;

const availabilityEvents: Record<string, string> = { drain: 'node.drained', pause: 'node.paused', active: 'node.activated' };

/** Starts recording the control plane's changes into `events`; returns the function that stops it. */
export function watchControlEvents(node: Pick<RaftNode, 'isLeader'>, store: DocumentStore, events: Pick<EventLog, 'recordEvent'>): () => void {
  const services = new Map<string, ServiceSeen>();
  const nodes = new Map<string, NodeSeen>();
  /** Each task's reported state (the agent's own document). */
  const tasks = new Map<string, string>();
  const load = (): void => {
    services.clear();
    nodes.clear();
    tasks.clear();
    for (const d of allDocs(store, servicesCollection)) setParsed(services, d.id, serviceFields, d.doc);
    for (const d of allDocs(store, nodesCollection)) setParsed(nodes, d.id, nodeFields, d.doc);
    for (const d of allDocs(store, taskStatusCollection)) {
      const r = statusFields.safeParse(d.doc);
      if (r.success) tasks.set(d.id, r.data.state);
    }
  };
  load();
  // Recorded after the apply that caused them, out of the store's callback (recording proposes).
  const record = (type: string, subject: string, details: JsonObject): void => {
    if (node.isLeader) setImmediate(() => events.recordEvent(type, subject, details));
  };
  const onChange = (ev: WatchEvent): void => {
    if (ev.collection === servicesCollection) onService(ev, services, record);
    else if (ev.collection === nodesCollection) onNode(ev, nodes, record);
    else if (ev.collection === taskStatusCollection) onTaskStatus(ev, tasks, store, record);
  };
  const unsubscribe = [store.subscribe(onChange), store.subscribeRestore(load)];
  return () => {
    for (const u of unsubscribe) u();
  };
}

type RecordFn = (type: string, subject: string, details: JsonObject) => void;

function onService(ev: WatchEvent, seen: Map<string, ServiceSeen>, record: RecordFn): void {
  const before = seen.get(ev.id);
  if (ev.type === 'delete') {
    seen.delete(ev.id);
    if (before !== undefined) record('service.removed', ev.id, { specVersion: before.specVersion });
    return;
  }
  const now = setParsed(seen, ev.id, serviceFields, ev.doc?.doc);
  if (now === undefined) return;
  if (before === undefined) {
    record('service.created', ev.id, { specVersion: now.specVersion });
    return;
  }
  if (now.specVersion !== before.specVersion) record('service.updated', ev.id, { specVersion: now.specVersion, from: before.specVersion });
  const state = now.updateStatus.state;
  if (state !== before.updateStatus.state && state !== 'none') record('service.rollout', ev.id, { state, from: before.updateStatus.state, specVersion: now.specVersion });
  const key = (f: z.infer<typeof forcedFields>): string => `${f.cause}/${f.nodeId ?? ''}/${f.specVersion ?? ''}/${f.at}`;
  const known = new Set((before.forcedDisruptions ?? []).map(key));
  for (const f of now.forcedDisruptions ?? []) {
    if (!known.has(key(f))) record('service.disruption-forced', ev.id, { cause: f.cause, node: f.nodeId, specVersion: f.specVersion, by: f.by, message: f.message });
  }
}

function onNode(ev: WatchEvent, seen: Map<string, NodeSeen>, record: RecordFn): void {
  const before = seen.get(ev.id);
  if (ev.type === 'delete') {
    seen.delete(ev.id);
    return;
  }
  const now = setParsed(seen, ev.id, nodeFields, ev.doc?.doc);
  if (now === undefined) return;
  if (before === undefined) {
    record('node.registered', ev.id, { name: now.name, state: now.state, availability: now.availability });
    return;
  }
  if (now.state !== before.state && ['suspect', 'down', 'ready'].includes(now.state)) record(`node.${now.state}`, ev.id, { name: now.name, from: before.state });
  const availability = availabilityEvents[now.availability];
  if (now.availability !== before.availability && availability !== undefined) record(availability, ev.id, { name: now.name, from: before.availability });
}

function onTaskStatus(ev: WatchEvent, seen: Map<string, string>, store: DocumentStore, record: RecordFn): void {
  const before = seen.get(ev.id);
  const r = ev.type === 'put' ? statusFields.safeParse(ev.doc?.doc) : undefined;
  if (r === undefined || !r.success) {
    seen.delete(ev.id);
    return;
  }
  seen.set(ev.id, r.data.state);
  if (r.data.state !== 'failed' || before === 'failed') return;
  const service = (store.get(tasksCollection, ev.id)?.doc as { service?: unknown } | undefined)?.service;
  // A job's attempt ends by exiting, 0 or not: job.succeeded or job.failed say it (job-events.ts).
  if (typeof service === 'string' && store.get(jobsCollection, service) !== undefined && store.get(servicesCollection, service) === undefined) return;
  record('task.failed', ev.id, {
    service: typeof service === 'string' ? service : null, node: r.data.nodeId, exitCode: r.data.exitCode,
    message: r.data.message === null ? null : r.data.message.slice(0, messageCharsMax),
  });
}

/** Stores the parsed fields of `doc` under `id` and returns them; a document without them is forgotten. */
function setParsed<T>(seen: Map<string, T>, id: string, schema: z.ZodType<T>, doc: unknown): T | undefined {
  const r = schema.safeParse(doc);
  if (!r.success) {
    seen.delete(id);
    return undefined;
  }
  seen.set(id, r.data);
  return r.data;
}
