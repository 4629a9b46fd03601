// Which answer a question asked on one network gets: a pure function of the DNS view
// (dns-view.ts), the asking network and the question. docs/network.md, "Service discovery",
// lists the names; in short, for a service `web` on network `front`, asked on `front`:
//
//   web   web.front   web.front.shoal   tasks.web   tasks.web.front   tasks.web.front.shoal
//
// all name the addresses of web's running tasks on `front` (there is no virtual IP, so the
// service name and `tasks.` give the same set, as Swarm's dnsrr mode). Names are matched without
// regard to case. Isolation: an asker sees the networks it is on, no others. That is the asking
// network (the socket's), and, when the asker is a task attached to more networks, those too (a
// container is given the DNS server of its first network only): `db` on `back`, asked on `front`
// by a task on both, gets db's addresses on `back`. A name of a service on none of them, or a
// name of another network, is NXDOMAIN, whatever the other networks hold. Everything under
// `.shoal` is ours: an unknown name there is NXDOMAIN, never forwarded. Any other name goes to
// the host's resolvers, except on an internal network, whose DNS answers only its own names
// (REFUSED: the server will not, rather than the name does not exist).

import type { DnsView } from './dns-view.ts';

/** The zone every shoal name can be written in, and that is never forwarded. */
export const zoneLabel = 'shoal';
/** The prefix Swarm operators use for the addresses of every task of a service. */
export const tasksLabel = 'tasks';

export type Decision =
  /** NOERROR with these A records (none: the name exists, without records of that type). */
  | { kind: 'records'; addresses: readonly string[] }
  | { kind: 'nxdomain' }
  /** Not a shoal name: ask the host's resolvers. */
  | { kind: 'forward' }
  /** Not a shoal name, on an internal network: not answered. */
  | { kind: 'refused' };

export interface DnsQuestion {
  name: string;
  type: string;
  /** Absent means IN. */
  class?: string | undefined;
}

type Match = { kind: 'addresses'; addresses: readonly string[] } | { kind: 'nxdomain' } | null;

/** `from`: the asker's address, which names the networks it sees when it is a task's. */
export function decide(view: DnsView, network: string, q: DnsQuestion, from?: string): Decision {
  const asking = view.networks.get(network);
  // The asking network first: a service on several of the asker's networks is answered there.
  const seen = [network, ...(asking?.members.get(from ?? '') ?? []).filter((n) => n !== network)];
  const match = asking === undefined ? null : matchName(view, seen, labelsOf(q.name));
  const inClass = q.class === undefined || q.class === 'IN' || q.class === 'ANY';
  if (match === null || !inClass) return asking?.internal === false ? { kind: 'forward' } : { kind: 'refused' };
  if (match.kind === 'nxdomain') return match;
  return { kind: 'records', addresses: q.type === 'A' || q.type === 'ANY' ? match.addresses : [] };
}

function labelsOf(name: string): string[] {
  const trimmed = name.toLowerCase().replace(/\.$/, '');
  return trimmed === '' ? [] : trimmed.split('.');
}

/** A shoal name: its addresses, or NXDOMAIN; null when the name is not one of ours. */
function matchName(view: DnsView, seen: readonly string[], labels: readonly string[]): Match {
  // `tasks.x` is read as the tasks of service x first, and as a name of a service called `tasks` after.
  if (labels[0] === tasksLabel && labels.length > 1) {
    const m = matchService(view, seen, labels.slice(1));
    if (m !== null) return m;
  }
  const m = matchService(view, seen, labels);
  if (m !== null) return m;
  return labels.at(-1) === zoneLabel ? { kind: 'nxdomain' } : null;
}

function matchService(view: DnsView, seen: readonly string[], labels: readonly string[]): Match {
  const [service, net, zone, ...rest] = labels;
  if (service === undefined || !view.services.has(service) || rest.length > 0) return null;
  if (zone !== undefined && zone !== zoneLabel) return null;
  // `web.lan` is not ours unless `lan` is a network: the LAN's own names stay reachable.
  if (net !== undefined && zone === undefined && !view.networks.has(net)) return null;
  if (net !== undefined && !seen.includes(net)) return { kind: 'nxdomain' };
  for (const n of net !== undefined ? [net] : seen) {
    const addresses = view.networks.get(n)?.services.get(service);
    if (addresses !== undefined) return { kind: 'addresses', addresses };
  }
  return { kind: 'nxdomain' };
}
