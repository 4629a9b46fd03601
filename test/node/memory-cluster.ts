// RaftNodes in one process on the in-memory transport and storage, for driver tests.

import { MemoryNetwork, type MemoryTransport } from '../../transport/memory-transport.ts';
import { KvStateMachine } from './kv-state-machine.ts';
import { MemoryNodeStorage } from '../../src/node/node-storage.ts';
import { RaftNode, type RaftNodeOptions } from '../../src/node/raft-node.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import type { StateMachine } from '../../src/base/state-machine.ts';
import { bootstrapSnapshotData } from '../../src/server/server.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import type { MemberRecord } from '../../src/resources/membership.ts';

export interface TestNode {
  id: string;
  node: RaftNode;
  /** The state machine, as a KvStateMachine (the default; see MemoryClusterOptions.stateMachine). */
  kv: KvStateMachine;
  sm: StateMachine;
  storage: MemoryNodeStorage;
}

export interface MemoryClusterOptions {
  size?: number;
  snapshotEntries?: number;
  /** Default 0: a snapshot every snapshotEntries entries, whatever the time. */
  snapshotIntervalMs?: number;
  snapshotEntriesMax?: number;
  random?: () => number;
  logKeepEntries?: number;
  /** Called with each node's storage and transport before its RaftNode is made, to wrap methods. */
  instrument?: (id: string, storage: MemoryNodeStorage, transport: MemoryTransport) => void;
  /** Makes each node's state machine (default: a plain KvStateMachine). */
  stateMachine?: () => StateMachine;
  /** The feature level each node's transport announces (default: this build's). */
  featureLevelMax?: (id: string) => number | undefined;
  /** More driver options for every node. */
  nodeOptions?: Partial<RaftNodeOptions>;
}

export class MemoryCluster {
  readonly network = new MemoryNetwork();
  readonly members: MemberRecord[];
  nodes: TestNode[] = [];
  /** Each node's transport (the latest, after a restart), for fault injection. */
  readonly transports = new Map<string, MemoryTransport>();
  /** Errors the nodes logged (a fatal error stops a node): tests assert there are none. */
  readonly errors: string[] = [];
  readonly warnings: string[] = [];
  readonly infos: string[] = [];

  constructor(private readonly opts: MemoryClusterOptions = {}) {
    const size = opts.size ?? 3;
    this.members = Array.from({ length: size }, (_, i) => ({ id: `node${i + 1}`, name: `n${i + 1}`, peerAddress: `memory:node${i + 1}`, apiAddress: `memory:${i + 1}` }));
  }

  async start(): Promise<void> {
    for (const m of this.members) {
      const log = new MemoryStorage();
      const kv = this.opts.stateMachine?.() ?? new KvStateMachine();
      bootstrapStorage(log, this.members.map((x) => x.id), [], bootstrapSnapshotData(this.members, kv.snapshot()));
      await this.startNode(m.id, new MemoryNodeStorage(log), kv);
    }
  }

  /** Starts (or restarts) a node on the given storage, as after a crash that kept its disk. */
  async startNode(id: string, storage: MemoryNodeStorage, kv: StateMachine = new KvStateMachine(), seedPeers: MemberRecord[] = []): Promise<TestNode> {
    const level = this.opts.featureLevelMax === undefined ? featureLevelMax : this.opts.featureLevelMax(id);
    const transport = this.network.transport(id, level === undefined ? {} : { featureLevelMax: level });
    await transport.start();
    this.transports.set(id, transport);
    this.opts.instrument?.(id, storage, transport);
    const node = new RaftNode({
      id, storage: storageWithoutClose(storage), transport, stateMachine: kv, tickMs: 5, electionTimeoutTicks: 10,
      heartbeatIntervalTicks: 1, proposalTimeoutMs: 3000, seedPeers,
      snapshotEntries: this.opts.snapshotEntries ?? 10_000, logKeepEntries: this.opts.logKeepEntries ?? 5_000,
      snapshotIntervalMs: this.opts.snapshotIntervalMs ?? 0,
      ...(this.opts.snapshotEntriesMax !== undefined ? { snapshotEntriesMax: this.opts.snapshotEntriesMax } : {}),
      ...(this.opts.random !== undefined ? { random: this.opts.random } : {}),
      logger: { debug() {}, info: (m) => this.infos.push(`${id}: ${m}`), warn: (m) => this.warnings.push(`${id}: ${m}`), error: (m) => this.errors.push(`${id}: ${m}`) },
      featureLevelMax: level ?? 1,
      ...this.opts.nodeOptions,
    });
    await node.start();
    const t = { id, node, kv: kv as KvStateMachine, sm: kv, storage };
    this.nodes = this.nodes.filter((n) => n.id !== id).concat(t);
    return t;
  }

  get(id: string): TestNode {
    const n = this.nodes.find((x) => x.id === id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  /**
   * A leader every node of `among` agrees on, once it has also raised the cluster feature level
   * as far as every member allows (so tests start from a quiet log, with no raise in flight).
   */
  async waitForLeader(timeoutMs = 5000, among = this.nodes): Promise<TestNode> {
    const deadline = Date.now() + timeoutMs;
    const levels = this.members.map((m) => (this.opts.featureLevelMax === undefined ? featureLevelMax : this.opts.featureLevelMax(m.id) ?? 1));
    const target = Math.min(...levels);
    while (Date.now() < deadline) {
      const leaders = among.filter((n) => n.node.isLeader);
      const leader = leaders[0];
      if (leaders.length === 1 && leader && among.every((n) => n.node.leaderId === leader.id)
        && (leader.node.featureLevel >= target || !this.raiseExpected())) return leader;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('no agreed leader');
  }

  /** Whether the leader will raise the level: every current member is one of the founders this cluster knows the levels of. */
  private raiseExpected(): boolean {
    return this.nodes.every((n) => this.members.some((m) => m.id === n.id));
  }

  /** A node other than `leader`. */
  follower(leader: TestNode): TestNode {
    const f = this.nodes.find((n) => n !== leader);
    if (!f) throw new Error('no follower');
    return f;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.node.stop()));
  }
}

/** The storage object without a real close, so a "crashed" node's storage can be reused. */
function storageWithoutClose(s: MemoryNodeStorage): MemoryNodeStorage {
  return Object.assign(Object.create(Object.getPrototypeOf(s) as object) as MemoryNodeStorage, s, { close: async () => {} });
}
