// A simulated network behind the driver's Transport port, within the rules the real transport
// (transport/ws-transport.ts: one TCP connection per direction and pair) keeps: messages on one
// link arrive in the order sent, after a delay the seed draws, except a snapshot, which later
// messages may overtake while it streams; links reorder against each other;
// nothing is duplicated; a message is lost only with its connection (a reset, a partition, a
// crash), and then its sender hears the peer is unreachable ('disconnected') and a snapshot on
// it fails. Every message is a deep copy, checked on arrival as the real transport checks it
// (transport/check-message.ts). Deliveries are timers on the virtual clock.

import type { Message, NodeId } from '../../src/raft/types.ts';
import type { SeededPrng } from '../../src/raft/prng.ts';
import { admitMessage } from '../../transport/check-message.ts';
import { InboundDropCounter, type InboundDropCounts } from '../../transport/inbound-drops.ts';
import type { MessageHandler, PeerInfo, PeerStats, Transport, UnreachableReason } from '../../transport/types.ts';

/** Delivery delay per message, in virtual ms (the nemesis changes it). */
export interface NetSpeed {
  /** Uniform in [minMs, maxMs] for most messages. */
  minMs: number;
  maxMs: number;
  /** Probability of a spike of spikeMs instead (a retransmission, a full buffer). */
  spikeRate: number;
  spikeMs: number;
}

export const normalNet: NetSpeed = { minMs: 0.2, maxMs: 3, spikeRate: 0.01, spikeMs: 30 };

interface Link {
  /** Bumped when the connection breaks: messages sent under an older epoch are lost. */
  epoch: number;
  /** When the last message on it arrives: later ones never arrive before it (FIFO). */
  lastAt: number;
}

export class SimNetwork {
  private readonly members = new Map<NodeId, SimTransport>();
  private readonly links = new Map<string, Link>();
  /** Cut pairs (both directions), as "a\0b" with a < b. */
  private readonly cut = new Set<string>();
  speed: NetSpeed = normalNet;
  delivered = 0;
  lost = 0;
  /**
   * Messages a receiving transport refused on its own rules (addressing, meaning). Every node
   * here is honest, so each one is a bug of the sender: a relayed request that kept its first
   * sender's name was dropped this way, silently, and its client waited for a timeout.
   */
  readonly refused: string[] = [];

  constructor(private readonly prng: SeededPrng, readonly featureLevelMax: number) {}

  transport(id: NodeId): SimTransport {
    return new SimTransport(this, id);
  }

  register(t: SimTransport): void {
    this.members.set(t.nodeId, t);
  }

  /** The transport closed (a stop or a crash): every connection to and from it breaks. */
  unregister(t: SimTransport): void {
    if (this.members.get(t.nodeId) !== t) return;
    this.members.delete(t.nodeId);
    for (const other of this.members.keys()) {
      this.reset(t.nodeId, other);
      this.reset(other, t.nodeId);
    }
  }

  /** Cuts every pair with one end in `a` and the other in `b`. */
  partition(a: readonly NodeId[], b: readonly NodeId[]): void {
    for (const x of a) for (const y of b) {
      if (x === y) continue;
      this.cut.add(pairKey(x, y));
      this.reset(x, y);
      this.reset(y, x);
    }
  }

  heal(): void {
    this.cut.clear();
  }

  isCut(a: NodeId, b: NodeId): boolean {
    return this.cut.has(pairKey(a, b));
  }

  /** Whether a connection from `from` to `to` is up now. */
  connected(from: NodeId, to: NodeId): boolean {
    return this.members.has(to) && this.members.has(from) && !this.isCut(from, to);
  }

  /** Breaks the connection from `from` to `to`: what is on it is lost, and the sender hears so. */
  reset(from: NodeId, to: NodeId): void {
    const link = this.link(from, to);
    link.epoch++;
    link.lastAt = 0;
    this.members.get(from)?.unreachable(to, 'disconnected');
  }

  versionsOf(id: NodeId): { softwareVersion: string; protocolVersion: number; featureLevelMax: number } | undefined {
    return this.members.has(id) ? { softwareVersion: 'sim', protocolVersion: 2, featureLevelMax: this.featureLevelMax } : undefined;
  }

  send(from: SimTransport, m: Message): void {
    if (!this.connected(from.nodeId, m.to)) {
      this.lost++;
      from.unreachable(m.to, 'disconnected');
      if (m.type === 'snap') from.snapshotDone(m.to, false);
      return;
    }
    const link = this.link(from.nodeId, m.to);
    const epoch = link.epoch;
    const now = performance.now();
    const at = Math.max(now + this.drawMs(), link.lastAt);
    // A snapshot streams in chunks behind the messages sent after it (transport/peer-link.ts
    // sends messages before snapshot chunks): it arrives after the messages sent before it, and
    // later ones may overtake it.
    if (m.type === 'snap') {
      const copy = structuredClone(m);
      setTimeout(() => this.deliver(from, copy, epoch), at - now + 1 + this.prng.nextInt(40));
      return;
    }
    link.lastAt = at;
    const copy = structuredClone(m);
    setTimeout(() => this.deliver(from, copy, epoch), at - now);
  }

  private deliver(from: SimTransport, m: Message, epoch: number): void {
    const dest = this.members.get(m.to);
    if (this.link(from.nodeId, m.to).epoch !== epoch || dest === undefined) {
      this.lost++;
      if (m.type === 'snap') from.snapshotDone(m.to, false);
      return;
    }
    this.delivered++;
    const refusal = dest.receive(m, from.nodeId);
    if (m.type === 'snap') from.snapshotDone(m.to, refusal === undefined);
  }

  private drawMs(): number {
    const s = this.speed;
    return this.prng.chance(s.spikeRate) ? s.spikeMs : s.minMs + this.prng.nextFloat() * (s.maxMs - s.minMs);
  }

  private link(from: NodeId, to: NodeId): Link {
    const k = `${from}\u0000${to}`;
    let l = this.links.get(k);
    if (l === undefined) this.links.set(k, (l = { epoch: 0, lastAt: 0 }));
    return l;
  }
}

export class SimTransport implements Transport {
  private running = false;
  private peers: PeerInfo[] = [];
  private onMsg: MessageHandler | undefined;
  private onUnreach: ((id: NodeId, why: UnreachableReason) => void) | undefined;
  private onSnap: ((id: NodeId, ok: boolean) => void) | undefined;
  private readonly drops = new InboundDropCounter();

  constructor(private readonly net: SimNetwork, readonly nodeId: NodeId) {}

  get address(): string {
    return `sim:${this.nodeId}`;
  }

  async start(): Promise<void> {
    this.running = true;
    this.net.register(this);
  }

  setPeers(peers: PeerInfo[]): void {
    this.peers = peers.filter((p) => p.id !== this.nodeId);
  }

  send(m: Message): void {
    if (!this.running) return;
    if (!this.peers.some((p) => p.id === m.to)) {
      this.unreachable(m.to, 'dropped');
      return;
    }
    this.net.send(this, m);
  }

  onMessage(h: MessageHandler): void { this.onMsg = h; }
  onUnreachable(h: (id: NodeId, why: UnreachableReason) => void): void { this.onUnreach = h; }
  onSnapshotStatus(h: (id: NodeId, ok: boolean) => void): void { this.onSnap = h; }

  stats(): PeerStats[] {
    return this.peers.map((p) => {
      const v = this.net.connected(this.nodeId, p.id) ? this.net.versionsOf(p.id) : undefined;
      return { id: p.id, connected: v !== undefined, rttMs: null, queued: 0, dropped: 0, sent: 0, received: 0, ...(v ?? {}) };
    });
  }

  inboundDrops(): InboundDropCounts {
    return this.drops.snapshot();
  }

  async close(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.net.unregister(this);
  }

  /** A message arrives (from the network's timer, never inside send). */
  receive(m: Message, from: NodeId): ReturnType<MessageHandler> {
    if (!this.running) return undefined;
    const admitted = admitMessage(m, from, this.nodeId);
    if (admitted !== undefined) this.net.refused.push(`${this.nodeId} refused a message from ${from}: ${admitted.reason}: ${admitted.detail}`);
    const refusal = admitted ?? this.onMsg?.(m) ?? undefined;
    if (refusal !== undefined) this.drops.count(refusal.reason);
    return refusal;
  }

  /** Handlers run in a later job, never inside send or close (the Transport contract). */
  unreachable(to: NodeId, why: UnreachableReason): void {
    queueMicrotask(() => { if (this.running) this.onUnreach?.(to, why); });
  }

  snapshotDone(to: NodeId, ok: boolean): void {
    queueMicrotask(() => { if (this.running) this.onSnap?.(to, ok); });
  }
}

function pairKey(a: NodeId, b: NodeId): string {
  return a < b ? `${a}\u0000${b}` : `${b}\u0000${a}`;
}
