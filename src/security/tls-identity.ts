// Who may answer on a node's API address. The cluster CA is the only trust root of every shoal
// client (nodes and the CLI pin it), and only nodes hold certificates that name a node id with
// no role; so instead of matching the dialled host name against the certificate (a node's
// address changes; design.md, "Identity"), a client accepts any node certificate of the cluster.
// A client certificate (it has an OU, the role) is refused: it cannot serve as a node.

import type { PeerCertificate } from 'node:tls';
import { nodeIdFromCert } from './identity.ts';

export function checkNodeServerIdentity(_host: string, cert: PeerCertificate): Error | undefined {
  if (cert.subject?.OU !== undefined) return new Error('the server presented a client certificate, not a node certificate of this cluster');
  if (nodeIdFromCert(cert) === null) return new Error('the server certificate names no node of this cluster');
  return undefined;
}
