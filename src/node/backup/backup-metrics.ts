// The backups' metrics, read at scrape time from `shoal.backup-status` and the targets in the
// store, so every node answers the same values whichever took the backup; the alert rule
// ShoalBackupMissing (docs/monitoring/shoal-rules.yml) fires when a scheduled target has had no
// good backup in two of its intervals.

import type { DocumentStore } from '../../../fsm/index.ts';
import type { Registry } from '../../base/metrics.ts';
import { readStatus, readTargets } from './backup-runner.ts';

export function registerBackupMetrics(metrics: Registry, store: DocumentStore): void {
  const each = (value: (name: string, intervalMs: number) => number | undefined) => () => readTargets(store).flatMap((t) => {
    const v = value(t.name, t.intervalMs);
    return v === undefined ? [] : [{ labels: { target: t.name }, value: v }];
  });
  metrics.gauge({
    name: 'shoal_backup_last_success_timestamp_seconds', type: 'gauge', labelNames: ['target'],
    help: 'When the last good backup to each target was taken (Unix seconds); 0 when there has been none.',
    read: each((name) => (readStatus(store, name)?.lastSuccessAt ?? 0) / 1000),
  });
  metrics.gauge({
    name: 'shoal_backup_interval_seconds', type: 'gauge', labelNames: ['target'],
    help: 'How often each target is backed up (its --every), in seconds; 0: only on demand.',
    read: each((_name, intervalMs) => intervalMs / 1000),
  });
  metrics.gauge({
    name: 'shoal_backup_failures', type: 'gauge', labelNames: ['target'],
    help: 'Backups to each target that failed since its last good one.',
    read: each((name) => readStatus(store, name)?.failures ?? 0),
  });
}
