// Starts a node's service DNS responder (config `dns.enabled`, docker runtime) and registers its
// query counter, which every node exports (at 0 when the responder does not run).

import type { DocumentStore } from '../fsm/index.ts';
import type { Logger } from '../src/log.ts';
import type { Registry } from '../src/base/metrics.ts';
import { dnsCounts, registerDnsMetrics } from './dns-metrics.ts';
import { ServiceDns } from './service-dns.ts';

export function startServiceDns(o: { enabled: boolean; store: DocumentStore; nodeId: string; metrics: Registry; log: Logger }): ServiceDns | null {
  const counts = dnsCounts();
  registerDnsMetrics(o.metrics, counts);
  if (!o.enabled) return null;
  const dns = new ServiceDns({ store: o.store, nodeId: o.nodeId, counts, log: { info: (m) => o.log.info(m), warn: (m) => o.log.warn(m) } });
  dns.start();
  return dns;
}
