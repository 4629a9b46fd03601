// The real transport: WebSocket (ws) over mutual TLS 1.3 with certificates from the cluster
// CA, msgpack frames, a hello handshake, bounded per-peer queues, chunked snapshots, pings.
//
// Connection direction: every node dials every peer it knows, and a connection carries
// traffic one way only, from the dialler to the listener (the listener answers with its
// hello, pongs and snapshot acks). So each pair of nodes holds two connections. That costs one
// socket more than a deduplicated pair, and buys the absence of a tie-break race (two nodes
// dialling each other at once) and of any "which connection do I write to" state: sending is
// always the link this node dialled, receiving always the connection the peer dialled. etcd's
// rafthttp and hashicorp/raft make the same choice. A node that does not list a peer (a new
// node that has not yet learned the membership) still receives from it, which is how a
// joining node hears its first messages from the leader.

import { performance } from 'node:perf_hooks';
import { isIP } from 'node:net';
import type WebSocket from 'ws';
import type { Message, NodeId } from '../src/raft/types.ts';
import { isValidId } from '../src/security/identity.ts';
import { issuedByBundle } from '../src/security/ca-bundle.ts';
import { encodeFrame } from './codec.ts';
import { isNetworkMessageType, type HelloFrame } from './frames.ts';
import type { Announcement, LocalIdentity, PeerAuthorization, RefusalReason } from './handshake.ts';
import { InboundConnection, type InboundContext } from './inbound-connection.ts';
import { InboundDropCounter, type InboundDropCounts, type MessageRefusal } from './inbound-drops.ts';
import { resolveLimits, type TransportLimits } from './limits.ts';
import { RepeatLimiter } from './log-limiter.ts';
import { PeerLink, type LinkContext, type PeerCounters, type TlsMaterial } from './peer-link.ts';
import { identifyPeer } from './peer-probe.ts';
import { PeerServer } from './peer-server.ts';
import { formatAddress } from './socket-util.ts';
import { CLOSE_GOING_AWAY } from './handshake.ts';
import type { MessageHandler, PeerContact, PeerInfo, PeerStats, Transport, TransportLogger, UnreachableReason } from './types.ts';

export interface WsTransportOptions {
  nodeId: NodeId;
  clusterId: string;
  /** Where the peer listener binds; port 0 picks a free port (see `address`). */
  listen: { host: string; port: number };
  tls: TlsMaterial;
  /** The protocol version this node speaks; must lie within `protocolVersionsSupported`. */
  protocolVersion: number;
  /** Peers speaking a version outside this range are refused. */
  protocolVersionsSupported: { min: number; max: number };
  softwareVersion: string;
  /** The highest cluster feature level this node can apply, announced in the hello. */
  featureLevelMax?: number;
  logger?: TransportLogger;
  limits?: Partial<TransportLimits>;
  /** Randomness for reconnect jitter, in [0, 1). Default Math.random. */
  random?: () => number;
  /** This node's wall clock, told to peers in pongs and compared with theirs (contact().clockOffsetMs). Default Date.now. */
  wallClock?: () => number;
  /** Refuses peers whose certificate is valid but who may not connect (not members, removed). Default: all are members. */
  authorizePeer?: (id: NodeId) => PeerAuthorization;
  /** Refuses certificates by serial (the deny-list), in both directions. Default: none is. */
  isRevoked?: (serial: string) => boolean;
  /** What each hello announces: this node's addresses and peer hints (asked at every hello). */
  announce?: () => Announcement;
}

function clockOf(link: PeerLink | undefined, now: number): Pick<PeerContact, 'clockOffsetMs' | 'clockSampledAgoMs'> {
  const c = link?.clock;
  return c === undefined ? {} : { clockOffsetMs: c.offsetMs, clockSampledAgoMs: now - c.sampledAt };
}

/** Warn about the same recurring failure at most once a minute; repeats go to debug. */
const LOG_REPEAT_WINDOW_MS = 60_000;

const consoleLogger: TransportLogger = {
  debug: () => {},
  info: (m) => console.info(`[transport] ${m}`),
  warn: (m) => console.warn(`[transport] ${m}`),
  error: (m) => console.error(`[transport] ${m}`),
};

export class WsTransport implements Transport {
  private readonly local: LocalIdentity;
  private readonly limits: TransportLimits;
  private readonly log: TransportLogger;
  private readonly logLimiter = new RepeatLimiter(LOG_REPEAT_WINDOW_MS);
  private readonly links = new Map<NodeId, PeerLink>();
  private readonly counters = new Map<NodeId, PeerCounters>();
  /** The newest accepted inbound connection per peer; older ones are closed as superseded. */
  private readonly inbound = new Map<NodeId, InboundConnection>();
  private readonly pendingInbound = new Set<InboundConnection>();
  private readonly server: PeerServer;
  private state: 'new' | 'starting' | 'running' | 'closed' = 'new';
  private starting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  private boundAddress: string | null = null;
  private ticker: NodeJS.Timeout | null = null;
  private messageHandler: MessageHandler | null = null;
  private readonly drops = new InboundDropCounter();
  private unreachableHandler: ((id: NodeId, why: UnreachableReason) => void) | null = null;
  private snapshotHandler: ((id: NodeId, ok: boolean) => void) | null = null;
  private refusedHandler: ((id: NodeId, reason: RefusalReason) => void) | null = null;
  private announcedHandler: ((id: NodeId, announced: Announcement) => void) | null = null;
  private readonly pendingUnreachable = new Map<NodeId, UnreachableReason>();
  /** Per peer, what its closed inbound connections last heard, and when one closed saying goodbye. */
  private readonly inboundPast = new Map<NodeId, { heardAt: number; goodbyeAt: number }>();
  private startedAt = 0;

  constructor(private readonly opts: WsTransportOptions) {
    checkOptions(opts);
    this.local = {
      nodeId: opts.nodeId,
      clusterId: opts.clusterId,
      protocolVersion: opts.protocolVersion,
      protocolVersionsSupported: { ...opts.protocolVersionsSupported },
      softwareVersion: opts.softwareVersion,
      ...(opts.featureLevelMax !== undefined ? { featureLevelMax: opts.featureLevelMax } : {}),
      ...(opts.announce !== undefined ? { announce: opts.announce } : {}),
    };
    this.limits = resolveLimits(opts.limits);
    this.log = opts.logger ?? consoleLogger;
    this.server = new PeerServer({
      ...opts.listen,
      tls: opts.tls,
      limits: this.limits,
      log: this.log,
      logLimiter: this.logLimiter,
      onConnection: (ws, remote, certNodeId, certSerial, certDer) => this.handleConnection(ws, remote, certNodeId, certSerial, certDer),
    });
  }

  get address(): string {
    if (this.boundAddress === null) throw new Error('WsTransport.address is only known after start()');
    return this.boundAddress;
  }

  start(): Promise<void> {
    if (this.state === 'closed') return Promise.reject(new Error('WsTransport is closed'));
    this.starting ??= this.startImpl();
    return this.starting;
  }

  setPeers(peers: PeerInfo[]): void {
    if (this.state === 'closed') return;
    const wanted = new Map<NodeId, PeerInfo>();
    for (const p of peers) {
      if (p.id !== this.local.nodeId) wanted.set(p.id, p);
    }
    for (const [id, link] of this.links) {
      if (wanted.has(id)) continue;
      this.links.delete(id);
      this.counters.delete(id);
      this.inboundPast.delete(id);
      this.log.info(`peer ${id} removed; closing its connection`);
      void link.close();
    }
    for (const p of wanted.values()) this.upsertLink(p);
    this.closeInboundOfNonMembers(wanted);
  }

  /**
   * A peer that is no longer a member (removed) loses its inbound connections at once, closed
   * with the reason its next handshake would get: its own outbound link then hears `removed` and
   * the node stops, instead of campaigning into a connection nobody listens to. Only when the
   * owner knows members at all (`authorizePeer` says so), as at the handshake.
   */
  private closeInboundOfNonMembers(wanted: ReadonlyMap<NodeId, PeerInfo>): void {
    const authorize = this.opts.authorizePeer;
    if (authorize === undefined) return;
    for (const [id, conn] of this.inbound) {
      if (wanted.has(id)) continue;
      const verdict = authorize(id);
      if (verdict === 'member') continue;
      this.inbound.delete(id);
      this.log.info(`closing the connection from ${id}: ${verdict === 'removed' ? 'it was removed from the cluster' : 'it is not a member'}`);
      void conn.close(verdict === 'removed' ? 'removed' : 'peer_not_authorized');
    }
  }

  /**
   * The deny-list grew: connections already open with a certificate now revoked are closed at
   * once, as their next handshake would be refused. Inbound ones with the reason `revoked`;
   * outbound links refuse their peer the same way and redial (to be refused again until the peer
   * has a certificate that is not revoked).
   */
  closeRevoked(): void {
    if (this.state === 'closed' || this.opts.isRevoked === undefined) return;
    for (const [id, conn] of this.inbound) {
      if (!conn.isRevoked()) continue;
      this.inbound.delete(id);
      this.log.warn(`closing the connection from ${id}: its certificate was revoked`);
      void conn.close('revoked');
    }
    for (const link of this.links.values()) link.refuseIfRevoked();
  }

  send(m: Message): void {
    if (this.state === 'closed') return;
    const link = this.links.get(m.to);
    if (link === undefined || !isNetworkMessageType(m.type)) {
      this.dropUnsendable(m, link === undefined ? 'not a known peer' : `'${m.type}' is a local message type`);
      return;
    }
    if (m.type === 'snap' && m.snapshot !== undefined) {
      this.sendSnapshot(link, { ...m, snapshot: m.snapshot });
      return;
    }
    const frame = encodeFrame({ t: 'msg', m });
    if (frame.byteLength > this.limits.frameBytesMax) {
      this.log.warn(`dropped a '${m.type}' message to ${m.to}: ${frame.byteLength} bytes exceed frameBytesMax ${this.limits.frameBytesMax}`);
      this.countDrop(m.to);
      return;
    }
    if (!link.enqueue(frame)) this.countDrop(m.to);
  }

  onMessage(h: MessageHandler): void {
    this.messageHandler = h;
  }

  onUnreachable(h: (id: NodeId, why: UnreachableReason) => void): void {
    this.unreachableHandler = h;
  }

  onSnapshotStatus(h: (id: NodeId, ok: boolean) => void): void {
    this.snapshotHandler = h;
  }

  onRefused(h: (id: NodeId, reason: RefusalReason) => void): void {
    this.refusedHandler = h;
  }

  /**
   * A peer's hello passed every check (its certificate names the node it claims to be, same
   * cluster, a member): `announced` is what that node says of itself (its addresses) and the
   * peer addresses it knows of (hints). Called on both sides of every connection, in a later task.
   */
  onAnnounced(h: (id: NodeId, announced: Announcement) => void): void {
    this.announcedHandler = h;
  }

  /**
   * Which node answers at `address`: a TLS handshake with this node's certificate, in which the
   * listener must present a node certificate of the cluster CA (not revoked); nothing is sent.
   * Rejects when nothing answers, or not a node of this cluster, within the handshake timeout.
   */
  identify(address: string): Promise<NodeId> {
    const dialFrom = dialFromOf(this.opts.listen.host);
    return identifyPeer(address, {
      tls: this.opts.tls, timeoutMs: this.limits.handshakeTimeoutMs, isRevoked: this.opts.isRevoked ?? (() => false),
      ...(dialFrom !== undefined ? { dialFrom } : {}),
    });
  }

  /**
   * The node's certificate was renewed (src/security/renewal.ts replaced opts.tls's fields in
   * place): new inbound connections get it now; outbound links read opts.tls at each connect.
   */
  reloadTls(): void {
    this.server.reloadTls();
    this.dropUntrusted();
  }

  /**
   * After a change of the trust bundle (a CA rotation's retire): connections opened with a
   * certificate no CA of the bundle issued are closed, both ways, so a certificate of a retired
   * CA keeps no connection open, and nothing more it carries is delivered. The dialler comes back
   * at once (the connection was open, so its backoff starts from the shortest delay), and its new
   * handshake meets the new bundle: a member renewed its certificate before the retire, so only
   * a certificate of the old CA stays out.
   */
  private dropUntrusted(): void {
    if (this.state === 'closed') return;
    const bundle = this.opts.tls.caPem;
    for (const [id, conn] of this.inbound) {
      if (conn.certDer === null || issuedByBundle(conn.certDer, bundle)) continue;
      this.inbound.delete(id);
      this.log.warn(`closing the connection from ${id}: its certificate is from a CA this node no longer trusts`);
      conn.terminate();
    }
    for (const link of this.links.values()) link.dropIfUntrusted(bundle);
  }

  stats(): PeerStats[] {
    return [...this.links.values()].map((l) => l.stats());
  }

  /**
   * What this transport knows of `id` being there: when anything last arrived from it on either
   * connection, how the outbound link stands, and whether, with nothing heard since, it said
   * goodbye (closed a connection with 1001 as it stopped) or refused a dial (docs/control-plane.md,
   * "Node health"). With it, the peer's wall clock against this node's, from the pongs of the link
   * (transport/clock-offset.ts), when the peer says its clock (not a first-release peer).
   */
  contact(id: NodeId): PeerContact {
    const now = performance.now();
    const link = this.links.get(id);
    const past = this.inboundPast.get(id);
    const heardAt = Math.max(link?.heardAtMs ?? 0, this.inbound.get(id)?.lastHeardAt ?? 0, past?.heardAt ?? 0);
    const goodbyeAt = Math.max(link?.goodbyeAtMs ?? 0, past?.goodbyeAt ?? 0);
    return {
      heardAgoMs: heardAt > 0 ? now - heardAt : undefined,
      watchingForMs: this.startedAt > 0 ? now - this.startedAt : 0,
      link: link?.condition(now) ?? 'unknown',
      goodbye: goodbyeAt > 0 && goodbyeAt >= heardAt,
      refused: link !== undefined && link.refusedAtMs > 0 && link.refusedAtMs >= heardAt,
      ...clockOf(link, now),
    };
  }

  inboundDrops(): InboundDropCounts {
    return this.drops.snapshot();
  }

  close(): Promise<void> {
    this.closing ??= this.closeImpl();
    return this.closing;
  }

  // ---- implementation ----------------------------------------------------------------------

  private async startImpl(): Promise<void> {
    this.state = 'starting';
    const { host, port } = await this.server.listen();
    if (this.state !== 'starting') return; // closed while listening
    this.boundAddress = formatAddress(host, port);
    this.state = 'running';
    this.startedAt = performance.now();
    this.ticker = setInterval(() => this.tick(), this.limits.pingIntervalMs);
    this.ticker.unref();
    for (const link of this.links.values()) link.start();
    this.log.info(`peer transport of ${this.local.nodeId} listening on ${this.boundAddress}`);
  }

  private async closeImpl(): Promise<void> {
    const wasListening = this.state !== 'new';
    this.state = 'closed';
    if (this.ticker !== null) clearInterval(this.ticker);
    this.pendingUnreachable.clear();
    const closing: Promise<void>[] = [...this.links.values()].map((l) => l.close());
    for (const c of [...this.inbound.values(), ...this.pendingInbound]) closing.push(c.close('closing'));
    this.links.clear();
    this.inbound.clear();
    this.pendingInbound.clear();
    await Promise.all(closing);
    if (wasListening) {
      await this.starting?.catch(() => undefined);
      await this.server.close(this.limits.closeGraceMs);
    }
  }

  private upsertLink(p: PeerInfo): void {
    const existing = this.links.get(p.id);
    if (existing !== undefined) {
      existing.setAddress(p.address);
      return;
    }
    const link = new PeerLink(p, this.linkContext(p.id));
    this.links.set(p.id, link);
    if (this.state === 'running') link.start();
  }

  private linkContext(id: NodeId): LinkContext {
    return {
      local: this.local,
      tls: this.opts.tls,
      limits: this.limits,
      log: this.log,
      logLimiter: this.logLimiter,
      random: this.opts.random ?? Math.random,
      wallClock: this.opts.wallClock ?? Date.now,
      counters: this.countersOf(id),
      countDrop: (reason) => this.drops.count(reason),
      isRevoked: this.opts.isRevoked ?? (() => false),
      notifyUnreachable: (peer) => this.notifyUnreachable(peer, 'disconnected'),
      notifySnapshotStatus: (peer, ok) => this.notifySnapshotStatus(peer, ok),
      notifyRefused: (peer, reason) => {
        if (this.state === 'running') this.refusedHandler?.(peer, reason);
      },
      notifyHello: (peer, hello) => this.notifyAnnounced(peer, hello),
      ...(dialFromOf(this.opts.listen.host) !== undefined ? { dialFrom: dialFromOf(this.opts.listen.host) } : {}),
    };
  }

  private countersOf(id: NodeId): PeerCounters {
    let c = this.counters.get(id);
    if (c === undefined) this.counters.set(id, (c = { sent: 0, received: 0, dropped: 0, wsMessagesReceived: 0 }));
    return c;
  }

  private sendSnapshot(link: PeerLink, m: Message & { snapshot: NonNullable<Message['snapshot']> }): void {
    if (link.enqueueSnapshot(m)) return;
    const msg = `snapshot ${m.snapshot.meta.index} for ${m.to} not sent: peer not connected or a snapshot already in flight`;
    if (this.logLimiter.first(`snapshot:${m.to}`)) this.log.warn(msg);
    else this.log.debug(msg);
    this.countDrop(m.to);
    this.notifySnapshotStatus(m.to, false);
  }

  private dropUnsendable(m: Message, why: string): void {
    if (this.logLimiter.first(`unsendable:${m.to}:${why}`)) this.log.warn(`dropped a '${m.type}' message to '${m.to}': ${why}`);
    // A local message type is a driver bug, not a sign that the peer is down.
    if (this.links.has(m.to)) this.countersOf(m.to).dropped++;
    else this.notifyUnreachable(m.to, 'dropped');
    if (m.type === 'snap') this.notifySnapshotStatus(m.to, false);
  }

  private countDrop(id: NodeId): void {
    this.countersOf(id).dropped++;
    this.notifyUnreachable(id, 'dropped');
  }

  // ---- inbound -----------------------------------------------------------------------------

  private handleConnection(ws: WebSocket, remote: string, certNodeId: NodeId | null, certSerial: string | null, certDer: Buffer | null): void {
    if (this.state !== 'running') {
      ws.terminate();
      return;
    }
    const conn = new InboundConnection(ws, remote, certNodeId, certSerial, certDer, this.inboundContext());
    this.pendingInbound.add(conn);
    ws.once('close', () => this.pendingInbound.delete(conn));
  }

  private inboundContext(): InboundContext {
    return {
      local: this.local,
      limits: this.limits,
      log: this.log,
      logLimiter: this.logLimiter,
      wallClock: this.opts.wallClock ?? Date.now,
      authorizePeer: this.opts.authorizePeer ?? (() => 'member'),
      isRevoked: this.opts.isRevoked ?? (() => false),
      accepted: (conn) => this.acceptInbound(conn),
      closed: (conn, code) => {
        const id = conn.peerId;
        if (id === null) return;
        if (this.inbound.get(id) === conn) this.inbound.delete(id);
        if (this.state !== 'running') return;
        const past = this.inboundPast.get(id) ?? { heardAt: 0, goodbyeAt: 0 };
        past.heardAt = Math.max(past.heardAt, conn.lastHeardAt);
        if (code === CLOSE_GOING_AWAY) past.goodbyeAt = performance.now();
        this.inboundPast.set(id, past);
      },
      deliver: (from, m) => this.deliver(from, m),
      countWsMessage: (from) => {
        if (this.state !== 'closed') this.countersOf(from).wsMessagesReceived++;
      },
      countDrop: (reason) => this.drops.count(reason),
    };
  }

  /** A peer that redials (after a network blip) replaces its old, possibly half-open, connection. */
  private acceptInbound(conn: InboundConnection): void {
    const id = conn.peerId;
    if (id === null) return;
    this.pendingInbound.delete(conn);
    const old = this.inbound.get(id);
    this.inbound.set(id, conn);
    if (old !== undefined && old !== conn) void old.close('superseded');
    if (conn.hello !== null) this.notifyAnnounced(id, conn.hello);
  }

  /** Returns the handler's refusal, if it refused the message. */
  private deliver(from: NodeId, m: Message): MessageRefusal | undefined {
    if (this.state === 'closed') return undefined;
    const h = this.messageHandler;
    if (h === null) {
      this.log.debug(`dropped a '${m.type}' message from ${from}: no message handler yet`);
      return undefined;
    }
    this.countersOf(from).received++;
    let refusal: MessageRefusal | undefined;
    try {
      refusal = h(m) ?? undefined;
    } catch (err) {
      this.log.error(`message handler threw on a '${m.type}' message from ${from}: ${(err as Error).stack ?? String(err)}`);
      return undefined;
    }
    if (refusal === undefined) return undefined;
    this.drops.count(refusal.reason);
    const msg = `the node refused a '${m.type}' message from ${from}: ${refusal.reason}: ${refusal.detail}`;
    if (this.logLimiter.first(`refused:${from}:${refusal.reason}`)) this.log.warn(msg);
    else this.log.debug(msg);
    return refusal;
  }

  // ---- notifications -----------------------------------------------------------------------

  /**
   * Coalesced and deferred to a microtask: the driver may be in the middle of sending a Ready
   * when a drop happens, and a peer with a full queue would otherwise be reported once per
   * message. A lost connection outweighs drops in the same turn.
   */
  private notifyUnreachable(id: NodeId, why: UnreachableReason): void {
    if (this.state === 'closed') return;
    const first = this.pendingUnreachable.size === 0;
    if (this.pendingUnreachable.get(id) !== 'disconnected') this.pendingUnreachable.set(id, why);
    if (!first) return;
    queueMicrotask(() => {
      const reports = [...this.pendingUnreachable];
      this.pendingUnreachable.clear();
      for (const [peer, reason] of reports) this.callHandler('unreachable', () => this.unreachableHandler?.(peer, reason));
    });
  }

  /** Deferred: the owner may call setPeers, which may close the very socket this came from. */
  private notifyAnnounced(id: NodeId, hello: HelloFrame): void {
    if (this.state === 'closed' || this.announcedHandler === null) return;
    const announced: Announcement = {
      ...(hello.peerAddress !== undefined ? { peerAddress: hello.peerAddress } : {}),
      ...(hello.apiAddress !== undefined ? { apiAddress: hello.apiAddress } : {}),
      ...(hello.peerHints !== undefined ? { peerHints: hello.peerHints } : {}),
    };
    if (Object.keys(announced).length === 0) return;
    queueMicrotask(() => this.callHandler('announced', () => this.announcedHandler?.(id, announced)));
  }

  private notifySnapshotStatus(id: NodeId, ok: boolean): void {
    if (this.state === 'closed') return;
    queueMicrotask(() => this.callHandler('snapshot status', () => this.snapshotHandler?.(id, ok)));
  }

  private callHandler(what: string, call: () => void): void {
    if (this.state === 'closed') return;
    try {
      call();
    } catch (err) {
      this.log.error(`${what} handler threw: ${(err as Error).stack ?? String(err)}`);
    }
  }

  private tick(): void {
    const now = performance.now();
    for (const link of this.links.values()) link.tick(now);
    for (const conn of [...this.inbound.values(), ...this.pendingInbound]) conn.tick(now);
  }
}

/** Programmer errors in the options fail at construction, not on the first connection. */
function checkOptions(opts: WsTransportOptions): void {
  if (!isValidId(opts.nodeId)) throw new TypeError(`invalid nodeId ${JSON.stringify(opts.nodeId)}`);
  if (!isValidId(opts.clusterId)) throw new TypeError(`invalid clusterId ${JSON.stringify(opts.clusterId)}`);
  const { min, max } = opts.protocolVersionsSupported;
  const isVersion = (v: number): boolean => Number.isInteger(v) && v >= 0;
  if (!isVersion(min) || !isVersion(max) || !isVersion(opts.protocolVersion)) {
    throw new RangeError('protocol versions must be non-negative integers');
  }
  if (min > max || opts.protocolVersion < min || opts.protocolVersion > max) {
    throw new RangeError(`protocolVersion ${opts.protocolVersion} must lie within protocolVersionsSupported ${min}..${max}`);
  }
  if (!Number.isInteger(opts.listen.port) || opts.listen.port < 0 || opts.listen.port > 65535) {
    throw new RangeError(`listen.port must be an integer in 0..65535, got ${opts.listen.port}`);
  }
}

/** The listener's host as a source address for outbound connections: one IP address, not a wildcard or a name. */
export function dialFromOf(host: string): string | undefined {
  const h = host.replace(/^\[|\]$/g, '');
  if (isIP(h) === 0 || h === '0.0.0.0' || h === '::') return undefined;
  return h;
}
