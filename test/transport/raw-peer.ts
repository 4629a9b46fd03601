// A hand-driven peer connection: TLS with a member's certificate, the hello exchange, then
// whatever bytes a test wants to put on the wire. The fuzz tests use it against a transport in
// this process, against real `shoal serve` processes, and as the fault suite's garbage nemesis.

import { once } from 'node:events';
import type { PeerCertificate } from 'node:tls';
import WebSocket from 'ws';
import type { NodeId } from '../../src/raft/types.ts';
import { nodeIdFromCert } from '../../src/security/identity.ts';
import { decodeFrames, encodeFrame } from '../../transport/codec.ts';
import type { Frame } from '../../transport/frames.ts';
import { PEER_PATH } from '../../transport/socket-util.ts';

export interface RawPeerOptions {
  /** host:port of the node's peer listener. */
  address: string;
  tls: { caPem: string; certPem: string; keyPem: string };
  clusterId: string;
  /** Who we are: the node the certificate names. */
  nodeId: NodeId;
  /** The node we mean to reach; any the CA signed when unset. */
  peerId?: NodeId;
  /** The newest protocol offered (2 allows several frames per WebSocket message). Default 2. */
  protocolMax?: number;
  handshakeTimeoutMs?: number;
}

export class RawPeer {
  /** Frames the node sent after its hello (snapshot acks), decoded; strings for what did not decode. */
  readonly received: (Frame | string)[] = [];
  /** Resolves with the close code once the connection is gone. */
  readonly closed: Promise<number>;
  private closeCode: number | undefined;

  private constructor(private readonly ws: WebSocket, readonly hello: Frame & { t: 'hello' }) {
    this.closed = new Promise((resolve) => {
      if (ws.readyState === WebSocket.CLOSED) resolve(1006);
      ws.once('close', (code: number) => {
        this.closeCode = code;
        resolve(code);
      });
    });
    ws.on('message', (data) => {
      const d = decodeFrames(data as Buffer);
      if (d.ok) this.received.push(...d.frames);
      else this.received.push(d.error);
    });
  }

  /** Connects and says hello; resolves once the node answered with its own. */
  static async connect(o: RawPeerOptions): Promise<RawPeer> {
    const ws = new WebSocket(`wss://${o.address}${PEER_PATH}`, {
      ca: o.tls.caPem, cert: o.tls.certPem, key: o.tls.keyPem, minVersion: 'TLSv1.3', rejectUnauthorized: true,
      perMessageDeflate: false, handshakeTimeout: o.handshakeTimeoutMs ?? 5000,
      checkServerIdentity: ((_host: string, cert: PeerCertificate): Error | undefined => {
        const id = nodeIdFromCert(cert);
        return o.peerId === undefined || id === o.peerId ? undefined : new Error(`reached node ${id ?? '(none)'}, not ${o.peerId}`);
      }) as unknown as WebSocket.ClientOptions['checkServerIdentity'],
    });
    ws.on('error', () => {});
    const answer = new Promise<Frame & { t: 'hello' }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no hello from ${o.address}`)), o.handshakeTimeoutMs ?? 5000);
      ws.once('message', (data) => {
        clearTimeout(timer);
        const d = decodeFrames(data as Buffer);
        const [f] = d.ok ? d.frames : [];
        if (f?.t === 'hello') resolve(f);
        else reject(new Error(`expected a hello from ${o.address}, got ${d.ok ? f?.t : d.error}`));
      });
      ws.once('close', (code: number, reason: Buffer) => {
        clearTimeout(timer);
        reject(new Error(`${o.address} closed the connection: ${code} ${reason.toString()}`));
      });
    });
    try {
      await once(ws, 'open');
      ws.send(encodeFrame({
        t: 'hello', clusterId: o.clusterId, nodeId: o.nodeId, protocolVersion: 1, protocolMin: 1, protocolMax: o.protocolMax ?? 2, softwareVersion: 'raw-peer',
      }));
      return new RawPeer(ws, await answer);
    } catch (err) {
      ws.terminate();
      throw err;
    }
  }

  /** The protocol version the node answered with. */
  get protocolVersion(): number {
    return this.hello.protocolVersion;
  }

  get isOpen(): boolean {
    return this.closeCode === undefined && this.ws.readyState === WebSocket.OPEN;
  }

  /** One WebSocket message: binary, or a text frame for a string. False once the connection is gone. */
  send(data: Uint8Array | string): boolean {
    if (!this.isOpen) return false;
    this.ws.send(data, { binary: typeof data !== 'string' });
    return true;
  }

  /** Resolves once everything sent so far has left this process. */
  /** Pings with `payload` and resolves with the pong's payload. */
  async ping(payload: Buffer): Promise<Buffer> {
    const pong = once(this.ws, 'pong') as Promise<[Buffer]>;
    this.ws.ping(payload);
    return (await pong)[0];
  }

  async drain(): Promise<void> {
    while (this.isOpen && this.ws.bufferedAmount > 0) await new Promise((r) => setTimeout(r, 5));
  }

  close(): void {
    this.ws.terminate();
  }
}
