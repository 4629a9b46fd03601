// The port records of the routing mesh (docs/network.md, "Ingress", "One port, one service").
//
// An ingress port belongs to one service in the cluster, and the check that says so
// (src/control/ingress-apply.ts) reads the stored services. Two applies deciding at the same
// time each read a store without the other's service, so the check alone would let both land.
// Each apply that gives a service a published port it did not have (in either mode: a host-mode
// port and an ingress port on the same number clash too) therefore also writes the port's record
// here, as a compare-and-set on the revision it read, in the same transaction as the service. Of
// two racing applies of one port, the second's write fails on the record, and its write path
// (decideAndWrite) reads again and decides again: now it sees the first's service, and refuses.
//
// The records are a serialization point, not the truth: which service holds a port is read from
// the services; a record's `service` only says who wrote it last, and a record stays after its
// service goes (a later claim simply overwrites it). Nothing reads them on the data path, so an
// older release stores them as any document and needs no feature level for them.

/** Port records (IngressPortRecord), by `<protocol>-<port>`. Written only with the service records of an apply or a stack deploy. */
export const ingressPortsCollection = 'shoal.ingress-ports';

export interface IngressPortRecord {
  protocol: 'tcp' | 'udp';
  port: number;
  /** The service whose apply wrote the record last. */
  service: string;
  mode: 'ingress' | 'host';
  /** Log time of that write. */
  at: number;
}

export function ingressPortId(protocol: 'tcp' | 'udp', port: number): string {
  return `${protocol}-${port}`;
}
