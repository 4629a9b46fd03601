// Jobs' runs as cluster events (event-log.ts), from the applied run records every node holds;
// only the leader records them, so each is recorded once (as control-events.ts does):
//
//   job.started     a run's attempt was created (attempt 1, or a retry under the same run id)
//   job.succeeded   a run's attempt exited 0
//   job.failed      a run failed for good (its attempts used up, or past activeDeadline)
//   job.missed      a scheduled time could not start within its startingDeadline, or passed with no leader
//   job.cancelled   a run was replaced (concurrency replace) or its job removed
//
// A change applied while no node leads, or across a change of leader, may go unrecorded: events
// are for people; the run records (shoal job ps) stay the truth.

import { z } from 'zod';
import type { DocumentStore, JsonObject } from '../../../fsm/index.ts';
import type { WatchEvent } from '../../../fsm/types.ts';
import { jobRunsCollection } from '../../resources/jobs.ts';
import { allDocs } from '../../resources/state.ts';
import type { EventLog } from './event-log.ts';
import type { RaftNode } from '../raft-node.ts';

const runFields = z.looseObject({
  job: z.string().max(256), state: z.string().max(32), attempts: z.number(), nodeId: z.string().max(256).nullable(), exitCode: z.number().nullable(),
  message: z.string().nullable(), scheduledAt: z.number(), cause: z.string().max(32),
});
type RunSeen = z.infer<typeof runFields>;
const messageCharsMax = 256;

/** Starts recording job events into `events`; returns the function that stops it. */
export function watchJobEvents(node: Pick<RaftNode, 'isLeader'>, store: DocumentStore, events: Pick<EventLog, 'recordEvent'>): () => void {
  const seen = new Map<string, RunSeen>();
  const load = (): void => {
    seen.clear();
    for (const d of allDocs(store, jobRunsCollection)) {
      const r = runFields.safeParse(d.doc);
      if (r.success) seen.set(d.id, r.data);
    }
  };
  load();
  const record = (type: string, subject: string, details: JsonObject): void => {
    if (node.isLeader) setImmediate(() => events.recordEvent(type, subject, details));
  };
  const onChange = (ev: WatchEvent): void => {
    if (ev.collection !== jobRunsCollection) return;
    const before = seen.get(ev.id);
    const r = ev.type === 'put' ? runFields.safeParse(ev.doc?.doc) : undefined;
    if (r === undefined || !r.success) {
      seen.delete(ev.id);
      return;
    }
    seen.set(ev.id, r.data);
    for (const e of jobEventsOf(before, r.data)) record(e.type, ev.id, e.details);
  };
  const unsubscribe = [store.subscribe(onChange), store.subscribeRestore(load)];
  return () => {
    for (const u of unsubscribe) u();
  };
}

/** The events one change of a run record makes (pure: tested alone). */
export function jobEventsOf(before: RunSeen | undefined, now: RunSeen): { type: string; details: JsonObject }[] {
  const base: JsonObject = { job: now.job, scheduledAt: now.scheduledAt, cause: now.cause };
  const message = now.message === null ? null : now.message.slice(0, messageCharsMax);
  const out: { type: string; details: JsonObject }[] = [];
  if (now.attempts > (before?.attempts ?? 0)) out.push({ type: 'job.started', details: { ...base, attempt: now.attempts } });
  if (now.state !== before?.state) {
    if (now.state === 'succeeded') out.push({ type: 'job.succeeded', details: { ...base, attempts: now.attempts, node: now.nodeId } });
    else if (now.state === 'failed') out.push({ type: 'job.failed', details: { ...base, attempts: now.attempts, node: now.nodeId, exitCode: now.exitCode, message } });
    else if (now.state === 'missed') out.push({ type: 'job.missed', details: { ...base, message } });
    else if (now.state === 'cancelled') out.push({ type: 'job.cancelled', details: { ...base, message } });
  }
  return out;
}
