// Replicated volumes as cluster events (event-log.ts; issue 41, docs/volumes.md), from the
// applied volume records every node holds; only the leader records them, so each is recorded
// once (as control-events.ts does):
//
//   volume.replicated    the volume's newest complete copy moved on (a holder recorded a newer
//                        version of the line); at most one a minute per volume, with the number of
//                        versions since the last one said (an interval of 1 s would say it 60 times)
//   volume.copy_failed   the writer recorded a replication error (a new message; not again while it repeats)
//   volume.restored      a writer's era began from a copy on another node (a failover: the task
//                        restores it before it starts), or an operator restored a version or an
//                        empty volume (shoal volume restore)
//
// A change applied while no node leads may go unrecorded: events are for people; the volume
// records (shoal volume inspect) stay the truth.

import type { DocumentStore, JsonObject } from '../../../fsm/index.ts';
import type { WatchEvent } from '../../../fsm/types.ts';
import { allDocs } from '../../resources/state.ts';
import { newestComplete, restoreWriter, versionName, volumeRecordSchema, volumesCollection, type VolumeEra, type VolumeRecord } from '../../resources/volumes.ts';
import type { EventLog } from './event-log.ts';
import type { RaftNode } from '../raft-node.ts';

/** volume.replicated at most this often per volume (log time). */
export const replicatedEventEveryMs = 60_000;

interface Seen {
  newestSeq: number;
  lastEra: VolumeEra | null;
  erasLength: number;
  error: string | null;
  /** When volume.replicated was last recorded, and the versions counted since. */
  replicatedAt: number | null;
  versionsSince: number;
}

function seenOf(rec: VolumeRecord, before?: Seen): Seen {
  return {
    newestSeq: newestComplete(rec)?.seq ?? 0, lastEra: rec.eras.at(-1) ?? null, erasLength: rec.eras.length, error: rec.lastError?.message ?? null,
    replicatedAt: before?.replicatedAt ?? null, versionsSince: before?.versionsSince ?? 0,
  };
}

const sameEra = (a: VolumeEra | null, b: VolumeEra | null): boolean => a === b || (a !== null && b !== null && a.node === b.node && a.epoch === b.epoch && a.fromSeq === b.fromSeq);

/** Starts recording volume events into `events`; `nowMs` is the log time. Returns the function that stops it. */
export function watchVolumeEvents(node: Pick<RaftNode, 'isLeader'>, store: DocumentStore, events: Pick<EventLog, 'recordEvent'>, nowMs: () => number): () => void {
  const seen = new Map<string, Seen>();
  const load = (): void => {
    seen.clear();
    for (const d of allDocs(store, volumesCollection)) {
      const r = volumeRecordSchema.safeParse(d.doc);
      if (r.success) seen.set(d.id, seenOf(r.data));
    }
  };
  load();
  const record = (type: string, subject: string, details: JsonObject): void => {
    if (node.isLeader) setImmediate(() => events.recordEvent(type, subject, details));
  };
  const onChange = (ev: WatchEvent): void => {
    if (ev.collection !== volumesCollection) return;
    const before = seen.get(ev.id);
    const r = ev.type === 'put' ? volumeRecordSchema.safeParse(ev.doc?.doc) : undefined;
    if (r === undefined || !r.success) {
      seen.delete(ev.id);
      return;
    }
    const rec = r.data;
    const now = seenOf(rec, before);
    seen.set(ev.id, now);
    if (before === undefined) return;
    const newest = newestComplete(rec);
    if (newest !== null && now.newestSeq > before.newestSeq) {
      now.versionsSince++;
      const at = nowMs();
      if (now.replicatedAt === null || at - now.replicatedAt >= replicatedEventEveryMs) {
        record('volume.replicated', ev.id, { version: versionName(newest), nodes: rec.held.filter((c) => c.version.seq === newest.seq).map((c) => c.node).sort(), versions: now.versionsSince });
        now.replicatedAt = at;
        now.versionsSince = 0;
      }
    }
    if (now.error !== null && now.error !== before.error) record('volume.copy_failed', ev.id, { message: now.error.slice(0, 512) });
    if (!sameEra(now.lastEra, before.lastEra) || now.erasLength !== before.erasLength) {
      const era = now.lastEra;
      if (era === null && before.lastEra !== null) record('volume.restored', ev.id, { by: 'operator', version: null, node: null });
      else if (era !== null && era.node === restoreWriter) record('volume.restored', ev.id, { by: 'operator', version: era.base === null ? null : versionName(era.base), node: null });
      else if (era !== null && era.base !== null && before.lastEra?.node !== era.node) record('volume.restored', ev.id, { by: 'failover', version: versionName(era.base), node: era.node });
    }
  };
  const unsubscribe = [store.subscribe(onChange), store.subscribeRestore(load)];
  return () => {
    for (const u of unsubscribe) u();
  };
}
