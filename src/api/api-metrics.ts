// The API's gauges and counters on the node's Registry: what each bound holds now and how often
// it refused. Kept to a few read-at-scrape functions so the registry can be replaced.

import type { Registry } from '../base/metrics.ts';
import type { Refusals, Slots } from './bounds.ts';
import type { ConnectionLimit } from './connection-limit.ts';

export interface ApiBounds {
  refusals: Refusals;
  connections: ConnectionLimit;
  watches: Slots;
  snapshots: Slots;
  logs: Slots;
}

export function registerApiMetrics(metrics: Registry, b: ApiBounds): void {
  const one = (value: number) => [{ value }];
  metrics.gauge({ name: 'shoal_api_connections', help: 'Open HTTP connections to the client API.', type: 'gauge', read: () => one(b.connections.openCount) });
  metrics.gauge({ name: 'shoal_api_watch_streams', help: 'Open server-sent event streams (/v1/watch and /v1/events; bound: watchStreamsMax).', type: 'gauge', read: () => one(b.watches.inUse) });
  metrics.gauge({ name: 'shoal_api_log_streams', help: 'Task log streams being served (local and proxied).', type: 'gauge', read: () => one(b.logs.inUse) });
  metrics.gauge({ name: 'shoal_api_snapshot_downloads', help: 'Snapshot downloads in progress.', type: 'gauge', read: () => one(b.snapshots.inUse) });
  metrics.gauge({
    name: 'shoal_api_refused_total', help: 'Requests and connections refused by an API bound, by limit name.', type: 'counter',
    read: () => b.refusals.entries().map(([limit, value]) => ({ labels: { limit }, value })),
  });
}
