// The control plane's view of the store: every node, service, task and task status, each with the
// revision it was read at, so that a loop's write can be a compare-and-set on exactly what it
// read (design.md, Fencing). Read from a node's applied store; records are validated once per
// revision and cached, so a re-read after one change costs one parse, not thousands.
//
// A read costs what changed since the previous one, not the size of the store: at the same store
// revision it is the same state; after a few writes, the store's retained events name the
// documents that changed, and only those are read again (the other collections' maps are the
// previous read's, shared; a state is never changed once handed out). With 5,000 tasks a full
// read is some 10,000 documents listed and looked up, and the leader's loops and the agent read
// once per pass: the leak check's cluster spent its whole CPU there (bench/RESULTS.md). A full
// read only at the first read, when the events since have been dropped, or after a restore to
// an earlier revision.

import { CursorExpiredError, type DocumentStore } from '../../fsm/index.ts';
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
import { compareText } from '../base/order.ts';

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

/** A read's state, every collection present. */
type ReadState = ControlState & Required<Pick<ControlState, 'jobs' | 'runs' | 'imagePulls' | 'volumes'>>;

export class ControlStateReader {
  private readonly caches = { nodes: new Map(), services: new Map(), tasks: new Map(), statuses: new Map(), jobs: new Map(), runs: new Map(), imagePulls: new Map(), volumes: new Map() } as {
    nodes: Cache<NodeRecord>; services: Cache<ServiceRecord>; tasks: Cache<TaskRecord>; statuses: Cache<TaskStatus>;
    jobs: Cache<JobRecord>; runs: Cache<JobRunRecord>; imagePulls: Cache<ImagePullRequest>; volumes: Cache<VolumeRecord>;
  };

  /** The previous read, which the next one starts from. */
  private last: ReadState | undefined;

  constructor(private readonly store: DocumentStore, private readonly onMalformed: (m: Malformed) => void = () => {}) {}

  read(): ControlState {
    const revision = this.store.revision;
    const last = this.last;
    if (last !== undefined && last.revision === revision) return last;
    const changed = last === undefined || revision < last.revision ? undefined : this.changedSince(last.revision);
    const read = <T>(collection: string, schema: z.ZodType<T>, cache: Cache<T>, prev: ReadonlyMap<string, Versioned<T>> | undefined): ReadonlyMap<string, Versioned<T>> =>
      (prev === undefined || changed === undefined ? this.readCollection(collection, schema, cache) : this.update(collection, schema, cache, prev, changed.get(collection)));
    const state: ReadState = {
      revision,
      nodes: read(nodesCollection, nodeRecordSchema, this.caches.nodes, last?.nodes),
      services: read(servicesCollection, serviceRecordSchema, this.caches.services, last?.services),
      tasks: read(tasksCollection, taskRecordSchema, this.caches.tasks, last?.tasks),
      statuses: read(taskStatusCollection, taskStatusSchema, this.caches.statuses, last?.statuses),
      jobs: read(jobsCollection, jobRecordSchema as z.ZodType<JobRecord>, this.caches.jobs, last?.jobs),
      runs: read(jobRunsCollection, jobRunRecordSchema, this.caches.runs, last?.runs),
      imagePulls: read(imagePullsCollection, imagePullRequestSchema, this.caches.imagePulls, last?.imagePulls),
      volumes: read(volumesCollection, volumeRecordSchema, this.caches.volumes, last?.volumes),
    };
    this.last = state;
    return state;
  }

  /** The ids changed after `rev`, by collection; undefined when the store no longer holds those events. */
  private changedSince(rev: number): Map<string, Set<string>> | undefined {
    let events;
    try {
      events = this.store.eventsSince(rev);
    } catch (err) {
      if (err instanceof CursorExpiredError) return undefined;
      throw err;
    }
    const out = new Map<string, Set<string>>();
    for (const ev of events) {
      let ids = out.get(ev.collection);
      if (ids === undefined) out.set(ev.collection, (ids = new Set()));
      ids.add(ev.id);
    }
    return out;
  }

  /** `prev` with the documents `ids` read again (prev itself when none changed), in id order as a full read gives. */
  private update<T>(collection: string, schema: z.ZodType<T>, cache: Cache<T>, prev: ReadonlyMap<string, Versioned<T>>, ids: ReadonlySet<string> | undefined): ReadonlyMap<string, Versioned<T>> {
    if (ids === undefined) return prev;
    const out = new Map(prev);
    let added = false;
    for (const id of ids) {
      const doc = this.store.get(collection, id);
      if (doc === undefined) {
        cache.delete(id);
        out.delete(id);
        continue;
      }
      const hit = cache.get(id);
      const entry = hit !== undefined && hit.rev === doc.rev ? hit : this.parse(collection, doc, schema);
      cache.set(id, entry);
      if (!('value' in entry)) {
        out.delete(id);
        continue;
      }
      if (!out.has(id)) added = true;
      out.set(id, entry);
    }
    // A document new to the map went to its end: the loops read collections in id order (the
    // store's), which placement's ties and the simulator's runs depend on.
    return added ? new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : out;
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

type TaskIndex<K> = WeakMap<ReadonlyMap<string, Versioned<TaskRecord>>, Map<K, Versioned<TaskRecord>[]>>;

/** The tasks grouped by `key`, built once per tasks map read (a map is never changed once read, and is shared by the reads that did not change it). */
function indexTasks<K>(cache: TaskIndex<K>, tasks: ReadonlyMap<string, Versioned<TaskRecord>>, key: (t: TaskRecord) => K): Map<K, Versioned<TaskRecord>[]> {
  let index = cache.get(tasks);
  if (index === undefined) {
    index = new Map();
    for (const t of tasks.values()) {
      const k = key(t.value);
      const list = index.get(k);
      if (list === undefined) index.set(k, [t]);
      else list.push(t);
    }
    cache.set(tasks, index);
  }
  return index;
}

const tasksByNode: TaskIndex<string | null> = new WeakMap();
const tasksByService: TaskIndex<string> = new WeakMap();

/** The tasks assigned to `nodeId`, in id order: every agent reads its own at each pass. */
export function tasksOnNode(state: ControlState, nodeId: string): readonly Versioned<TaskRecord>[] {
  return indexTasks(tasksByNode, state.tasks, (t) => t.nodeId).get(nodeId) ?? [];
}

/** The tasks of one service, in slot and creation order (from the index, not a scan of every task per service). */
export function tasksOf(state: ControlState, service: string): Versioned<TaskRecord>[] {
  const index = indexTasks(tasksByService, state.tasks, (t) => t.service);
  return [...(index.get(service) ?? [])]
    .sort((a, b) => compareText(slotKey(a.value.slot), slotKey(b.value.slot)) || a.value.createdAt - b.value.createdAt || compareText(a.value.id, b.value.id));
}

function slotKey(slot: number | string): string {
  return typeof slot === 'number' ? `n${String(slot).padStart(8, '0')}` : `s${slot}`;
}
