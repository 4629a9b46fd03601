// Replicated volumes as metrics (issue 41, docs/volumes.md), read when scraped from this node's
// applied copy of the volume records (every node reports the same figures up to its apply lag:
// aggregate across nodes with max). Labelled by volume name.
//
//   shoal_volume_newest_copy_timestamp_seconds{volume}  when the newest complete copy was recorded (log time); absent with none
//   shoal_volume_replication_lag_seconds{volume}        how old that copy is now: what a failover now would lose, at most
//   shoal_volume_replication_interval_seconds{volume}   its `every`
//   shoal_volume_copies_diverged{volume}                diverged copies kept (a replaced writer's, or after a restore)
//
// ShoalVolumeCopyStale (docs/monitoring/shoal-rules.yml) fires when the newest copy is older than
// three intervals.

import type { DocumentStore } from '../../../fsm/index.ts';
import type { Registry, Sample } from '../../base/metrics.ts';
import { allDocs } from '../../resources/state.ts';
import { divergedCopies, newestComplete, sameVersion, volumeRecordSchema, volumesCollection, type VolumeRecord } from '../../resources/volumes.ts';

function volumes(store: DocumentStore): VolumeRecord[] {
  const out: VolumeRecord[] = [];
  for (const d of allDocs(store, volumesCollection)) {
    const r = volumeRecordSchema.safeParse(d.doc);
    if (r.success) out.push(r.data);
  }
  return out;
}

/** When the newest complete copy was first recorded (log time, ms); null with none. */
export function newestCopyAt(rec: VolumeRecord): number | null {
  const newest = newestComplete(rec);
  if (newest === null) return null;
  return Math.min(...rec.held.filter((c) => sameVersion(c.version, newest)).map((c) => c.atMs));
}

export function registerVolumeMetrics(metrics: Registry, store: DocumentStore, nowMs: () => number): void {
  metrics.gauge({
    name: 'shoal_volume_newest_copy_timestamp_seconds', help: 'When each replicated volume\'s newest complete copy was recorded by a holder (log time, Unix seconds).', type: 'gauge',
    labelNames: ['volume'],
    read: () => volumes(store).flatMap((v): Sample[] => {
      const at = newestCopyAt(v);
      return at === null ? [] : [{ labels: { volume: v.name }, value: at / 1000 }];
    }),
  });
  metrics.gauge({
    name: 'shoal_volume_replication_lag_seconds', help: 'How old each replicated volume\'s newest complete copy is: at most what a failover now would lose.', type: 'gauge',
    labelNames: ['volume'],
    read: () => {
      const now = nowMs();
      return volumes(store).flatMap((v): Sample[] => {
        const at = newestCopyAt(v);
        return at === null ? [] : [{ labels: { volume: v.name }, value: Math.max(0, now - at) / 1000 }];
      });
    },
  });
  metrics.gauge({
    name: 'shoal_volume_replication_interval_seconds', help: 'Each replicated volume\'s interval between copies (replicate.every).', type: 'gauge',
    labelNames: ['volume'],
    read: () => volumes(store).map((v): Sample => ({ labels: { volume: v.name }, value: v.everyMs / 1000 })),
  });
  metrics.gauge({
    name: 'shoal_volume_copies_diverged', help: 'Diverged copies of each replicated volume kept on the nodes (a replaced writer\'s later versions, or those after a restored one).', type: 'gauge',
    labelNames: ['volume'],
    read: () => volumes(store).map((v): Sample => ({ labels: { volume: v.name }, value: divergedCopies(v).length })),
  });
}
