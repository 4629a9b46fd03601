// The listening side: an HTTPS server that demands a client certificate from the cluster CA
// (TLS 1.3 only) and upgrades one path to WebSocket. A peer whose certificate does not verify
// never reaches the WebSocket layer; the TLS error is logged here.

import https from 'node:https';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import WebSocket, { WebSocketServer } from 'ws';
import type { NodeId } from '../src/raft/types.ts';
import { nodeIdFromCert } from '../src/security/identity.ts';
import type { TransportLimits } from './limits.ts';
import type { RepeatLimiter } from './log-limiter.ts';
import type { TlsMaterial } from './peer-link.ts';
import { PEER_PATH, formatAddress } from './socket-util.ts';
import type { TransportLogger } from './types.ts';
import { randomBytes } from 'node:crypto';

/** Node's session-ticket key material: 48 bytes (name, HMAC and AES keys). */
export const sessionTicketKeysBytes = 48;

export interface PeerServerOptions {
  host: string;
  port: number;
  tls: TlsMaterial;
  limits: TransportLimits;
  log: TransportLogger;
  logLimiter: RepeatLimiter;
  /** `certSerial`: the certificate's serial as Node prints it (upper-case hex). */
  onConnection(ws: WebSocket, remoteAddress: string, certNodeId: NodeId | null, certSerial: string | null, certDer: Buffer | null): void;
}

export class PeerServer {
  private readonly server: https.Server;
  private readonly wss: WebSocketServer;
  /** Raw sockets, so close() can cut the ones that do not go away by themselves. */
  private readonly sockets = new Set<Socket>();

  constructor(private readonly opts: PeerServerOptions) {
    const { tls, limits, log } = opts;
    this.server = https.createServer({
      ca: tls.caPem,
      cert: tls.certPem,
      key: tls.keyPem,
      minVersion: 'TLSv1.3',
      requestCert: true,
      rejectUnauthorized: true,
    });
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => this.handleTlsError(err, socket));
    this.server.on('request', (_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket' });
      res.end('shoal peer transport: WebSocket only\n');
    });
    this.wss = new WebSocketServer({
      server: this.server,
      path: PEER_PATH,
      maxPayload: limits.frameBytesMax,
      perMessageDeflate: false,
      clientTracking: false,
      // The inbound connection answers pings itself, with this node's wall clock in the pong
      // (socket-util.ts, pongPayloadFor).
      autoPong: false,
    });
    this.wss.on('connection', (ws, req) => this.handleConnection(ws, req.socket as TLSSocket));
    this.wss.on('error', (err) => log.error(`peer listener: ${err.message}`));
  }

  /**
   * Takes the (renewed) certificate and key and the trust bundle in opts.tls for new connections;
   * open ones keep theirs. New session-ticket keys too: a TLS 1.3 client resuming a session skips
   * certificate verification, so a ticket from before a CA was retired would let its certificate in.
   */
  reloadTls(): void {
    const { tls } = this.opts;
    this.server.setSecureContext({ ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3', ticketKeys: randomBytes(sessionTicketKeysBytes) });
  }

  /** Resolves with the bound address (port 0 resolved). */
  listen(): Promise<{ host: string; port: number }> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.off('error', onError);
        this.server.on('error', (err) => this.opts.log.error(`peer listener: ${err.message}`));
        const addr = this.server.address() as AddressInfo;
        resolve({ host: this.opts.host, port: addr.port });
      });
    });
  }

  /** Stops listening; sockets still open after `graceMs` are destroyed. */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.wss.close();
    const timer = setTimeout(() => {
      for (const s of this.sockets) s.destroy();
    }, graceMs);
    await closed;
    clearTimeout(timer);
  }

  private handleConnection(ws: WebSocket, socket: TLSSocket): void {
    const remote = formatAddress(socket.remoteAddress ?? 'unknown', socket.remotePort ?? 0);
    const cert = socket.getPeerCertificate();
    this.opts.onConnection(ws, remote, nodeIdFromCert(cert), typeof cert.serialNumber === 'string' ? cert.serialNumber : null, Buffer.isBuffer(cert.raw) ? cert.raw : null);
  }

  private handleTlsError(err: NodeJS.ErrnoException, socket: TLSSocket): void {
    const host = socket.remoteAddress ?? 'unknown';
    const msg = `refused a TLS connection from ${formatAddress(host, socket.remotePort ?? 0)}: ${err.code ?? 'error'}: ${err.message}`;
    // Keyed by host and error, not port: a misconfigured peer redials every couple of seconds.
    if (this.opts.logLimiter.first(`tls:${host}:${err.code ?? err.message}`)) this.opts.log.warn(msg);
    else this.opts.log.debug(msg);
  }
}
