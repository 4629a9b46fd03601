// The client API's open TLS connections that presented a certificate, so that those whose
// certificate the cluster stops accepting are closed the moment that applies: a revoked serial
// (revoked-serials.ts), a node certificate of a node removed from the cluster, or a certificate of
// a CA a rotation retired. Without this a keep-alive connection or a watch stream opened before
// would keep its answers coming; every new request is refused anyway by the auth hook (auth.ts),
// which checks the same three things.

import type { TLSSocket } from 'node:tls';
import { nodeIdFromCert } from '../security/identity.ts';
import { serialKey } from '../security/revoked-serials.ts';

interface Held {
  serialKey: string;
  /** The certificate (DER), checked again when the trust bundle changes. */
  der: Buffer | null;
  /** The node a node certificate names (no OU); null for a client certificate. */
  nodeId: string | null;
}

export interface CertSocketsOptions {
  isRevoked: (serial: string) => boolean;
  isRemoved: (nodeId: string) => boolean;
  /** Whether a CA of the trust bundle in force issued a certificate; absent, every one is. */
  isTrusted?: (der: Buffer) => boolean;
  /** Told of each connection closed, for the log. */
  onClosed?: (why: Refusal, who: string) => void;
}

type Refusal = 'revoked' | 'removed' | 'untrusted';

export class CertSockets {
  private readonly held = new Map<TLSSocket, Held>();
  /** The node-certificate subset: looked at after every apply, so kept apart from the clients'. */
  private readonly nodeSockets = new Set<TLSSocket>();

  constructor(private readonly o: CertSocketsOptions) {}

  get size(): number {
    return this.held.size;
  }

  /** A connection whose TLS handshake completed ('secureConnection'). */
  track(socket: TLSSocket): void {
    // An unverified certificate gets nothing but 401s from the auth hook; no need to hold it.
    if (!socket.authorized) return;
    const cert = socket.getPeerCertificate();
    if (cert === null || typeof cert.serialNumber !== 'string') return;
    const nodeId = cert.subject?.OU === undefined ? nodeIdFromCert(cert) : null;
    const held: Held = { serialKey: serialKey(cert.serialNumber), der: Buffer.isBuffer(cert.raw) ? cert.raw : null, nodeId };
    // Refused already: each of its requests is answered 401 with the reason (auth.ts), which
    // tells the caller more than a cut connection would. Nothing to close later.
    if (this.refusal(held) !== undefined) return;
    this.held.set(socket, held);
    if (nodeId !== null) this.nodeSockets.add(socket);
    socket.once('close', () => {
      this.held.delete(socket);
      this.nodeSockets.delete(socket);
    });
  }

  /** Closes the connections whose certificate has one of these serials (serialKey form); returns how many. */
  closeRevoked(keys: ReadonlySet<string>): number {
    let closed = 0;
    for (const [socket, held] of this.held) {
      if (!keys.has(held.serialKey)) continue;
      this.close(socket, held);
      closed++;
    }
    return closed;
  }

  /** Closes the connections of nodes that have been removed since they connected; returns how many. */
  closeRemoved(): number {
    let closed = 0;
    for (const socket of this.nodeSockets) {
      const held = this.held.get(socket);
      if (held === undefined || held.nodeId === null || !this.o.isRemoved(held.nodeId)) continue;
      this.close(socket, held);
      closed++;
    }
    return closed;
  }

  /** Closes the connections whose certificate no CA of the trust bundle issued (it changed: a CA rotation); returns how many. */
  closeUntrusted(): number {
    let closed = 0;
    for (const [socket, held] of this.held) {
      if (this.refusal(held) !== 'untrusted') continue;
      this.close(socket, held);
      closed++;
    }
    return closed;
  }

  private refusal(held: Held): Refusal | undefined {
    if (this.o.isRevoked(held.serialKey)) return 'revoked';
    if (held.nodeId !== null && this.o.isRemoved(held.nodeId)) return 'removed';
    if (held.der !== null && this.o.isTrusted !== undefined && !this.o.isTrusted(held.der)) return 'untrusted';
    return undefined;
  }

  private close(socket: TLSSocket, held: Held): void {
    this.held.delete(socket);
    this.nodeSockets.delete(socket);
    this.o.onClosed?.(this.refusal(held) ?? 'revoked', held.nodeId !== null ? `node ${held.nodeId}` : `serial ${held.serialKey}`);
    socket.destroy();
  }
}
