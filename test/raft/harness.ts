// An in-memory network of RawNodes for scenario tests, in the spirit of etcd's raft test
// `network`. Each node has its own MemoryStorage and a tiny state machine (the list of proposal
// payloads it applied); a driver step per node follows the Ready contract written on `Ready`.
//
// Time and delivery are explicit: nothing moves unless a script says `tick`, `deliver` or
// `stabilize`, so a test reads as a script of data:
//
//   const c = new Cluster({ voters: ['a', 'b', 'c'] });
//   c.elect('a');
//   c.propose('a', 'x');
//   c.stabilize();
//   expect(c.state('c')).toEqual(['x']);
//
// Filters (isolate, cut, drop) are checked when a message is delivered, so they also affect
// messages already queued. The driver checks two safety properties on every step: at most one
// leader per term, and state machines that never disagree (one entry per index everywhere).

import { RawNode } from '../../src/raft/raw-node.ts';
import { MemoryStorage, bootstrapStorage } from '../../src/raft/storage.ts';
import { SeededPrng } from '../../src/raft/prng.ts';
import { ProposalDroppedError } from '../../src/raft/types.ts';
import type {
  ConfChange, DropReason, ConfState, Config, Entry, HardState, Message, MessageType, NodeId, ReadState, Snapshot, Status,
} from '../../src/raft/types.ts';

export type NodeConfig = Partial<Omit<Config, 'id' | 'prng'>>;

export interface ClusterOptions {
  voters: NodeId[];
  learners?: NodeId[];
  /** Config shared by every node (ids and PRNGs are filled in). */
  config?: NodeConfig;
  /** Per-node config overrides. */
  configs?: Record<NodeId, NodeConfig>;
  /** Node i (in voters-then-learners order) gets `new SeededPrng(seed + i)`. Default 1. */
  seed?: number;
  /**
   * Pre-built logs: the terms of the entries from index 2 on (index 1 is the bootstrap snapshot,
   * term 1). Used for the logs of the paper's figures.
   */
  logs?: Record<NodeId, number[]>;
  /** Hard state of a node with a pre-built log. Default: term = its last term, no vote, commit 1. */
  hardStates?: Record<NodeId, Partial<HardState>>;
}

/** Which messages a filter or a delivery concerns; a predicate, or fields that must all match. */
export type MessageMatch =
  | ((m: Message) => boolean)
  | { from?: NodeId; to?: NodeId; type?: MessageType | MessageType[]; reject?: boolean };

export interface Peer {
  id: NodeId;
  node: RawNode;
  storage: MemoryStorage;
  config: Config;
  /** The state machine: payloads of the normal, non-empty entries applied, in order. */
  state: string[];
  /** Index of the last entry (or snapshot) applied to `state`. */
  appliedIndex: number;
  /** Every entry applied individually, in order, since the node was (re)started. */
  applied: Entry[];
  snapshotsApplied: Snapshot[];
  readStates: ReadState[];
  /** Every configuration the node has been in since it was (re)started, in order. */
  confStates: ConfState[];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
export const bytes = (s: string): Uint8Array => encoder.encode(s);
export const text = (b: Uint8Array): string => decoder.decode(b);

export function matches(match: MessageMatch | undefined, m: Message): boolean {
  if (match === undefined) return true;
  if (typeof match === 'function') return match(m);
  if (match.from !== undefined && m.from !== match.from) return false;
  if (match.to !== undefined && m.to !== match.to) return false;
  if (match.reject !== undefined && m.reject !== match.reject) return false;
  if (match.type !== undefined) {
    const types = Array.isArray(match.type) ? match.type : [match.type];
    if (!types.includes(m.type)) return false;
  }
  return true;
}

/** A message with every field filled in, for injecting hand-made messages. */
export function message(m: Partial<Message> & Pick<Message, 'type' | 'from' | 'to'>): Message {
  return { term: 0, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, ...m };
}

/** Snapshot data of a state machine holding `state`. */
export function encodeState(state: string[]): Uint8Array {
  return bytes(JSON.stringify(state));
}

function decodeState(data: Uint8Array): string[] {
  if (data.length === 0) return [];
  const parsed: unknown = JSON.parse(text(data));
  if (!Array.isArray(parsed) || !parsed.every((x) => typeof x === 'string')) throw new Error('bad snapshot data');
  return parsed;
}

export class Cluster {
  readonly peers = new Map<NodeId, Peer>();
  /** Messages sent and not yet delivered or dropped, oldest first. */
  queue: Message[] = [];
  /** Every message any node has sent, in order. Tests assert on it; `clearTrace()` resets it. */
  sent: Message[] = [];
  private filters: MessageMatch[] = [];
  private readonly leaders = new Map<number, NodeId>();
  private readonly baseConfig: NodeConfig;
  private readonly configs: Record<NodeId, NodeConfig>;
  private nextSeed: number;

  constructor(opts: ClusterOptions) {
    this.baseConfig = opts.config ?? {};
    this.configs = opts.configs ?? {};
    this.nextSeed = opts.seed ?? 1;
    const learners = opts.learners ?? [];
    for (const id of [...opts.voters, ...learners]) {
      const storage = new MemoryStorage();
      bootstrapStorage(storage, opts.voters, learners);
      const terms = opts.logs?.[id];
      if (terms !== undefined) loadLog(storage, terms, opts.hardStates?.[id] ?? {});
      this.start(id, storage);
    }
  }

  // ---- nodes ------------------------------------------------------------------------------

  /** Adds a node that joins later: it starts with an empty storage and waits for a snapshot. */
  addNode(id: NodeId, config: NodeConfig = {}): Peer {
    if (this.peers.has(id)) throw new Error(`node ${id} exists`);
    this.configs[id] = config;
    return this.start(id, new MemoryStorage());
  }

  /**
   * Crashes a node and starts it again from its storage. By default the state machine is rebuilt
   * from the storage's snapshot and the core hands the committed log after it out again; with
   * `durableState` the state machine survived the crash (it checkpoints itself), and the core is
   * told it has applied up to where it was.
   */
  restart(id: NodeId, opts: { durableState?: boolean } = {}): Peer {
    const old = this.peer(id);
    this.queue = this.queue.filter((m) => m.to !== id);
    const resume = opts.durableState === true ? { index: old.appliedIndex, state: old.state } : undefined;
    return this.start(id, old.storage, old, resume);
  }

  private start(id: NodeId, storage: MemoryStorage, previous?: Peer, resume?: { index: number; state: string[] }): Peer {
    const snap = storage.snapshot();
    const applied = resume?.index ?? snap.meta.index;
    const config: Config = {
      ...this.baseConfig,
      ...this.configs[id],
      id,
      prng: previous?.config.prng ?? new SeededPrng(this.nextSeed++),
      applied,
    };
    const peer: Peer = {
      id,
      node: new RawNode(config, storage),
      storage,
      config,
      state: resume !== undefined ? [...resume.state] : decodeState(snap.data),
      appliedIndex: applied,
      applied: [],
      snapshotsApplied: [],
      readStates: [],
      confStates: [],
    };
    this.peers.set(id, peer);
    this.recordConfState(peer);
    this.flush(id);
    return peer;
  }

  peer(id: NodeId): Peer {
    const p = this.peers.get(id);
    if (p === undefined) throw new Error(`no node ${id}`);
    return p;
  }

  node(id: NodeId): RawNode {
    return this.peer(id).node;
  }

  status(id: NodeId): Status {
    return this.node(id).status();
  }

  /** Ids of the nodes that believe they are leader. */
  leaderIds(): NodeId[] {
    return [...this.peers.values()].filter((p) => p.node.status().role === 'leader').map((p) => p.id);
  }

  /** The payloads a node's state machine holds. */
  state(id: NodeId): string[] {
    return [...this.peer(id).state];
  }

  /** The persisted log of a node, from its first index on. */
  log(id: NodeId): Entry[] {
    const s = this.peer(id).storage;
    if (s.lastIndex() < s.firstIndex()) return [];
    return s.entries(s.firstIndex(), s.lastIndex() + 1, Number.MAX_SAFE_INTEGER);
  }

  /** The terms of a node's persisted log, from its first index on. */
  terms(id: NodeId): number[] {
    return this.log(id).map((e) => e.term);
  }

  /** Takes a snapshot of a node's state machine at its applied index and compacts its log there. */
  compact(id: NodeId): Snapshot {
    const p = this.peer(id);
    const snap = p.storage.createSnapshot(p.appliedIndex, p.node.confState(), encodeState(p.state));
    p.storage.compact(p.appliedIndex);
    return snap;
  }

  // ---- the driver ---------------------------------------------------------------------------

  /** Runs the Ready loop of one node (or of every node) until it has nothing more to hand out. */
  flush(id?: NodeId): void {
    const ids = id === undefined ? [...this.peers.keys()] : [id];
    for (const x of ids) {
      const p = this.peer(x);
      for (let i = 0; p.node.hasReady(); i++) {
        if (i > 1000) throw new Error(`node ${x}: hasReady() never settles`);
        this.handleReady(p);
      }
    }
  }

  private handleReady(p: Peer): void {
    const rd = p.node.ready();
    // 1. Persist snapshot, entries, hard state.
    if (rd.snapshot !== undefined) p.storage.applySnapshot(rd.snapshot);
    p.storage.append(rd.entries);
    if (rd.hardState !== undefined) p.storage.setHardState(rd.hardState);
    // 2. Send.
    for (const m of rd.messages) {
      if (m.from !== p.id) throw new Error(`node ${p.id} sent a message from ${m.from}`);
      this.sent.push(m);
      this.queue.push(m);
    }
    // 3. Apply.
    if (rd.snapshot !== undefined) this.restore(p, rd.snapshot);
    for (const e of rd.committedEntries) this.apply(p, e);
    // 4. Reads.
    p.readStates.push(...rd.readStates);
    // 5. Advance.
    p.node.advance(rd);
    this.checkLeader(p);
    this.recordConfState(p);
  }

  private recordConfState(p: Peer): void {
    const cs = p.node.confState();
    const last = p.confStates.at(-1);
    if (last === undefined || JSON.stringify(members(last)) !== JSON.stringify(members(cs))) {
      p.confStates.push(structuredClone(cs));
    }
  }

  private restore(p: Peer, snap: Snapshot): void {
    if (snap.meta.index <= p.appliedIndex) {
      throw new Error(`node ${p.id}: snapshot ${snap.meta.index} is not newer than applied ${p.appliedIndex}`);
    }
    p.state = decodeState(snap.data);
    p.appliedIndex = snap.meta.index;
    p.snapshotsApplied.push(snap);
  }

  private apply(p: Peer, e: Entry): void {
    if (e.index !== p.appliedIndex + 1) {
      throw new Error(`node ${p.id}: applied index ${e.index} after ${p.appliedIndex} (out of order)`);
    }
    p.appliedIndex = e.index;
    p.applied.push(e);
    if (e.kind === 'normal' && e.data.length > 0) p.state.push(text(e.data));
    this.checkStateMachines(p);
  }

  /** State machine safety: any two state machines are prefixes of one another. */
  private checkStateMachines(p: Peer): void {
    for (const q of this.peers.values()) {
      const n = Math.min(p.state.length, q.state.length);
      for (let i = 0; i < n; i++) {
        if (p.state[i] !== q.state[i]) {
          throw new Error(`state machines diverge at item ${i}: ${p.id}=${p.state[i]} ${q.id}=${q.state[i]}`);
        }
      }
    }
  }

  /** Election safety: at most one leader per term. */
  private checkLeader(p: Peer): void {
    const st = p.node.status();
    if (st.role !== 'leader') return;
    const known = this.leaders.get(st.term);
    if (known !== undefined && known !== p.id) throw new Error(`two leaders in term ${st.term}: ${known} and ${p.id}`);
    this.leaders.set(st.term, p.id);
  }

  // ---- the network --------------------------------------------------------------------------

  /** Queues a hand-made message as if its sender had sent it. */
  inject(m: Partial<Message> & Pick<Message, 'type' | 'from' | 'to'>): void {
    this.queue.push(message(m));
  }

  /**
   * One hop: delivers the queued messages that match (all by default), in order, then runs every
   * node's Ready loop, which queues their answers. Returns the messages that arrived.
   */
  deliver(match?: MessageMatch): Message[] {
    const now = this.queue.filter((m) => matches(match, m));
    this.queue = this.queue.filter((m) => !matches(match, m));
    const arrived: Message[] = [];
    for (const m of now) {
      const to = this.peers.get(m.to);
      const from = this.peers.get(m.from);
      const dropped = to === undefined || this.filters.some((f) => matches(f, m));
      if (!dropped) {
        to.node.step(structuredClone(m));
        arrived.push(m);
      }
      // The driver tells the sender how a snapshot transfer went, as a transport would.
      if (m.type === 'snap' && from !== undefined) from.node.reportSnapshot(m.to, !dropped);
    }
    this.flush();
    return arrived;
  }

  /** Discards queued messages that match (all by default): they are lost in the network. */
  dropQueued(match?: MessageMatch): Message[] {
    const lost = this.queue.filter((m) => matches(match, m));
    this.queue = this.queue.filter((m) => !matches(match, m));
    return lost;
  }

  /** Delivers and processes until no node has a Ready and no message is queued. */
  stabilize(maxHops = 1000): void {
    this.flush();
    for (let hop = 0; this.queue.length > 0; hop++) {
      if (hop >= maxHops) throw new Error(`not stable after ${maxHops} hops; queued: ${describeMessages(this.queue.slice(0, 5))}`);
      this.deliver();
    }
  }

  /** Drops every message to or from `id` from now on (until `recover`). */
  isolate(id: NodeId): void {
    this.filters.push((m) => m.from === id || m.to === id);
  }

  /** Drops every message between `a` and `b`, both ways. */
  cut(a: NodeId, b: NodeId): void {
    this.filters.push((m) => (m.from === a && m.to === b) || (m.from === b && m.to === a));
  }

  /** Drops the matching messages from now on (until `recover`). */
  drop(match: MessageMatch): void {
    this.filters.push(match);
  }

  /** Heals the network: removes every filter. */
  recover(): void {
    this.filters = [];
  }

  // ---- time -------------------------------------------------------------------------------

  /** Ticks one node `n` times; its messages are queued, not delivered. */
  tick(id: NodeId, n = 1): void {
    for (let i = 0; i < n; i++) {
      this.node(id).tick();
      this.flush(id);
    }
  }

  /** `n` rounds of: every node (or every node in `only`) ticks once, then the network stabilizes. */
  tickAll(n = 1, only?: NodeId[]): void {
    for (let i = 0; i < n; i++) {
      for (const p of this.peers.values()) if (only === undefined || only.includes(p.id)) p.node.tick();
      this.stabilize();
    }
  }

  /** Runs `tickAll(1, only)` until `done()` holds; returns the rounds it took. Throws after `max`. */
  tickUntil(done: () => boolean, max: number, only?: NodeId[]): number {
    for (let i = 0; i <= max; i++) {
      if (done()) return i;
      this.tickAll(1, only);
    }
    throw new Error(`condition not reached within ${max} ticks`);
  }

  // ---- client verbs -----------------------------------------------------------------------

  /** Starts an election on `id` and runs its Ready; nothing is delivered yet. */
  campaign(id: NodeId): void {
    this.node(id).campaign();
    this.flush(id);
  }

  /** Campaigns, stabilizes, and checks that `id` won. */
  elect(id: NodeId): void {
    this.campaign(id);
    this.stabilize();
    const st = this.status(id);
    if (st.role !== 'leader') throw new Error(`elect(${id}): role is ${st.role} in term ${st.term}`);
  }

  /** Proposes a payload on `id` (throws what the core throws); nothing is delivered yet. */
  propose(id: NodeId, data: string): void {
    this.node(id).propose(bytes(data));
    this.flush(id);
  }

  proposeConfChange(id: NodeId, cc: ConfChange): void {
    this.node(id).proposeConfChange(cc);
    this.flush(id);
  }

  readIndex(id: NodeId, context: string): void {
    this.node(id).readIndex(context);
    this.flush(id);
  }

  transferLeadership(from: NodeId, to: NodeId): void {
    this.node(from).transferLeadership(to);
    this.flush(from);
  }

  // ---- the trace ----------------------------------------------------------------------------

  /** Sent messages that match. */
  messages(match?: MessageMatch): Message[] {
    return this.sent.filter((m) => matches(match, m));
  }

  clearTrace(): void {
    this.sent = [];
  }
}

/** Appends entries with the given terms from index 2 on, and sets the hard state. */
function loadLog(storage: MemoryStorage, terms: number[], hs: Partial<HardState>): void {
  const entries: Entry[] = terms.map((term, i) => ({
    kind: 'normal', term, index: i + 2, data: bytes(`${i + 2}@${term}`),
  }));
  storage.append(entries);
  storage.setHardState({
    term: hs.term ?? Math.max(1, ...terms),
    vote: hs.vote ?? '',
    commit: hs.commit ?? 1,
  });
}

export function describeMessages(ms: Message[]): string {
  return ms.map((m) => `${m.type} ${m.from}->${m.to} t${m.term} i${m.index} n${m.entries.length}${m.reject ? ' reject' : ''}`).join('; ');
}

export function isMember(cs: ConfState, id: NodeId): boolean {
  return [cs.voters, cs.votersOutgoing, cs.learners, cs.learnersNext].some((ids) => ids.includes(id));
}

/** The voters and learners of a ConfState, sorted, for comparisons. */
export function members(cs: ConfState): { voters: NodeId[]; votersOutgoing: NodeId[]; learners: NodeId[] } {
  return {
    voters: [...cs.voters].sort(),
    votersOutgoing: [...cs.votersOutgoing].sort(),
    learners: [...cs.learners].sort(),
  };
}

/** Runs `fn` and returns why the core refused it, or undefined if it was accepted. */
export function dropReason(fn: () => void): DropReason | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    if (err instanceof ProposalDroppedError) return err.reason;
    throw err;
  }
}
