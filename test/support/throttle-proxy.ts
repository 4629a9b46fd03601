// A slow registry for the pull-before-stop figures (bench/registry-throttle.ts): a TCP proxy
// that forwards to a target and lets at most `bytesPerSecond` through from the target to the
// client (the download), by pausing the target's socket until the budget allows more. TLS passes
// through untouched, so the registry's certificate still names the same IP; only the port
// differs (dockerd then needs the CA under certs.d/<address>:<proxy port> too). hold() stops
// the download altogether until release(): a test can look at the cluster while a pull is
// certainly under way, without timing anything.

import net from 'node:net';

export class ThrottleProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private held = false;
  private readonly waiting = new Set<() => void>();
  port = 0;
  /** Connections opened by clients so far. */
  connections = 0;
  /** Bytes sent from the target to clients so far. */
  bytesSent = 0;

  constructor(private readonly target: { host: string; port: number }, private readonly bytesPerSecond: number) {
    if (!(bytesPerSecond > 0)) throw new Error('bytesPerSecond must be > 0');
  }

  /** Listens on `address` (an ephemeral port) and resolves with it. */
  async start(address: string): Promise<number> {
    const server = net.createServer((client) => this.pipe(client));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, address, () => resolve());
    });
    const a = server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
    return this.port;
  }

  /** Nothing more goes from the target to the clients until release(). */
  hold(): void {
    this.held = true;
  }

  release(): void {
    this.held = false;
    for (const resume of [...this.waiting]) resume();
    this.waiting.clear();
  }

  private pipe(client: net.Socket): void {
    this.connections++;
    const upstream = net.connect(this.target.port, this.target.host);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream);
    // Downloads: each chunk waits until the rate allows it (one budget per connection).
    const started = Date.now();
    let sent = 0;
    upstream.on('data', (chunk: Buffer) => {
      if (this.held) {
        upstream.pause();
        upstream.unshift(chunk);
        this.waiting.add(() => { if (!upstream.destroyed) upstream.resume(); });
        return;
      }
      sent += chunk.length;
      this.bytesSent += chunk.length;
      const dueMs = (sent / this.bytesPerSecond) * 1000 - (Date.now() - started);
      const ok = client.write(chunk);
      if (dueMs > 0 || !ok) {
        upstream.pause();
        const resume = (): void => { if (!upstream.destroyed) upstream.resume(); };
        setTimeout(() => (ok ? resume() : client.once('drain', resume)), Math.max(0, dueMs));
      }
    });
    upstream.on('end', () => client.end());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
