// The cluster's own events (leader elected, member added, snapshot taken, ...), kept for a bounded
// window, as `docker events` and Nomad's event stream keep theirs. Two scopes:
//
// - cluster: facts about the cluster, written through Raft as documents of the reserved
//   collection `shoal.events`, so every node serves the same stream and it survives restarts.
//   Any node may record one (the write goes through the leader); the leader keeps the window
//   bounded by deleting the oldest. A cluster event that cannot be written (no leader, overload)
//   is kept in the recording node's ring instead, marked unrecorded, rather than lost silently.
// - local: what one node saw (its view of peers, its snapshots, its own failure), kept in a ring
//   in its memory: a node without a leader still records them, and they end with the process.
//
// docs/monitoring.md ("Events") explains why events are split this way. GET /v1/events serves
// both (?local for the ring); the cursor is the store revision (cluster) or the ring's sequence.

import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { encodeCommand, type Doc, type DocumentStore, type JsonObject, type WatchEvent } from '../../../fsm/index.ts';
import type { Logger } from '../../log.ts';
import type { RaftNode } from '../raft-node.ts';

export const eventsCollection = 'shoal.events';
/** Cluster events kept in the store; the leader deletes the oldest beyond it. */
export const eventsRetainedMaxDefault = 1000;
/** Events kept in each node's ring. */
export const localEventsMaxDefault = 1000;
/** Cluster event writes in flight from this node; beyond it an event goes to the ring. */
const writesInflightMax = 32;
/** Deletes per trimming write (the store's txnOpsMax). */
const trimOpsMax = 128;
/** Types: dotted lower-case words, topic first ("member.added", "service.updated"). */
export const eventTypePattern = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

export type EventScope = 'cluster' | 'local';

export interface ClusterEvent {
  /** Where a reader resumes: the store revision that wrote it (cluster) or the ring's sequence number (local). */
  cursor: number;
  scope: EventScope;
  type: string;
  /** What it is about: a node id, later a service or task name. */
  subject: string;
  /** When the recording node saw it (its clock), ISO 8601. */
  time: string;
  /** The node that recorded it, and its term then. */
  node: string;
  nodeName: string;
  term: number;
  details: JsonObject;
}

const jsonObject = z.record(z.string(), z.json());
/** What a document of shoal.events holds. Anyone could write there: documents that do not fit are skipped. */
const eventDocSchema = z.strictObject({
  type: z.string().regex(eventTypePattern).max(64),
  subject: z.string().max(256),
  time: z.string().max(64),
  node: z.string().max(64),
  nodeName: z.string().max(64),
  term: z.number().int().min(0),
  details: jsonObject,
});

/** Which events a reader wants: a type matches itself and every type under it ("member" matches "member.added"). */
export function matchesTypes(type: string, types: readonly string[]): boolean {
  return types.length === 0 || types.some((t) => type === t || type.startsWith(`${t}.`));
}

export interface EventLogOptions {
  node: RaftNode;
  store: DocumentStore;
  identity: { id: string; name: string };
  log: Logger;
  retainedMax?: number;
  localMax?: number;
}

export class EventLog {
  private readonly ring: ClusterEvent[] = [];
  private ringSeq = 0;
  private readonly localListeners = new Set<(ev: ClusterEvent) => void>();
  private readonly idPrefix: string;
  private idSeq = 0;
  private writesInflight = 0;
  /** Documents in shoal.events, kept current from the store's changes (the leader trims on it). */
  private stored = 0;
  private trimming: Promise<void> | undefined;
  private readonly unsubscribe: (() => void)[] = [];
  private readonly retainedMax: number;
  private readonly localMax: number;

  constructor(private readonly o: EventLogOptions) {
    this.retainedMax = o.retainedMax ?? eventsRetainedMaxDefault;
    this.localMax = o.localMax ?? localEventsMaxDefault;
    this.idPrefix = `${o.identity.id.slice(0, 12)}-${randomBytes(3).toString('hex')}`;
    this.stored = this.countStored();
    this.unsubscribe.push(
      o.store.subscribe((ev) => this.onStoreEvent(ev)),
      o.store.subscribeRestore(() => { this.stored = this.countStored(); }),
    );
  }

  /**
   * Records a cluster event: written to the store through the leader, from any node. Never
   * throws and never waits: an event that cannot be written goes to this node's ring, with
   * `details.unrecorded` saying why.
   */
  recordEvent(type: string, subject: string, details: JsonObject = {}): void {
    checkEvent(type, subject);
    const body = this.body(type, subject, details);
    if (this.writesInflight >= writesInflightMax) return this.keepLocally(body, 'too many event writes in flight');
    let data: Uint8Array;
    try {
      data = encodeCommand({ cmd: { op: 'put', collection: eventsCollection, id: `${this.idPrefix}-${++this.idSeq}`, doc: toDoc(body) }, ts: Date.now(), principal: 'shoal' });
    } catch (err) {
      return this.keepLocally(body, (err as Error).message);
    }
    this.writesInflight++;
    let written: Promise<unknown>;
    try {
      written = this.o.node.propose(data);
    } catch (err) {
      this.writesInflight--;
      return this.keepLocally(body, (err as Error).message);
    }
    written.then(
      () => { this.writesInflight--; },
      (err: unknown) => { this.writesInflight--; this.keepLocally(body, (err as Error).message); },
    );
  }

  /** Records a node-local event in this node's ring. */
  recordLocal(type: string, subject: string, details: JsonObject = {}): void {
    checkEvent(type, subject);
    this.push(this.body(type, subject, details));
  }

  /** Cluster events after `cursor` (a store revision), oldest first. */
  clusterSince(cursor: number, types: readonly string[] = []): ClusterEvent[] {
    return this.storedEvents().filter((e) => e.cursor > cursor && matchesTypes(e.type, types));
  }

  /** This node's events after `cursor`; a cursor past the newest (another process's) reads them all. */
  localSince(cursor: number, types: readonly string[] = []): ClusterEvent[] {
    const from = cursor > this.ringSeq ? 0 : cursor;
    return this.ring.filter((e) => e.cursor > from && matchesTypes(e.type, types));
  }

  /** The oldest cursor still held in a scope (0 when empty). */
  oldest(scope: EventScope): number {
    if (scope === 'local') return this.ring[0]?.cursor ?? 0;
    return this.storedEvents()[0]?.cursor ?? 0;
  }

  /** Calls `listener` for each new event of `scope`, in order. Returns the unsubscribe. */
  subscribe(scope: EventScope, listener: (ev: ClusterEvent) => void): () => void {
    if (scope === 'local') {
      this.localListeners.add(listener);
      return () => this.localListeners.delete(listener);
    }
    return this.o.store.subscribe((ev) => {
      const e = ev.collection === eventsCollection && ev.type === 'put' && ev.prevRev === undefined && ev.doc !== undefined ? fromDoc(ev.doc) : undefined;
      if (e !== undefined) listener(e);
    });
  }

  /** Stops following the store; an event recorded afterwards is still written or kept. */
  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }

  private body(type: string, subject: string, details: JsonObject): Omit<ClusterEvent, 'cursor' | 'scope'> {
    return { type, subject, time: new Date().toISOString(), node: this.o.identity.id, nodeName: this.o.identity.name, term: this.o.node.currentTerm, details };
  }

  private keepLocally(body: Omit<ClusterEvent, 'cursor' | 'scope'>, why: string): void {
    this.o.log.debug(`event ${body.type} ${body.subject} kept on this node only: ${why}`);
    this.push({ ...body, details: { ...body.details, unrecorded: why } });
  }

  private push(body: Omit<ClusterEvent, 'cursor' | 'scope'>): void {
    const ev: ClusterEvent = { cursor: ++this.ringSeq, scope: 'local', ...body };
    this.ring.push(ev);
    if (this.ring.length > this.localMax) this.ring.shift();
    for (const l of this.localListeners) l(ev);
  }

  private storedEvents(): ClusterEvent[] {
    const out: ClusterEvent[] = [];
    for (const doc of this.storedDocs()) {
      const e = fromDoc(doc);
      if (e !== undefined) out.push(e);
    }
    return out.sort((a, b) => a.cursor - b.cursor);
  }

  private storedDocs(): Doc[] {
    const items: Doc[] = [];
    let after: string | undefined;
    for (;;) {
      const page = this.o.store.list(eventsCollection, { limit: 1000, ...(after !== undefined ? { after } : {}) });
      items.push(...page.items);
      if (page.next === null) return items;
      after = page.next;
    }
  }

  private countStored(): number {
    return this.storedDocs().length;
  }

  private onStoreEvent(ev: WatchEvent): void {
    if (ev.collection !== eventsCollection) return;
    if (ev.type === 'delete') this.stored--;
    else if (ev.prevRev === undefined) this.stored++;
    // A tenth over the bound before trimming: one trimming write per many events, not per event.
    if (this.stored > this.retainedMax + Math.max(1, Math.floor(this.retainedMax / 10)) && this.o.node.isLeader && this.trimming === undefined) {
      this.trimming = new Promise<void>((r) => setImmediate(r)).then(() => this.trim()).finally(() => { this.trimming = undefined; });
    }
  }

  /** The leader deletes the oldest events beyond the bound, each only if unchanged since read. */
  private async trim(): Promise<void> {
    const excess = this.stored - this.retainedMax;
    if (excess <= 0 || !this.o.node.isLeader) return;
    const oldest = this.storedDocs().sort((a, b) => a.createRev - b.createRev).slice(0, Math.min(excess, trimOpsMax));
    const cmd = { op: 'txn' as const, compare: [], success: oldest.map((d) => ({ op: 'delete' as const, collection: eventsCollection, id: d.id, expect: { rev: d.rev } })), failure: [] };
    try {
      await this.o.node.propose(encodeCommand({ cmd, ts: Date.now(), principal: 'shoal' }));
    } catch (err) {
      this.o.log.debug(`trimming ${eventsCollection} failed (${(err as Error).message}); the next event retries`);
    }
  }
}

/** The document of shoal.events that holds an event. */
function toDoc(b: Omit<ClusterEvent, 'cursor' | 'scope'>): JsonObject {
  return { type: b.type, subject: b.subject, time: b.time, node: b.node, nodeName: b.nodeName, term: b.term, details: b.details };
}

/** A type and subject the stream can carry; anything else is a programming error. */
function checkEvent(type: string, subject: string): void {
  if (!eventTypePattern.test(type) || type.length > 64) throw new Error(`event type '${type}' is not dotted lower-case words (e.g. member.added), at most 64 characters`);
  if (subject.length > 256) throw new Error(`event subject '${subject.slice(0, 40)}…' is longer than 256 characters`);
}

/** The event a document of shoal.events holds; its cursor is the revision that created it. */
function fromDoc(doc: Doc): ClusterEvent | undefined {
  const parsed = eventDocSchema.safeParse(doc.doc);
  return parsed.success ? { cursor: doc.createRev, scope: 'cluster', ...parsed.data, details: parsed.data.details as JsonObject } : undefined;
}
