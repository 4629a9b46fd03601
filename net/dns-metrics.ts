// shoal_dns_queries_total{result}: the service DNS responder's queries by what they got
// (docs/monitoring.md). Counted in a plain object and read at scrape time; every result is
// exported from the start (at 0), so a rate() has a series before the first query.

import type { Registry } from '../src/base/metrics.ts';

export const dnsResults = [
  /** A shoal name with addresses. */
  'answered',
  /** A shoal name with no record of the type asked (AAAA, or a service with no running task). */
  'nodata',
  /** A shoal name that does not exist on the asking network. */
  'nxdomain',
  /** Another name, answered by the host's resolvers. */
  'forwarded',
  /** Another name the host's resolvers did not answer in time, or too many forwards at once: SERVFAIL. */
  'forward_failed',
  /** Another name, asked on an internal network: REFUSED. */
  'refused',
  /** Bytes that are no query this responder reads: FORMERR, NOTIMP or nothing. */
  'malformed',
  /** An asker outside the asking network's subnet: no answer (the responder is no open resolver). */
  'foreign',
] as const;

export type DnsResult = typeof dnsResults[number];
export type DnsCounts = Record<DnsResult, number>;

export function dnsCounts(): DnsCounts {
  return Object.fromEntries(dnsResults.map((r) => [r, 0])) as DnsCounts;
}

export const dnsQueriesMetric = 'shoal_dns_queries_total';

export function registerDnsMetrics(registry: Registry, counts: DnsCounts): void {
  registry.gauge({
    name: dnsQueriesMetric, type: 'counter', labelNames: ['result'],
    help: 'Queries to the service DNS responder on this node\'s gateways, by result (answered, nodata, nxdomain, forwarded, forward_failed, refused, malformed, foreign).',
    read: () => dnsResults.map((result) => ({ labels: { result }, value: counts[result] })),
  });
}
