// A bound on open HTTP connections per node. Node's own server.maxConnections closes the excess
// without a word; here a connection past the bound is kept just long enough to answer its first
// request with 503 overloaded and `connection: close`, so the client learns why and when to come
// back. A connection that sends nothing is closed after a short idle time, and past twice the
// bound connections are closed at once (that many waiting is an attack, not a load).

import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Refusals } from './bounds.ts';

/** How long a connection past the bound may wait to send its request. */
const excessIdleMs = 5000;

export class ConnectionLimit {
  private open = 0;
  private readonly excess = new WeakSet<object>();

  constructor(readonly max: number, private readonly refusals: Refusals) {}

  get openCount(): number {
    return this.open;
  }

  /**
   * Starts counting the server's connections. An HTTPS server is counted at 'secureConnection':
   * requests arrive on the TLS socket, the one `isExcess` is asked about.
   */
  attach(server: Server, event: 'connection' | 'secureConnection' = 'connection'): void {
    server.on(event, (socket: Socket) => this.onConnection(socket));
  }

  /** Whether requests on this socket must be refused (it came past the bound). */
  isExcess(socket: object): boolean {
    return this.excess.has(socket);
  }

  private onConnection(socket: Socket): void {
    this.open++;
    socket.once('close', () => {
      this.open--;
    });
    if (this.open <= this.max) return;
    this.refusals.count('connectionsMax');
    if (this.open > 2 * this.max) {
      socket.destroy();
      return;
    }
    this.excess.add(socket);
    socket.setTimeout(excessIdleMs, () => socket.destroy());
  }
}
