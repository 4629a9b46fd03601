// A byte-for-byte proxy in front of the Docker socket, so a test can make Docker "go away" and
// "come back" for one client without stopping the shared daemon (which would kill every
// container on the machine). close() drops the listener and every connection through it (the
// client sees resets, then ENOENT); open() listens again on the same address.
//
// Listens on a unix socket path, or on 127.0.0.1 (port 0 = any) to stand in for DOCKER_HOST=tcp://.
// `hang: true` accepts connections and never answers: a daemon that is stuck.

import { rmSync } from 'node:fs';
import net from 'node:net';

export type ProxyAddress = { socketPath: string } | { tcpPort: number };

export class SocketProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private boundPort = 0;

  constructor(private readonly listen: ProxyAddress, private readonly target: string, private readonly opts: { hang?: boolean } = {}) {}

  /** The TCP port listened on (after open() with tcpPort 0). */
  get port(): number {
    return this.boundPort;
  }

  async open(): Promise<void> {
    if (this.server !== undefined) return;
    const server = net.createServer((client) => this.accept(client));
    if ('socketPath' in this.listen) rmSync(this.listen.socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      if ('socketPath' in this.listen) server.listen(this.listen.socketPath, resolve);
      // Reopening a TCP proxy reuses its first port, so a client configured with it finds it again.
      else server.listen(this.boundPort !== 0 ? this.boundPort : this.listen.tcpPort, '127.0.0.1', resolve);
    });
    const addr = server.address();
    if (addr !== null && typeof addr === 'object') this.boundPort = addr.port;
    this.server = server;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    if ('socketPath' in this.listen) rmSync(this.listen.socketPath, { force: true });
  }

  private accept(client: net.Socket): void {
    this.track(client);
    client.on('error', () => undefined);
    if (this.opts.hang === true) return;
    const upstream = net.connect(this.target);
    this.track(upstream);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }

  private track(s: net.Socket): void {
    this.sockets.add(s);
    s.once('close', () => this.sockets.delete(s));
  }
}
