// Who answers at an address: a TLS handshake and nothing more. Used for peer hints (an address
// given with `--peers`, or one a peer said it knows): the node does not know whom it will reach
// there, so it cannot dial a peer link (which expects one id). The listener's certificate, signed
// by the cluster CA, names the node; that is the proof that the node is there, and the only way
// an address for a node enters this node's address book besides that node's own hello.
//
// The probe presents this node's certificate (the listener demands one), closes once the
// handshake is done, and sends no WebSocket request: the listener sees a connection that
// ends, nothing it logs as a failure.

import tls, { type PeerCertificate, type TLSSocket } from 'node:tls';
import { splitHostPort } from '../src/base/host-port.ts';
import type { NodeId } from '../src/raft/types.ts';
import { nodeIdFromCert } from '../src/security/identity.ts';
import { checkNodeServerIdentity } from '../src/security/tls-identity.ts';
import type { TlsMaterial } from './peer-link.ts';

export interface ProbeOptions {
  tls: TlsMaterial;
  timeoutMs: number;
  /** Whether a certificate serial is on the deny-list: a revoked certificate proves nothing. */
  isRevoked: (serial: string) => boolean;
  /** The local address to dial from (see LinkContext.dialFrom). */
  dialFrom?: string;
}

/** Resolves with the id of the node whose certificate answers at `address` (HOST:PORT). */
export function identifyPeer(address: string, opts: ProbeOptions): Promise<NodeId> {
  const { host, port } = splitHostPort(address);
  return new Promise<NodeId>((resolve, reject) => {
    let socket: TLSSocket;
    try {
      socket = tls.connect({
        host, port, ca: opts.tls.caPem, cert: opts.tls.certPem, key: opts.tls.keyPem, minVersion: 'TLSv1.3', rejectUnauthorized: true,
        // Any node of this cluster may answer: finding out which is the point.
        checkServerIdentity: (h: string, cert: PeerCertificate) => checkNodeServerIdentity(h, cert),
        ...(opts.dialFrom !== undefined ? { localAddress: opts.dialFrom } : {}),
      });
    } catch (err) {
      reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const timer = setTimeout(() => fail(new Error(`no TLS handshake within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.once('error', fail);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const cert = socket.getPeerCertificate();
      const id = nodeIdFromCert(cert);
      // Ended, not destroyed: our Finished and certificate reach the listener, which then sees a
      // clean close rather than a handshake cut short.
      socket.end();
      socket.once('close', () => socket.destroy());
      if (id === null) reject(new Error('the certificate names no node'));
      else if (typeof cert.serialNumber === 'string' && opts.isRevoked(cert.serialNumber)) reject(new Error(`the certificate of node '${id}' is revoked`));
      else resolve(id);
    });
  });
}
