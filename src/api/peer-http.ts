// HTTP between nodes (a follower forwarding a membership request to the leader, reading a task's
// log from the node that runs it, probing a member, a joining node learning the members): over
// TLS with this node's certificate as the client certificate and the cluster CA as the only
// trust root, so only a node of this cluster can answer and the answering node knows who asks.
// With api.insecureLoopback the cluster's APIs are plain HTTP, and so are these calls.

import { Agent } from 'undici';
import type { Tls } from '../node/identity.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';

export class PeerHttp {
  readonly scheme: 'http' | 'https';
  private readonly dispatcher: Agent | undefined;

  constructor(tls: Tls | null) {
    this.scheme = tls === null ? 'http' : 'https';
    this.dispatcher = tls === null ? undefined : new Agent({
      connect: { ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity },
    });
  }

  url(addr: string, path: string): string {
    return `${this.scheme}://${addr}${path}`;
  }

  /** fetch() to another node's API. */
  fetch(addr: string, path: string, init: RequestInit = {}): Promise<Response> {
    const withTls = this.dispatcher === undefined ? init : { ...init, dispatcher: this.dispatcher };
    return fetch(this.url(addr, path), withTls as RequestInit);
  }

  async close(): Promise<void> {
    await this.dispatcher?.close();
  }
}
