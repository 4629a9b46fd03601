// The outbound side of one peer: a WebSocket this node dials to the peer, the bounded queue
// of frames waiting for it, snapshot streams, pings, and reconnection with backoff.
//
// Traffic on it flows one way (this node → the peer); the peer only answers with its hello,
// pongs and snapshot acknowledgements. Messages from the peer arrive on the connection the
// peer dials to us (inbound-connection.ts). See ws-transport.ts for why.

import type { TLSSocket } from 'node:tls';
import type { PeerCertificate } from 'node:tls';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import type { Message, NodeId } from '../src/raft/types.ts';
import { nodeIdFromCert } from '../src/security/identity.ts';
import { Backoff } from '../src/base/backoff.ts';
import { BATCH_PROTOCOL_VERSION, decodeFrames, encodeFrame } from './codec.ts';
import type { Frame, HelloFrame, SnapAckFrame } from './frames.ts';
import { CLOSE_GOING_AWAY, REFUSAL_CODES, checkHello, offerOf, refusalReasonOf, type LocalIdentity, type Refusal, type RefusalReason } from './handshake.ts';
import type { InboundDropReason } from './inbound-drops.ts';
import type { TransportLimits } from './limits.ts';
import type { RepeatLimiter } from './log-limiter.ts';
import { SendQueue } from './send-queue.ts';
import { OutgoingSnapshot } from './snapshot-stream.ts';
import { PEER_PATH, closeSocket, pingPayload, rawDataToBytes, readPong } from './socket-util.ts';
import { ClockOffsetEstimate, type ClockOffset } from './clock-offset.ts';
import type { PeerInfo, PeerLinkCondition, PeerStats, TransportLogger } from './types.ts';
import { issuedByBundle } from '../src/security/ca-bundle.ts';

export interface TlsMaterial {
  caPem: string;
  certPem: string;
  keyPem: string;
}

/** Per-peer counters that outlive any one connection (and the link itself on re-add). */
export interface PeerCounters {
  sent: number;
  received: number;
  dropped: number;
  wsMessagesReceived: number;
}

export interface LinkContext {
  local: LocalIdentity;
  tls: TlsMaterial;
  limits: TransportLimits;
  log: TransportLogger;
  logLimiter: RepeatLimiter;
  random: () => number;
  /** This node's wall clock (Date.now()), to compare with the peer's in its pongs. */
  wallClock: () => number;
  counters: PeerCounters;
  /** A frame from the peer on this link (it only answers: hellos, acks) was dropped. */
  countDrop(reason: InboundDropReason): void;
  notifyUnreachable(id: NodeId): void;
  notifySnapshotStatus(id: NodeId, ok: boolean): void;
  /** Whether a certificate serial is on the deny-list: a listener presenting it is refused too. */
  isRevoked(serial: string): boolean;
  /** The peer refused this node's handshake for `reason` (the owner acts on 'removed'). */
  notifyRefused(id: NodeId, reason: RefusalReason): void;
  /** The peer's answer passed every check: what it announces (its addresses) is its own word. */
  notifyHello(id: NodeId, hello: HelloFrame): void;
  /**
   * The local address outbound connections come from: the host the listener binds when it is one
   * address (a peer then sees this node's connections come from the address it announces, so a
   * firewall can admit the peer port from members' addresses only); undefined for a wildcard.
   */
  dialFrom?: string;
}

type SnapMessage = Message & { snapshot: NonNullable<Message['snapshot']> };

/** idle: not started; dialling: connecting or handshaking; open: ready; waiting: backing off. */
type LinkState = 'idle' | 'dialling' | 'open' | 'waiting' | 'closed';

/**
 * A refused connection is answered within a round trip; a dial still unanswered after this long
 * goes nowhere (a dead machine, a cut link), whatever the attempt before it met.
 */
export const dialAnsweredWithinMs = 1_000;

/** What the last dial, or the last open connection, came to (node health's evidence). */
type DialOutcome = Exclude<PeerLinkCondition, 'connected' | 'unknown'>;

/**
 * How a dial failure reads: the peer's kernel answered with a reset (ECONNREFUSED: the machine
 * is up, nothing listens on the port: shoal is not running), nothing answered at all (a timeout,
 * no route: the machine or the link is gone), or anything else (a reset mid-handshake, TLS).
 */
export function dialOutcomeOf(code: string): DialOutcome {
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ETIMEDOUT' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'EHOSTDOWN' || code === 'handshake_timeout') return 'silent';
  return 'closed';
}

export class PeerLink {
  private state: LinkState = 'idle';
  private ws: WebSocket | null = null;
  private readonly queue: SendQueue;
  private readonly snapshots: SnapMessage[] = [];
  private streaming: OutgoingSnapshot | null = null;
  private readonly awaitingAck = new Map<number, SnapMessage>();
  private nextSnapshotId = 1;
  private readonly backoff: Backoff;
  private retryTimer: NodeJS.Timeout | null = null;
  private handshakeTimer: NodeJS.Timeout | null = null;
  private certNodeId: NodeId | null = null;
  /** The serial of the listener's certificate on the current connection (Node's upper-case hex). */
  private certSerial: string | null = null;
  /** The listener's certificate (DER) on the current connection, checked again when the trust bundle changes. */
  private certDer: Buffer | null = null;
  /** This side refused the current connection (the close code echoed back is then ours). */
  private refusedByUs = false;
  private lastHeardAt = 0;
  /** When the current dial began (performance.now()). */
  private dialStartedAt = 0;
  /** What the last dial or connection came to; null while a connection is open. */
  private outcome: DialOutcome | null = null;
  /** When the peer last closed a connection saying it is going away (1001: a graceful stop); 0: never. */
  private goodbyeAt = 0;
  /** When a dial to the peer was last refused (its machine up, nothing on the peer port); 0: never. */
  private refusedAt = 0;
  private rttMs: number | null = null;
  /** The peer's wall clock against ours, from its pongs (clock-offset.ts); kept across reconnects. */
  private readonly clockOffset = new ClockOffsetEstimate();
  /** The listener's answer on the current connection; its protocolVersion is the connection's. */
  private remote: HelloFrame | null = null;
  /** Whether queued messages may go out several to a WebSocket message on this connection. */
  private batching = false;
  private flushScheduled = false;
  /** Log-limiter keys of failures reported since the last good connection. */
  private readonly failureKeys = new Set<string>();

  constructor(
    private peer: PeerInfo,
    private readonly ctx: LinkContext,
  ) {
    const { limits } = ctx;
    this.queue = new SendQueue(limits.queuedMessagesMax, limits.queuedBytesMax);
    this.backoff = new Backoff(
      { minMs: limits.reconnectDelayMinMs, maxMs: limits.reconnectDelayMaxMs, jitterRatio: limits.reconnectJitterRatio },
      ctx.random,
    );
  }

  get id(): NodeId {
    return this.peer.id;
  }

  get address(): string {
    return this.peer.address;
  }

  start(): void {
    if (this.state === 'idle') this.dial();
  }

  /** The peer moved: drop the connection to the old address and dial the new one at once. */
  setAddress(address: string): void {
    if (address === this.peer.address) return;
    this.peer = { ...this.peer, address };
    if (this.state === 'idle' || this.state === 'closed') return;
    this.ctx.log.info(`peer ${this.peer.id} moved to ${address}; reconnecting`);
    this.backoff.reset();
    this.clearRetry();
    const old = this.ws;
    if (old !== null) {
      // Detach first, so nothing more is written to the old socket while it dies.
      this.detach();
      old.terminate();
    }
    this.dial();
  }

  /**
   * Queues an encoded frame; false when the queue is full (the caller counts the drop). The
   * write waits for the end of the current turn, so the messages a node sends in one burst
   * (a Ready's) leave together.
   */
  enqueue(frame: Uint8Array): boolean {
    if (this.state === 'closed' || !this.queue.push(frame)) return false;
    this.scheduleFlush();
    return true;
  }

  /**
   * Queues a snapshot to stream. Refused (false) unless connected: Raft waits for a snapshot's
   * status before it tries again, so holding one for a peer that may stay down would stall it.
   */
  enqueueSnapshot(m: SnapMessage): boolean {
    const inFlight = this.snapshots.length + (this.streaming === null ? 0 : 1) + this.awaitingAck.size;
    if (this.state !== 'open' || inFlight >= this.ctx.limits.snapshotsQueuedMax) return false;
    this.snapshots.push(m);
    this.scheduleFlush();
    return true;
  }

  /** Called every ping interval: measure rtt, and cut a connection that has gone silent. */
  tick(nowMs: number): void {
    const ws = this.ws;
    if (ws === null || this.state !== 'open') return;
    if (nowMs - this.lastHeardAt > this.ctx.limits.silenceTimeoutMs) {
      this.ctx.log.warn(`peer ${this.peer.id} at ${this.peer.address} silent for ${Math.round(nowMs - this.lastHeardAt)} ms; reconnecting`);
      this.outcome = 'silent';
      ws.terminate();
      return;
    }
    this.ping(ws);
  }

  stats(): PeerStats {
    const stats: PeerStats = {
      id: this.peer.id,
      connected: this.state === 'open',
      rttMs: this.rttMs,
      queued: this.queue.length + this.snapshots.length + (this.streaming === null ? 0 : 1),
      ...this.ctx.counters,
    };
    if (this.remote !== null) {
      stats.softwareVersion = this.remote.softwareVersion;
      stats.protocolVersion = this.remote.protocolVersion;
      if (this.remote.featureLevelMax !== undefined) stats.featureLevelMax = this.remote.featureLevelMax;
    }
    return stats;
  }

  /** The peer's wall clock minus this node's, from its latest pongs; undefined until a peer that says its clock answered. */
  get clock(): ClockOffset | undefined {
    return this.clockOffset.current();
  }

  /** When anything last arrived on this link (a hello, a pong, an acknowledgement); 0: never. */
  get heardAtMs(): number {
    return this.lastHeardAt;
  }

  /** When the peer last said goodbye on this link (closed it with 1001); 0: never. */
  get goodbyeAtMs(): number {
    return this.goodbyeAt;
  }

  /**
   * When a dial to the peer was last refused; 0: never. Unlike condition(), a later dial that
   * hangs does not hide it: a restarted shoal listens a while before it answers the handshake.
   */
  get refusedAtMs(): number {
    return this.refusedAt;
  }

  /**
   * How the connection to the peer stands now: open, or what the last attempt came to. A dial
   * under way for longer than a refusal takes to come back is 'silent', whatever came before.
   */
  condition(nowMs: number): PeerLinkCondition {
    if (this.state === 'open') return 'connected';
    if (this.state === 'dialling' && nowMs - this.dialStartedAt > dialAnsweredWithinMs) return 'silent';
    return this.outcome ?? 'unknown';
  }

  /** Permanently: the peer was removed or the transport is closing. Queued frames are dropped. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clearRetry();
    this.clearHandshakeTimer();
    this.ctx.counters.dropped += this.queue.clear();
    this.failSnapshots();
    const ws = this.ws;
    if (ws !== null) await closeSocket(ws, CLOSE_GOING_AWAY, 'closing', this.ctx.limits.closeGraceMs);
  }

  // ---- connection lifecycle ----------------------------------------------------------------

  private dial(): void {
    this.state = 'dialling';
    this.dialStartedAt = performance.now();
    this.certNodeId = null;
    this.certSerial = null;
    this.certDer = null;
    this.refusedByUs = false;
    let ws: WebSocket;
    try {
      ws = new WebSocket(`wss://${this.peer.address}${PEER_PATH}`, this.clientOptions());
    } catch (err) {
      // ws throws on an address that makes no URL. Addresses come from member records in the
      // replicated log, which a member can fill: never let one stop the node.
      this.noteFailure('bad_address', `'${this.peer.address}' is not a usable address: ${(err as Error).message}`);
      this.ws = null;
      this.waitAndRedial();
      return;
    }
    this.ws = ws;
    this.handshakeTimer = setTimeout(() => this.handleHandshakeTimeout(ws), this.ctx.limits.handshakeTimeoutMs);
    ws.on('upgrade', (res) => {
      const cert = (res.socket as TLSSocket).getPeerCertificate();
      this.certNodeId = nodeIdFromCert(cert);
      this.certSerial = typeof cert.serialNumber === 'string' ? cert.serialNumber : null;
      this.certDer = Buffer.isBuffer(cert.raw) ? cert.raw : null;
    });
    ws.on('open', () => ws.send(encodeFrame(offerOf(this.ctx.local))));
    ws.on('message', (data, isBinary) => this.handleData(ws, rawDataToBytes(data), isBinary));
    ws.on('pong', (payload) => this.handlePong(ws, payload));
    ws.on('error', (err: NodeJS.ErrnoException) => {
      if (ws === this.ws) this.outcome = dialOutcomeOf(err.code ?? 'error');
      if (ws === this.ws && this.outcome === 'refused') this.refusedAt = performance.now();
      this.noteFailure(err.code ?? 'error', err.message);
    });
    ws.on('close', (code) => this.handleClose(ws, code));
  }

  private clientOptions(): WebSocket.ClientOptions {
    const { tls, limits } = this.ctx;
    const expected = this.peer.id;
    return {
      ca: tls.caPem,
      cert: tls.certPem,
      key: tls.keyPem,
      minVersion: 'TLSv1.3',
      rejectUnauthorized: true,
      ...(this.ctx.dialFrom !== undefined ? { localAddress: this.ctx.dialFrom } : {}),
      // Peers are named by node id, not by address (addresses change; design.md "Identity"),
      // so the server's certificate must name the node we meant to reach, whatever the host.
      checkServerIdentity: ((_host: string, cert: PeerCertificate): Error | undefined => {
        const id = nodeIdFromCert(cert);
        return id === expected ? undefined : new Error(`certificate names node '${id ?? '(none)'}', expected '${expected}'`);
      }) as unknown as WebSocket.ClientOptions['checkServerIdentity'],
      maxPayload: limits.frameBytesMax,
      handshakeTimeout: limits.handshakeTimeoutMs,
      perMessageDeflate: false,
      // WebSocket masking protects HTTP caches from frames forged by browser scripts; inside
      // TLS between our own nodes it protects nothing, and masking and unmasking every byte
      // was the largest cost of streaming a snapshot. ws skips both for an all-zero mask.
      generateMask: (mask: Buffer) => mask.fill(0),
    };
  }

  private handleData(ws: WebSocket, bytes: Uint8Array, isBinary: boolean): void {
    if (ws !== this.ws) return;
    this.lastHeardAt = performance.now();
    const decoded = isBinary ? decodeFrames(bytes) : { ok: false as const, error: 'text frame' };
    if (!decoded.ok) {
      if (this.state === 'dialling') this.refuse(ws, { reason: 'bad_handshake', detail: decoded.error });
      else {
        this.ctx.countDrop('malformed');
        this.logOnce(`badframe:${this.peer.id}`, `dropped a malformed frame from peer ${this.peer.id}: ${decoded.error}`);
      }
      return;
    }
    if (this.state !== 'dialling') {
      for (const frame of decoded.frames) this.handleFrame(frame);
      return;
    }
    const [frame] = decoded.frames;
    if (decoded.frames.length !== 1 || frame?.t !== 'hello') {
      const got = decoded.frames.length === 1 ? `'${frame?.t}'` : `${decoded.frames.length} frames in one message`;
      this.refuse(ws, { reason: 'bad_handshake', detail: `expected a hello alone, got ${got}` });
      return;
    }
    this.handleHello(ws, frame);
  }

  private handleFrame(frame: Frame): void {
    if (frame.t === 'snapAck') {
      this.handleSnapAck(frame);
      return;
    }
    this.ctx.countDrop('unexpected_frame');
    this.logOnce(`unexpected:${this.peer.id}:${frame.t}`, `dropped an unexpected '${frame.t}' frame from peer ${this.peer.id}`);
  }

  private handleHello(ws: WebSocket, hello: HelloFrame): void {
    const refusal = this.certNodeId === null
      ? { reason: 'node_id_mismatch' as const, detail: 'its certificate names no node id' }
      : checkHello(hello, this.ctx.local, this.certNodeId, this.peer.id) ?? this.revokedRefusal();
    if (refusal !== null) {
      this.refuse(ws, refusal);
      return;
    }
    this.clearHandshakeTimer();
    this.state = 'open';
    this.outcome = null;
    this.remote = hello;
    this.batching = Math.min(hello.protocolVersion, this.ctx.local.protocolVersion) >= BATCH_PROTOCOL_VERSION;
    this.backoff.reset();
    for (const key of this.failureKeys) this.ctx.logLimiter.forget(key);
    this.failureKeys.clear();
    this.ctx.log.info(
      `connected to peer ${hello.nodeId} at ${this.peer.address} (software ${hello.softwareVersion}, protocol ${hello.protocolVersion})`,
    );
    this.ctx.notifyHello(this.peer.id, hello);
    // Measure rtt right away rather than a ping interval later.
    this.ping(ws);
    this.pump();
  }

  private revokedRefusal(): Refusal | null {
    if (this.certSerial === null || !this.ctx.isRevoked(this.certSerial)) return null;
    return { reason: 'revoked', detail: `the certificate of node '${this.peer.id}' (serial ${this.certSerial.toLowerCase()}) is revoked` };
  }

  /** The deny-list grew: a connection whose listener's certificate is now revoked is refused as its handshake would be. */
  refuseIfRevoked(): void {
    const ws = this.ws;
    if (ws === null || (this.state !== 'open' && this.state !== 'dialling')) return;
    const refusal = this.revokedRefusal();
    if (refusal !== null) this.refuse(ws, refusal);
  }

  /**
   * The trust bundle changed (a CA rotation retired a CA): a connection whose listener showed a
   * certificate no CA of `bundlePem` issued is dropped and dialled again, where the listener must
   * show one this node trusts now (a member renewed its certificate before the old CA was retired).
   */
  dropIfUntrusted(bundlePem: string): void {
    const ws = this.ws;
    if (ws === null || this.state !== 'open' || this.certDer === null || issuedByBundle(this.certDer, bundlePem)) return;
    this.ctx.log.warn(`dropping the connection to peer ${this.peer.id} at ${this.peer.address}: its certificate is from a CA this node no longer trusts; dialling again`);
    ws.terminate();
  }

  private refuse(ws: WebSocket, refusal: Refusal): void {
    this.logFailure(refusal.reason, `refused peer ${this.peer.id} at ${this.peer.address}: ${refusal.reason}: ${refusal.detail}`);
    this.refusedByUs = true;
    ws.close(REFUSAL_CODES[refusal.reason], refusal.reason);
  }

  private handleHandshakeTimeout(ws: WebSocket): void {
    if (ws !== this.ws || this.state !== 'dialling') return;
    this.outcome = 'silent';
    this.noteFailure('handshake_timeout', `no hello within ${this.ctx.limits.handshakeTimeoutMs} ms`);
    ws.terminate();
  }

  private handleClose(ws: WebSocket, code: number): void {
    if (ws !== this.ws) return;
    const wasOpen = this.detach();
    if (code === CLOSE_GOING_AWAY && this.state !== 'closed') this.goodbyeAt = performance.now();
    if (wasOpen && this.outcome === null) this.outcome = 'closed';
    const refusal = refusalReasonOf(code);
    if (refusal !== undefined && !this.refusedByUs) {
      this.noteFailure(refusal, `the peer refused the connection: ${refusal} (close code ${code})`);
      this.ctx.notifyRefused(this.peer.id, refusal);
    }
    else if (wasOpen) this.ctx.log.info(`connection to peer ${this.peer.id} at ${this.peer.address} lost (close code ${code})`);
    if (this.state === 'closed') return;
    this.waitAndRedial();
  }

  private waitAndRedial(): void {
    this.state = 'waiting';
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.state === 'waiting') this.dial();
    }, this.backoff.next());
  }

  /** Forgets the current socket; returns whether it was open. Queued frames stay queued. */
  private detach(): boolean {
    const wasOpen = this.state === 'open';
    this.ws = null;
    if (wasOpen) this.state = 'waiting';
    this.clearHandshakeTimer();
    this.failSnapshots();
    if (wasOpen) this.ctx.notifyUnreachable(this.peer.id);
    return wasOpen;
  }

  private noteFailure(kind: string, detail: string): void {
    if (this.state === 'closed') return;
    this.logFailure(kind, `cannot connect to peer ${this.peer.id} at ${this.peer.address}: ${kind}: ${detail}`);
  }

  /**
   * A failure of a kind already reported goes to debug until the link connects again; a new
   * kind (the peer came back, but with the wrong cluster id) is reported at warn.
   */
  private logFailure(kind: string, msg: string): void {
    const key = `dial:${this.peer.id}:${kind}`;
    this.failureKeys.add(key);
    this.logOnce(key, msg);
  }

  private logOnce(key: string, msg: string): void {
    if (this.ctx.logLimiter.first(key)) this.ctx.log.warn(msg);
    else this.ctx.log.debug(msg);
  }

  // ---- writing -----------------------------------------------------------------------------

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.pump();
    });
  }

  /**
   * Hands frames to the socket while its buffer is below the bound; every write's callback
   * pumps again, so a slow peer paces the sender instead of growing the buffer. Queued
   * messages go before snapshot chunks so heartbeats are not stuck behind a long stream.
   */
  private pump(): void {
    const ws = this.ws;
    // A socket already closing would only swallow frames that the next connection can carry.
    if (ws === null || this.state !== 'open' || ws.readyState !== WebSocket.OPEN) return;
    while (ws.bufferedAmount < this.ctx.limits.socketBufferedBytesMax) {
      if (this.queue.length > 0) {
        const { payload, messages } = this.nextBatch();
        ws.send(payload, (err) => this.handleWritten(err, messages));
        continue;
      }
      const chunk = this.nextSnapshotFrame();
      if (chunk === null) return;
      ws.send(chunk, (err) => this.handleWritten(err, 0));
    }
  }

  /**
   * Takes the next queued frame, and on a batching connection as many following ones as fit
   * under the batch bound, as one WebSocket message. A frame is never split; one larger than
   * the bound travels alone. Only called with a non-empty queue.
   */
  private nextBatch(): { payload: Uint8Array; messages: number } {
    const first = this.queue.shift();
    assert(first !== undefined, 'nextBatch on an empty queue');
    if (!this.batching) return { payload: first, messages: 1 };
    const { batchBytesMax, frameBytesMax } = this.ctx.limits;
    const bound = Math.min(batchBytesMax, frameBytesMax);
    const frames = [first];
    let bytes = first.byteLength;
    for (let next = this.queue.peek(); next !== undefined && bytes + next.byteLength <= bound; next = this.queue.peek()) {
      this.queue.shift();
      frames.push(next);
      bytes += next.byteLength;
    }
    return { payload: frames.length === 1 ? first : Buffer.concat(frames, bytes), messages: frames.length };
  }

  /** `err` is null or undefined on success, depending on the stream underneath. */
  private handleWritten(err: Error | null | undefined, messages: number): void {
    const ok = err === null || err === undefined;
    if (ok) this.ctx.counters.sent += messages;
    else this.ctx.counters.dropped += messages;
    if (ok) this.pump();
  }

  private nextSnapshotFrame(): Uint8Array | null {
    if (this.streaming === null) {
      const m = this.snapshots.shift();
      if (m === undefined) return null;
      this.streaming = new OutgoingSnapshot(this.nextSnapshotId++, m, this.ctx.limits.snapshotChunkBytes);
    }
    const s = this.streaming;
    const frame = s.nextFrame();
    if (s.finished) {
      this.awaitingAck.set(s.id, s.message);
      this.streaming = null;
    }
    return frame ?? this.nextSnapshotFrame();
  }

  private handleSnapAck(ack: SnapAckFrame): void {
    let m = this.awaitingAck.get(ack.id);
    if (m !== undefined) this.awaitingAck.delete(ack.id);
    else if (this.streaming?.id === ack.id) {
      // Refused before the stream ended (too large, malformed): stop sending its chunks.
      m = this.streaming.message;
      this.streaming = null;
    }
    if (m === undefined) return;
    if (ack.ok) this.ctx.counters.sent++;
    else {
      this.ctx.counters.dropped++;
      this.ctx.log.warn(`peer ${this.peer.id} did not take snapshot ${m.snapshot.meta.index}: ${ack.reason ?? 'no reason given'}`);
    }
    this.ctx.notifySnapshotStatus(this.peer.id, ack.ok);
    this.pump();
  }

  /** Every snapshot not yet acknowledged has failed: Raft must hear so, or it waits forever. */
  private failSnapshots(): void {
    const failed = this.snapshots.length + (this.streaming === null ? 0 : 1) + this.awaitingAck.size;
    this.snapshots.length = 0;
    this.streaming = null;
    this.awaitingAck.clear();
    this.ctx.counters.dropped += failed;
    for (let i = 0; i < failed; i++) this.ctx.notifySnapshotStatus(this.peer.id, false);
  }

  private ping(ws: WebSocket): void {
    ws.ping(pingPayload(performance.now()));
  }

  private handlePong(ws: WebSocket, payload: Buffer): void {
    if (ws !== this.ws) return;
    const now = performance.now();
    this.lastHeardAt = now;
    const pong = readPong(payload, now);
    if (pong.rttMs !== null) this.rttMs = pong.rttMs;
    if (pong.rttMs !== null && pong.remoteWallMs !== null) this.clockOffset.add(pong.remoteWallMs, this.ctx.wallClock(), pong.rttMs, now);
  }

  private clearRetry(): void {
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private clearHandshakeTimer(): void {
    if (this.handshakeTimer !== null) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = null;
  }
}
