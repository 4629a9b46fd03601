// How a node's identity is written into, and read back out of, its certificate. Nodes are
// named by a stable random id, never by address (design.md, "Identity"), so the transport
// authenticates a peer by the id in its certificate rather than by the host it dialled.

import { X509Certificate } from 'node:crypto';
import type { NodeId } from '../raft/types.ts';

/** The URI SAN prefix that carries the node id; the same id is the subject CN. */
export const NODE_ID_URI_PREFIX = 'urn:shoal:node:';

/**
 * Node and cluster ids end up in distinguished names, URIs and log lines, so they are kept to a
 * safe alphabet. 64 characters is the X.520 upper bound for a common name.
 */
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function isValidId(id: string): boolean {
  return ID_PATTERN.test(id);
}

export function nodeIdUri(nodeId: NodeId): string {
  return `${NODE_ID_URI_PREFIX}${nodeId}`;
}

/** The parts of `tls.PeerCertificate` this module reads (an empty object when there is none). */
export interface PeerCertificateLike {
  subject?: { CN?: string | string[] } | undefined;
  subjectaltname?: string | undefined;
}

/**
 * The node id a peer certificate names, or null when it names none or the URI SAN and the CN
 * disagree (a certificate that says two different things identifies nobody).
 */
export function nodeIdFromCert(cert: PeerCertificateLike): NodeId | null {
  const cn = cert.subject?.CN;
  if (Array.isArray(cn)) return null;
  const uris = sanEntries(cert.subjectaltname ?? '')
    .filter((e) => e.startsWith(`URI:${NODE_ID_URI_PREFIX}`))
    .map((e) => e.slice(`URI:${NODE_ID_URI_PREFIX}`.length));
  if (uris.length > 1) return null;
  const fromUri = uris[0];
  if (fromUri !== undefined && cn !== undefined && fromUri !== cn) return null;
  const id = fromUri ?? cn;
  return id !== undefined && isValidId(id) ? id : null;
}

/** The same as `nodeIdFromCert`, for a PEM certificate (tests, the CLI, join tokens). */
export function nodeIdFromCertPem(certPem: string): NodeId | null {
  const cert = new X509Certificate(certPem);
  const cns = cert.subject
    .split('\n')
    .filter((line) => line.startsWith('CN='))
    .map((line) => line.slice(3));
  return nodeIdFromCert({
    subject: cns.length === 0 ? {} : { CN: cns.length === 1 ? cns[0] : cns },
    subjectaltname: cert.subjectAltName,
  });
}

/**
 * Node formats subjectAltName as "TYPE:value, TYPE:value"; values with a comma or quote come
 * JSON-quoted. Our own ids never contain either, so a quoted entry is kept verbatim and simply
 * never matches.
 */
function sanEntries(san: string): string[] {
  return san
    .split(', ')
    .map((e) => e.trim())
    .filter((e) => e.length > 0);
}
