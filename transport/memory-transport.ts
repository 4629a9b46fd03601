// An in-memory transport with fault injection. Transports register on a shared MemoryNetwork
// hub; the hub decides each message's fate (lost, duplicated, delayed, cut by a partition) and
// delivers it by timer or, in manual mode, when the test calls flush(). With an injected
// random function and manual delivery, a run is a pure function of its seed.
//
// It keeps the contract of the real transport: `send` never throws; a message to a peer that
// is not listed, not running, or cut off is dropped, counted, and reported unreachable; a
// message lost at random is dropped silently (like a lost packet) but counted; handlers run
// asynchronously, never inside `send`; a 'snap' message reports its status once delivered or
// lost.
//
// A message is checked on delivery as the real transport checks it (addressing and meaning,
// check-message.ts; a core never sends one of the wrong shape), and a test can hand a node
// anything a peer could put on the wire (`injectValue`, `injectBytes`), which passes the shape
// check as well.

import type { Message, NodeId } from '../src/raft/types.ts';
import { admitMessage } from './check-message.ts';
import { decodeFrames } from './codec.ts';
import { InboundDropCounter, type InboundDropCounts, type InboundDropReason, type MessageRefusal } from './inbound-drops.ts';
import type { MessageHandler, PeerInfo, PeerStats, Transport, UnreachableReason } from './types.ts';
import { validateMessage } from './validate-message.ts';

export interface MemoryFaults {
  /** Probability in [0, 1] that a message is lost. */
  dropRate: number;
  /** Probability in [0, 1] that a delivered message is delivered a second time. */
  duplicateRate: number;
  /** Delay before delivery in timer mode: fixed, or drawn uniformly from [min, max]. */
  delayMs: number | { min: number; max: number };
}

export interface MemoryNetworkOptions extends Partial<MemoryFaults> {
  /** Returns a number in [0, 1); inject a seeded one for reproducible runs. Default Math.random. */
  random?: () => number;
  /** Hold every message until flush() instead of delivering it by timer. Default false. */
  manual?: boolean;
  /** Deliver deep copies, so sender and receiver never share a mutable object. Default true. */
  clone?: boolean;
}

interface InFlight {
  m: Message;
  from: MemoryTransport;
  timer: NodeJS.Timeout | null;
}

export class MemoryNetwork {
  private readonly members = new Map<NodeId, MemoryTransport>();
  private faults: MemoryFaults;
  private readonly random: () => number;
  private readonly manual: boolean;
  private readonly clone: boolean;
  private readonly isolated = new Set<NodeId>();
  private readonly cut = new Set<string>();
  private readonly inFlight = new Set<InFlight>();

  constructor(options: MemoryNetworkOptions = {}) {
    this.random = options.random ?? Math.random;
    this.manual = options.manual ?? false;
    this.clone = options.clone ?? true;
    this.faults = checkFaults({ dropRate: options.dropRate ?? 0, duplicateRate: options.duplicateRate ?? 0, delayMs: options.delayMs ?? 0 });
  }

  /** A transport for `nodeId` on this network (not yet started). */
  transport(nodeId: NodeId, versions: PeerVersions = {}): MemoryTransport {
    return new MemoryTransport(this, { nodeId, ...versions });
  }

  setFaults(faults: Partial<MemoryFaults>): void {
    this.faults = checkFaults({ ...this.faults, ...faults });
  }

  /** Cuts both directions between a and b. */
  partition(a: NodeId, b: NodeId): void {
    this.oneWay(a, b);
    this.oneWay(b, a);
  }

  /** Cuts every link to and from `id`, including to nodes that register later. */
  isolate(id: NodeId): void {
    this.isolated.add(id);
  }

  /** Cuts `from` → `to` only: `to` still reaches `from`. */
  oneWay(from: NodeId, to: NodeId): void {
    this.cut.add(linkKey(from, to));
  }

  /** Removes every partition, isolation and one-way cut (faults set by rate stay). */
  heal(): void {
    this.isolated.clear();
    this.cut.clear();
  }

  /** Whether a message from `from` would currently reach `to`. */
  canReach(from: NodeId, to: NodeId): boolean {
    const dest = this.members.get(to);
    return dest !== undefined && dest.isRunning && !this.isolated.has(from) && !this.isolated.has(to) && !this.cut.has(linkKey(from, to));
  }

  /** Messages sent and not yet delivered or dropped. */
  get pending(): number {
    return this.inFlight.size;
  }

  /** Pending messages from `from` to `to`. */
  pendingBetween(from: NodeId, to: NodeId): number {
    let n = 0;
    for (const f of this.inFlight) if (f.m.from === from && f.m.to === to) n++;
    return n;
  }

  /**
   * Delivers every message pending now, in the order sent (messages sent by handlers during
   * the flush wait for the next one). Returns how many were delivered. Works in timer mode too,
   * delivering ahead of the timers.
   */
  flush(): number {
    const batch = [...this.inFlight];
    let delivered = 0;
    for (const f of batch) if (this.deliver(f)) delivered++;
    return delivered;
  }

  // ---- used by MemoryTransport -------------------------------------------------------------

  register(t: MemoryTransport): void {
    const existing = this.members.get(t.nodeId);
    if (existing !== undefined && existing !== t && existing.isRunning) {
      throw new Error(`node ${t.nodeId} is already registered on this MemoryNetwork`);
    }
    this.members.set(t.nodeId, t);
  }

  unregister(t: MemoryTransport): void {
    if (this.members.get(t.nodeId) === t) this.members.delete(t.nodeId);
  }

  peerVersions(id: NodeId): PeerVersions | null {
    const t = this.members.get(id);
    return t?.isRunning ? t.versions : null;
  }

  /** Decides the fate of one message: 'unreachable', 'lost' or 'sent'. */
  route(from: MemoryTransport, m: Message): 'unreachable' | 'lost' | 'sent' {
    if (!this.canReach(from.nodeId, m.to)) return 'unreachable';
    if (this.random() < this.faults.dropRate) return 'lost';
    const copies = this.random() < this.faults.duplicateRate ? 2 : 1;
    for (let i = 0; i < copies; i++) this.schedule({ m: this.clone ? structuredClone(m) : m, from, timer: null });
    return 'sent';
  }

  private schedule(f: InFlight): void {
    this.inFlight.add(f);
    if (this.manual) return;
    f.timer = setTimeout(() => this.deliver(f), this.drawDelay());
  }

  private drawDelay(): number {
    const d = this.faults.delayMs;
    return typeof d === 'number' ? d : d.min + this.random() * (d.max - d.min);
  }

  private deliver(f: InFlight): boolean {
    if (!this.inFlight.delete(f)) return false; // already delivered (flush raced a timer)
    if (f.timer !== null) clearTimeout(f.timer);
    const dest = this.members.get(f.m.to);
    const ok = dest !== undefined && dest.isRunning;
    // A snapshot the receiver refused has failed, for its sender, as on the real transport.
    const taken = ok && dest.receive(f.m, f.from.nodeId) === undefined;
    if (f.m.type === 'snap') f.from.snapshotDone(f.m.to, taken);
    return ok;
  }
}

/** What a peer announces in its handshake. */
export interface PeerVersions {
  softwareVersion?: string;
  protocolVersion?: number;
  featureLevelMax?: number;
}

export interface MemoryTransportOptions extends PeerVersions {
  nodeId: NodeId;
}

interface Counters {
  sent: number;
  received: number;
  dropped: number;
}

export class MemoryTransport implements Transport {
  readonly nodeId: NodeId;
  readonly versions: PeerVersions;
  private state: 'new' | 'running' | 'closed' = 'new';
  private peers = new Map<NodeId, PeerInfo>();
  private readonly counters = new Map<NodeId, Counters>();
  private messageHandler: MessageHandler | null = null;
  private readonly drops = new InboundDropCounter();
  private unreachableHandler: ((id: NodeId, why: UnreachableReason) => void) | null = null;
  private snapshotHandler: ((id: NodeId, ok: boolean) => void) | null = null;

  constructor(
    private readonly network: MemoryNetwork,
    opts: MemoryTransportOptions,
  ) {
    this.nodeId = opts.nodeId;
    this.versions = {
      softwareVersion: opts.softwareVersion ?? 'memory', protocolVersion: opts.protocolVersion ?? 1,
      ...(opts.featureLevelMax !== undefined ? { featureLevelMax: opts.featureLevelMax } : {}),
    };
  }

  get isRunning(): boolean {
    return this.state === 'running';
  }

  get address(): string {
    return `memory:${this.nodeId}`;
  }

  async start(): Promise<void> {
    if (this.state === 'closed') throw new Error('MemoryTransport is closed');
    this.network.register(this);
    this.state = 'running';
  }

  setPeers(peers: PeerInfo[]): void {
    this.peers = new Map(peers.filter((p) => p.id !== this.nodeId).map((p) => [p.id, p]));
    for (const id of this.counters.keys()) if (!this.peers.has(id)) this.counters.delete(id);
  }

  send(m: Message): void {
    if (this.state === 'closed') return;
    const fate = this.state === 'running' && this.peers.has(m.to) ? this.network.route(this, m) : 'unreachable';
    const c = this.countersOf(m.to);
    if (fate === 'sent') {
      c.sent++;
      return;
    }
    c.dropped++;
    if (fate === 'unreachable') {
      // A peer cut off by the simulated network counts as a lost connection; one not known, as a drop.
      const why: UnreachableReason = this.peers.has(m.to) ? 'disconnected' : 'dropped';
      this.later(() => this.unreachableHandler?.(m.to, why));
    }
    if (m.type === 'snap') this.later(() => this.snapshotHandler?.(m.to, false));
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

  stats(): PeerStats[] {
    return [...this.peers.keys()].map((id) => {
      const versions = this.network.peerVersions(id);
      return {
        id,
        connected: this.state === 'running' && this.network.canReach(this.nodeId, id),
        rttMs: null,
        queued: this.network.pendingBetween(this.nodeId, id),
        ...this.countersOf(id),
        ...(versions ?? {}),
      };
    });
  }

  inboundDrops(): InboundDropCounts {
    return this.drops.snapshot();
  }

  /**
   * Fault injection: `value` arrives as a decoded 'msg' frame's message on `peer`'s connection
   * would, unchecked, and goes through the shape, addressing and meaning checks of the real
   * transport before the handler sees it. Synchronous. Returns why it was dropped or refused,
   * or undefined when the handler took it.
   */
  injectValue(peer: NodeId, value: unknown): InboundDropReason | undefined {
    if (this.state !== 'running') return undefined;
    const checked = validateMessage(value);
    if (!checked.ok) {
      this.drops.count('malformed');
      return 'malformed';
    }
    return this.receive(checked.message, peer)?.reason;
  }

  /**
   * Fault injection: the bytes of one WebSocket message from `peer`, one frame or several back
   * to back (protocol 2). All or nothing, as on the real transport: one malformed frame drops
   * the whole message. This transport streams no snapshots, so any frame but 'msg' counts as
   * unexpected. Returns the fate of each frame (one 'malformed' for a message that does not decode).
   */
  injectBytes(peer: NodeId, bytes: Uint8Array): (InboundDropReason | undefined)[] {
    if (this.state !== 'running') return [];
    const decoded = decodeFrames(bytes);
    if (!decoded.ok) {
      this.drops.count('malformed');
      return ['malformed'];
    }
    return decoded.frames.map((frame) => {
      if (frame.t === 'msg') return this.receive(frame.m, peer)?.reason;
      this.drops.count('unexpected_frame');
      return 'unexpected_frame';
    });
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.network.unregister(this);
  }

  // ---- used by MemoryNetwork ---------------------------------------------------------------

  /**
   * A message from `peer`: checked, counted, handed to the handler. Returns why it was dropped
   * or refused, if it was. Unlike the real transport, an exception from the message handler is
   * not caught: it surfaces in the test (from flush(), or as an uncaught error from a timer).
   */
  receive(m: Message, peer: NodeId): MessageRefusal | undefined {
    if (this.state !== 'running') return undefined;
    const dropped = admitMessage(m, peer, this.nodeId);
    if (dropped !== undefined) {
      this.drops.count(dropped.reason);
      return dropped;
    }
    this.countersOf(peer).received++;
    const refusal = this.messageHandler?.(m) ?? undefined;
    if (refusal !== undefined) this.drops.count(refusal.reason);
    return refusal;
  }

  snapshotDone(to: NodeId, ok: boolean): void {
    this.later(() => this.snapshotHandler?.(to, ok));
  }

  private later(call: () => void): void {
    queueMicrotask(() => {
      if (this.state !== 'closed') call();
    });
  }

  private countersOf(id: NodeId): Counters {
    let c = this.counters.get(id);
    if (c === undefined) this.counters.set(id, (c = { sent: 0, received: 0, dropped: 0 }));
    return c;
  }
}

function linkKey(from: NodeId, to: NodeId): string {
  return `${from}\u0000${to}`;
}

function checkFaults(f: MemoryFaults): MemoryFaults {
  const isRate = (r: number): boolean => r >= 0 && r <= 1;
  if (!isRate(f.dropRate) || !isRate(f.duplicateRate)) throw new RangeError('dropRate and duplicateRate must lie in [0, 1]');
  const d = f.delayMs;
  const ok = typeof d === 'number' ? d >= 0 : d.min >= 0 && d.max >= d.min;
  if (!ok) throw new RangeError('delayMs must be >= 0 (and min <= max)');
  return f;
}
