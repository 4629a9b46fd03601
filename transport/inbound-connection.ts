// The inbound side of a peer connection: a WebSocket a peer dialled to us. It carries the
// peer's messages and snapshot streams to this node; we answer only with our hello, pongs
// (with this node's wall clock in them: socket-util.ts, pongPayloadFor) and snapshot
// acknowledgements.

import { performance } from 'node:perf_hooks';
import type WebSocket from 'ws';
import type { Message, NodeId } from '../src/raft/types.ts';
import { admitMessage } from './check-message.ts';
import { BATCH_PROTOCOL_VERSION, decodeFrames, encodeFrame } from './codec.ts';
import type { Frame, HelloFrame } from './frames.ts';
import {
  CLOSE_GOING_AWAY, REFUSAL_CODES, agreedVersion, answerOf, checkHello, type LocalIdentity, type PeerAuthorization, type Refusal, type RefusalReason,
} from './handshake.ts';
import type { InboundDropReason, MessageRefusal } from './inbound-drops.ts';
import type { TransportLimits } from './limits.ts';
import type { RepeatLimiter } from './log-limiter.ts';
import { SnapshotAssembler, type AssemblyEvent } from './snapshot-stream.ts';
import { closeSocket, pongPayloadFor, rawDataToBytes } from './socket-util.ts';
import type { TransportLogger } from './types.ts';

/** Past this many bytes waiting to be written to the peer, a ping goes unanswered (ws's own answer has a like bound). */
const pongBufferedBytesMax = 1024 * 1024;

export interface InboundContext {
  local: LocalIdentity;
  limits: TransportLimits;
  log: TransportLogger;
  logLimiter: RepeatLimiter;
  /** This node's wall clock (Date.now()), told to the peer in each pong. */
  wallClock: () => number;
  /** Lets the owner refuse a valid certificate (a node not added yet, or removed). */
  authorizePeer(id: NodeId): PeerAuthorization;
  /** Whether a certificate serial is on the deny-list: its holder is refused whoever it is. */
  isRevoked(serial: string): boolean;
  /** The handshake succeeded: the owner supersedes an older connection from the same node. */
  accepted(conn: InboundConnection): void;
  /** The connection closed, with the close code it got (1001 from the peer: it is stopping). */
  closed(conn: InboundConnection, code: number): void;
  /** Hands an admitted message on; returns the handler's refusal, if it refused it (counted there). */
  deliver(from: NodeId, m: Message): MessageRefusal | undefined;
  /** A WebSocket message arrived from the authenticated peer after its hello. */
  countWsMessage(from: NodeId): void;
  /** A message (or frame) from the peer was dropped here. */
  countDrop(reason: InboundDropReason): void;
}

export class InboundConnection {
  private state: 'hello' | 'open' | 'closed' = 'hello';
  private readonly handshakeTimer: NodeJS.Timeout;
  private assembler: SnapshotAssembler | null = null;
  private handshakeDone = false;
  /** When a frame or ping last arrived, to notice a peer that vanished without a FIN. */
  lastHeardAt = performance.now();
  hello: HelloFrame | null = null;
  /** The protocol version agreed in the handshake; 0 before it. */
  private protocolVersion = 0;

  constructor(
    private readonly ws: WebSocket,
    readonly remoteAddress: string,
    /** The node id the peer's (CA-verified) certificate names; null if it names none. */
    readonly certNodeId: NodeId | null,
    /** The serial of the peer's certificate; null if it has none (a CA-verified one always has). */
    readonly certSerial: string | null,
    /** The peer's certificate (DER), checked again when the trust bundle changes (a CA rotation). */
    readonly certDer: Buffer | null,
    private readonly ctx: InboundContext,
  ) {
    this.handshakeTimer = setTimeout(
      () => this.refuse({ reason: 'handshake_timeout', detail: `no hello within ${ctx.limits.handshakeTimeoutMs} ms` }),
      ctx.limits.handshakeTimeoutMs,
    );
    ws.on('message', (data, isBinary) => this.handleData(rawDataToBytes(data), isBinary));
    ws.on('ping', (payload: Buffer) => this.handlePing(payload));
    ws.on('error', (err) => ctx.log.debug(`connection from ${this.describePeer()}: ${err.message}`));
    ws.on('close', (code: number) => this.handleClose(code));
  }

  /** The authenticated peer, once the handshake succeeded (and still after the close). */
  get peerId(): NodeId | null {
    return this.handshakeDone ? this.certNodeId : null;
  }

  /** Whether the peer's certificate is revoked now (asked at the handshake and when the list grows). */
  isRevoked(): boolean {
    return this.certSerial !== null && this.ctx.isRevoked(this.certSerial);
  }

  /** Closes with `code`; `superseded` and shutdown use it. */
  close(reason: RefusalReason | 'closing'): Promise<void> {
    const code = reason === 'closing' ? CLOSE_GOING_AWAY : REFUSAL_CODES[reason];
    return closeSocket(this.ws, code, reason, this.ctx.limits.closeGraceMs);
  }

  /** Cuts the connection at once: nothing it still carries is delivered (its certificate is no longer trusted). */
  terminate(): void {
    this.ws.terminate();
  }

  /** Cuts a connection that has gone silent; it is the dialler's job to come back. */
  tick(nowMs: number): void {
    if (this.state !== 'closed' && nowMs - this.lastHeardAt > this.ctx.limits.silenceTimeoutMs) {
      this.ctx.log.warn(`connection from ${this.describePeer()} silent for ${Math.round(nowMs - this.lastHeardAt)} ms; closing it`);
      this.ws.terminate();
    }
  }

  /** The listener answers pings itself (autoPong is off: peer-server.ts), adding its wall clock. */
  private handlePing(payload: Buffer): void {
    this.lastHeardAt = performance.now();
    // A peer that pings and reads nothing back gets no more pongs queued for it.
    if (this.state === 'closed' || this.ws.readyState !== this.ws.OPEN || this.ws.bufferedAmount > pongBufferedBytesMax) return;
    this.ws.pong(pongPayloadFor(payload, this.ctx.wallClock()));
  }

  private handleData(bytes: Uint8Array, isBinary: boolean): void {
    if (this.state === 'closed') return;
    this.lastHeardAt = performance.now();
    if (this.state === 'open' && this.certNodeId !== null) this.ctx.countWsMessage(this.certNodeId);
    const decoded = isBinary ? decodeFrames(bytes) : { ok: false as const, error: 'text frame' };
    if (this.state === 'hello') {
      if (!decoded.ok) this.refuse({ reason: 'bad_handshake', detail: decoded.error });
      else this.handleHello(decoded.frames);
      return;
    }
    if (!decoded.ok) {
      this.dropMalformed(decoded.error);
      return;
    }
    // Below protocol 2 the sender promised one frame per message; the first release enforces it too.
    if (decoded.frames.length > 1 && this.protocolVersion < BATCH_PROTOCOL_VERSION) {
      this.dropMalformed(`${decoded.frames.length} frames in one message on a protocol ${this.protocolVersion} connection`);
      return;
    }
    for (const frame of decoded.frames) this.handleFrame(frame);
  }

  private dropMalformed(error: string): void {
    this.ctx.countDrop('malformed');
    this.logOnce('badframe', `dropped a malformed frame from ${this.describePeer()}: ${error}`);
  }

  /** The hello comes alone: nothing may ride along with it before the peer is known. */
  private handleHello(frames: Frame[]): void {
    const [frame] = frames;
    if (frames.length !== 1 || frame?.t !== 'hello') {
      const got = frames.length === 1 ? `'${frame?.t}'` : `${frames.length} frames in one message`;
      this.refuse({ reason: 'bad_handshake', detail: `expected a hello alone, got ${got}` });
      return;
    }
    const refusal = this.checkPeer(frame);
    if (refusal !== null) {
      this.refuse(refusal, frame.nodeId);
      return;
    }
    // checkPeer refused the hello when no version is agreed.
    const version = agreedVersion(frame, this.ctx.local) ?? 0;
    clearTimeout(this.handshakeTimer);
    this.state = 'open';
    this.handshakeDone = true;
    this.hello = frame;
    this.protocolVersion = version;
    this.assembler = new SnapshotAssembler(frame.nodeId, this.ctx.limits.snapshotBytesMax);
    this.ws.send(encodeFrame(answerOf(this.ctx.local, version)));
    this.ctx.log.debug(`accepted peer ${frame.nodeId} from ${this.remoteAddress} (software ${frame.softwareVersion}, protocol ${version})`);
    this.ctx.accepted(this);
  }

  private checkPeer(hello: HelloFrame): Refusal | null {
    if (this.certNodeId === null) return { reason: 'node_id_mismatch', detail: 'its certificate names no node id' };
    // A removed id hears `removed` before any other check, the cluster id's included: after
    // `shoal recover --force-new-cluster` an old member has the old cluster id, and must learn
    // that it was removed (and stop) rather than retry, free to form the old cluster with another.
    const auth = this.ctx.authorizePeer(this.certNodeId);
    if (auth === 'removed') return { reason: 'removed', detail: `node '${this.certNodeId}' was removed from the cluster; it must stop, and can only come back as a new node` };
    const refusal = checkHello(hello, this.ctx.local, this.certNodeId);
    if (refusal !== null) return refusal;
    if (this.isRevoked()) return { reason: 'revoked', detail: `the certificate of node '${this.certNodeId}' (serial ${this.certSerial?.toLowerCase() ?? ''}) is revoked` };
    if (auth === 'not_member') {
      return { reason: 'peer_not_authorized', detail: `node '${this.certNodeId}' is not a member of this cluster (yet): add it with 'shoal cluster add', or check that it was meant to join this cluster` };
    }
    return null;
  }

  private handleFrame(frame: Frame): void {
    switch (frame.t) {
      case 'msg':
        if (this.admit(frame.m)) this.deliver(frame.m);
        return;
      case 'snapBegin':
        // Checked before a byte of the snapshot is taken; a refusal stops the sender's stream.
        if (this.admit(frame.m)) this.handleAssembly(this.assembler?.begin(frame) ?? []);
        else this.ackSnapshot(frame.id, false, `refused: the stream's '${frame.m.type}' message was dropped`);
        return;
      case 'snapChunk':
        this.handleAssembly(this.assembler?.chunk(frame) ?? []);
        return;
      default:
        this.ctx.countDrop('unexpected_frame');
        this.logOnce(`unexpected:${frame.t}`, `dropped an unexpected '${frame.t}' frame from ${this.describePeer()}`);
    }
  }

  /**
   * An authenticated peer still may not speak for another node, nor reach past this one, nor
   * send what no correct node sends (check-message.ts).
   */
  private admit(m: Message): boolean {
    const refusal = this.certNodeId === null
      ? { reason: 'wrong_sender' as const, detail: 'the connection names no node' }
      : admitMessage(m, this.certNodeId, this.ctx.local.nodeId);
    if (refusal === undefined) return true;
    this.ctx.countDrop(refusal.reason);
    // Keyed by peer, not address: a peer that keeps redialling must not get a warning per connection.
    this.logOnce(`drop:${this.certNodeId}:${refusal.reason}`, `dropped a '${m.type}' message from ${this.describePeer()}: ${refusal.reason}: ${refusal.detail}`, true);
    return false;
  }

  private handleAssembly(events: AssemblyEvent[]): void {
    for (const e of events) {
      if (e.kind === 'done') {
        const refusal = this.deliver(e.message);
        this.ackSnapshot(e.id, refusal === undefined, refusal === undefined ? undefined : `refused: ${refusal.reason}: ${refusal.detail}`);
      } else {
        if (e.broken) this.ctx.countDrop('bad_snapshot_stream');
        this.ctx.log.warn(`snapshot stream ${e.id} from ${this.describePeer()} failed: ${e.reason}`);
        this.ackSnapshot(e.id, false, e.reason);
      }
    }
  }

  private ackSnapshot(id: number, ok: boolean, reason: string | undefined): void {
    this.ws.send(encodeFrame(reason === undefined ? { t: 'snapAck', id, ok } : { t: 'snapAck', id, ok, reason: reason.slice(0, 256) }));
  }

  private deliver(m: Message): MessageRefusal | undefined {
    return this.certNodeId === null ? undefined : this.ctx.deliver(this.certNodeId, m);
  }

  private refuse(refusal: Refusal, claimed?: NodeId): void {
    if (this.state === 'closed') return;
    const who = `${claimed ?? this.certNodeId ?? 'unknown node'} from ${this.remoteAddress}`;
    // Keyed by node and reason, not address: a refused peer redials from a new port each time.
    const key = `refuse:${claimed ?? this.certNodeId ?? this.remoteAddress}:${refusal.reason}`;
    this.logOnce(key, `refused peer ${who}: ${refusal.reason}: ${refusal.detail}`, true);
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    void this.close(refusal.reason);
  }

  private handleClose(code: number): void {
    const wasOpen = this.state === 'open';
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    // A stream cut mid-way is simply dropped: the sender sees the same close and reports it.
    this.assembler?.abort('connection closed');
    if (wasOpen) this.ctx.closed(this, code);
  }

  private logOnce(key: string, msg: string, keyIsGlobal = false): void {
    const k = keyIsGlobal ? key : `${this.remoteAddress}:${key}`;
    if (this.ctx.logLimiter.first(k)) this.ctx.log.warn(msg);
    else this.ctx.log.debug(msg);
  }

  private describePeer(): string {
    return `${this.hello?.nodeId ?? this.certNodeId ?? 'unknown node'} at ${this.remoteAddress}`;
  }
}
