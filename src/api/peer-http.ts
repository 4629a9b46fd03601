// HTTP between nodes (a follower forwarding a membership request to the leader, reading a task's
// log from the node that runs it, probing a member, a joining node learning the members): over
// TLS with this node's certificate as the client certificate and the cluster CA as the only
// trust root, so only a node of this cluster can answer and the answering node knows who asks.
// With api.insecureLoopback the cluster's APIs are plain HTTP, and so are these calls.
//
// The certificate renews itself (src/security/renewal.ts) and the renewer replaces the fields of
// `tls` in place; reloadTls() then swaps in an agent built from them, so every later request
// connects with the new certificate. Kept-alive connections of the old agent finish what they
// carry and close: an old agent would otherwise present the old certificate until it expired.

import type { Agent } from 'undici';
import { loadUndici } from '../base/load-undici.ts';
import type { Tls } from '../base/tls-material.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';

/** undici (750 KiB of code) is loaded by the first call to another node, not at start (issue 45). */
async function agentFor(tls: Tls): Promise<Agent> {
  const { Agent: AgentClass } = await loadUndici();
  return new AgentClass({
    connect: { ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity },
  });
}

export class PeerHttp {
  readonly scheme: 'http' | 'https';
  /** The agent of the current TLS material, made by the first fetch after start or reloadTls(). */
  private dispatcher: Promise<Agent> | undefined;
  /** Agents replaced by reloadTls, still draining; closed by close() if they have not finished. */
  private readonly draining = new Set<Promise<void>>();
  private closed = false;

  constructor(private readonly tls: Tls | null) {
    this.scheme = tls === null ? 'http' : 'https';
  }

  url(addr: string, path: string): string {
    return `${this.scheme}://${addr}${path}`;
  }

  /** fetch() to another node's API. */
  async fetch(addr: string, path: string, init: RequestInit = {}): Promise<Response> {
    if (this.tls === null) return fetch(this.url(addr, path), init);
    if (this.closed) throw new Error(`peer HTTP of this node is closed: not calling ${addr}${path}`);
    this.dispatcher ??= agentFor(this.tls);
    const withTls = { ...init, dispatcher: await this.dispatcher };
    return fetch(this.url(addr, path), withTls as RequestInit);
  }

  /**
   * Takes the TLS material's current fields (after a renewal) for every request from now on. The
   * old agent is closed gracefully: requests it carries complete, then its connections close.
   */
  reloadTls(): void {
    if (this.tls === null || this.dispatcher === undefined) return;
    const old = this.dispatcher;
    // The next fetch makes an agent of the fields as they are then.
    this.dispatcher = undefined;
    const closing = old.then((a) => a.close()).catch(() => {}).finally(() => this.draining.delete(closing));
    this.draining.add(closing);
  }

  async close(): Promise<void> {
    this.closed = true;
    const current = this.dispatcher;
    this.dispatcher = undefined;
    await Promise.all([current?.then((a) => a.close()), ...this.draining]);
  }
}
