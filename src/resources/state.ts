// The control plane's view of the store: every node, service, task and task status, each with the
// revision it was read at, so that a loop's write can be a compare-and-set on exactly what it
// read (design.md, Fencing). Read from a node's applied store; records are validated once per
// revision and cached, so a re-read after one change costs one parse, not thousands.

import type { DocumentStore } from '../../fsm/index.ts';
import type { Doc } from '../../fsm/types.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from './collections.ts';
import {
  nodeRecordSchema, serviceRecordSchema, taskRecordSchema, taskStatusSchema,
  type NodeRecord, type ServiceRecord, type TaskRecord, type TaskStatus,
} from './records.ts';
import type { z } from 'zod';
import { imagePullRequestSchema, imagePullsCollection, type ImagePullRequest } from './image-pulls.ts';
import { jobRecordSchema, jobRunRecordSchema, jobRunsCollection, jobsCollection, type JobRecord, type JobRunRecord } from './jobs.ts';
import { volumeRecordSchema, volumesCollection, type VolumeRecord } from './volumes.ts';

export interface Versioned<T> {
  value: T;
  /** The document's revision: a write expects it. */
  rev: number;
}

export interface ControlState {
  /** The store revision the state was read at. */
  revision: number;
  nodes: ReadonlyMap<string, Versioned<NodeRecord>>;
  services: ReadonlyMap<string, Versioned<ServiceRecord>>;
  tasks: ReadonlyMap<string, Versioned<TaskRecord>>;
  statuses: ReadonlyMap<string, Versioned<TaskStatus>>;
  /** Jobs and their runs (jobs.ts); absent in states built by hand for tests of other loops (read as none). */
  jobs?: ReadonlyMap<string, Versioned<JobRecord>>;
  runs?: ReadonlyMap<string, Versioned<JobRunRecord>>;
  /** Pulls a stop waits for on another node (image-pulls.ts), by the waiting task's id; absent: none. */
  imagePulls?: ReadonlyMap<string, Versioned<ImagePullRequest>>;
  /** Replicated volumes by name (volumes.ts, issue 41); absent in states built by hand: none. */
  volumes?: ReadonlyMap<string, Versioned<VolumeRecord>>;
  /**
   * The raft voters as the reading node knows them (not a record: raft's configuration), for
   * `node.role` constraints (a voter is a manager, any other member a worker). Absent: not known,
   * and no role constraint holds for any node.
   */
  voters?: ReadonlySet<string>;
}

/** A document of a reserved collection that does not parse as its record: skipped, and reported once. */
export interface Malformed {
  collection: string;
  id: string;
  rev: number;
  problem: string;
}

type Cache<T> = Map<string, Versioned<T> | { rev: number; bad: string }>;

export class ControlStateReader {
  private readonly caches = { nodes: new Map(), services: new Map(), tasks: new Map(), statuses: new Map(), jobs: new Map(), runs: new Map(), imagePulls: new Map(), volumes: new Map() } as {
    nodes: Cache<NodeRecord>; services: Cache<ServiceRecord>; tasks: Cache<TaskRecord>; statuses: Cache<TaskStatus>;
    jobs: Cache<JobRecord>; runs: Cache<JobRunRecord>; imagePulls: Cache<ImagePullRequest>; volumes: Cache<VolumeRecord>;
  };

  constructor(private readonly store: DocumentStore, private readonly onMalformed: (m: Malformed) => void = () => {}) {}

  read(): ControlState {
    return {
      revision: this.store.revision,
      nodes: this.readCollection(nodesCollection, nodeRecordSchema, this.caches.nodes),
      services: this.readCollection(servicesCollection, serviceRecordSchema, this.caches.services),
      tasks: this.readCollection(tasksCollection, taskRecordSchema, this.caches.tasks),
      statuses: this.readCollection(taskStatusCollection, taskStatusSchema, this.caches.statuses),
      jobs: this.readCollection(jobsCollection, jobRecordSchema as z.ZodType<JobRecord>, this.caches.jobs),
      runs: this.readCollection(jobRunsCollection, jobRunRecordSchema, this.caches.runs),
      imagePulls: this.readCollection(imagePullsCollection, imagePullRequestSchema, this.caches.imagePulls),
      volumes: this.readCollection(volumesCollection, volumeRecordSchema, this.caches.volumes),
    };
  }

  private readCollection<T>(collection: string, schema: z.ZodType<T>, cache: Cache<T>): Map<string, Versioned<T>> {
    const out = new Map<string, Versioned<T>>();
    const seen = new Set<string>();
    for (const doc of allDocs(this.store, collection)) {
      seen.add(doc.id);
      const hit = cache.get(doc.id);
      const entry = hit !== undefined && hit.rev === doc.rev ? hit : this.parse(collection, doc, schema);
      cache.set(doc.id, entry);
      if ('value' in entry) out.set(doc.id, entry);
    }
    for (const id of cache.keys()) if (!seen.has(id)) cache.delete(id);
    return out;
  }

  private parse<T>(collection: string, doc: Doc, schema: z.ZodType<T>): Versioned<T> | { rev: number; bad: string } {
    const parsed = schema.safeParse(doc.doc);
    if (parsed.success) return { value: parsed.data, rev: doc.rev };
    const problem = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    this.onMalformed({ collection, id: doc.id, rev: doc.rev, problem });
    return { rev: doc.rev, bad: problem };
  }
}

/** Every document of a collection, page by page. */
export function* allDocs(store: DocumentStore, collection: string): Generator<Doc> {
  let after: string | undefined;
  for (;;) {
    const page = store.list(collection, { limit: 1000, ...(after !== undefined ? { after } : {}) });
    yield* page.items;
    if (page.next === null) return;
    after = page.next;
  }
}

/** The tasks of one service, in slot and creation order. */
export function tasksOf(state: ControlState, service: string): Versioned<TaskRecord>[] {
  return [...state.tasks.values()].filter((t) => t.value.service === service)
    .sort((a, b) => slotKey(a.value.slot).localeCompare(slotKey(b.value.slot)) || a.value.createdAt - b.value.createdAt || a.value.id.localeCompare(b.value.id));
}

function slotKey(slot: number | string): string {
  return typeof slot === 'number' ? `n${String(slot).padStart(8, '0')}` : `s${slot}`;
}
