// The simulated cluster: real RaftNode drivers on simulated disks (sim-disk.ts) and a simulated
// network (sim-network.ts), under virtual time (virtual-time.ts). It starts, crashes and restarts
// nodes, and writes everything observable to the trace.

import { RaftNode } from '../../src/node/raft-node.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import type { MemberRecord } from '../../src/resources/membership.ts';
import { bootstrapSnapshotData } from '../../src/server/server.ts';
import { SeededPrng } from '../../src/raft/prng.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import { KvStateMachine } from '../node/kv-state-machine.ts';
import { RecordingKv } from './recording-kv.ts';
import { SafetyCheckers } from './safety.ts';
import type { Scenario } from './scenario.ts';
import { SimDisk } from './sim-disk.ts';
import { SimNetwork, type SimTransport } from './sim-network.ts';
import { withEntropy } from './virtual-time.ts';

export interface Member {
  id: string;
  /** Undefined while crashed. */
  node: RaftNode | undefined;
  kv: RecordingKv;
  disk: SimDisk;
  transport: SimTransport;
  lives: number;
}

export class World {
  readonly trace: string[] = [];
  readonly net: SimNetwork;
  readonly safety: SafetyCheckers;
  readonly members = new Map<string, Member>();
  readonly ids: string[];
  private readonly records: MemberRecord[];
  private readonly base = new MemoryStorage();
  /** Nodes the simulator crashed: their failure is expected. */
  private readonly crashing = new Set<RaftNode>();
  readonly streams: { net: SeededPrng; disk: SeededPrng; nodes: SeededPrng; nemesis: SeededPrng; clients: SeededPrng };
  crashes = 0;
  /** Appends a leader sent before its own write of them completed; entries applied while a save was pending. */
  sendsBeforeWrite = 0;
  appliesDuringWrite = 0;

  /** Disks that lose synced writes in a crash: a bug the checkers must catch (their own test). */
  lyingDisks = false;

  constructor(readonly scenario: Scenario, private readonly onTrace?: (line: string) => void) {
    const root = new SeededPrng(scenario.seed ^ 0x5eed_d21e);
    this.streams = { net: root.fork(), disk: root.fork(), nodes: root.fork(), nemesis: root.fork(), clients: root.fork() };
    this.net = new SimNetwork(this.streams.net, featureLevelMax);
    this.safety = new SafetyCheckers((l) => this.log(l));
    this.ids = Array.from({ length: scenario.size }, (_, i) => `n${i + 1}`);
    this.records = this.ids.map((id) => ({ id, name: id, peerAddress: `sim:${id}`, apiAddress: `sim-api:${id}` }));
    bootstrapStorage(this.base, this.ids, [], bootstrapSnapshotData(this.records, new KvStateMachine().snapshot()));
  }

  log(line: string): void {
    const l = `${performance.now().toFixed(2)} ${line}`;
    this.trace.push(l);
    this.onTrace?.(l);
  }

  async start(): Promise<void> {
    for (const id of this.ids) {
      const disk = new SimDisk(id, this.base, [], this.streams.disk.fork());
      await this.boot(id, disk, 1);
    }
  }

  /** Up members, in id order. */
  up(): (Member & { node: RaftNode })[] {
    return [...this.members.values()].filter((m): m is Member & { node: RaftNode } => m.node !== undefined);
  }

  private async boot(id: string, disk: SimDisk, lives: number): Promise<void> {
    const s = this.scenario;
    const kv = new RecordingKv(id, {
      applied: (node, e) => {
        if (disk.savesPending > 0) this.appliesDuringWrite++;
        this.safety.applied(node, e);
      },
      restored: (node) => this.safety.restored(node),
    });
    const transport = this.net.transport(id);
    const send = transport.send.bind(transport);
    transport.send = (m) => {
      const last = m.entries[m.entries.length - 1];
      if (m.type === 'app' && last !== undefined && last.index > disk.log.lastIndex()) this.sendsBeforeWrite++;
      send(m);
    };
    await transport.start();
    let started: Promise<void> = Promise.resolve();
    const node = withEntropy(this.streams.nodes, () => {
      const n = new RaftNode({
        id, storage: disk, transport, stateMachine: kv, tickMs: s.tickMs, electionTimeoutTicks: s.electionTimeoutTicks,
        heartbeatIntervalTicks: 1, proposalTimeoutMs: s.proposalTimeoutMs, snapshotEntries: s.snapshotEntries,
        snapshotIntervalMs: s.snapshotIntervalMs, logKeepEntries: s.logKeepEntries, diskStallMs: s.diskStallMs,
        random: () => this.streams.nodes.nextFloat(),
        logger: { debug() {}, info: (m) => this.log(`${id} info ${m}`), warn: (m) => this.log(`${id} warn ${m}`), error: (m) => this.log(`${id} error ${m.split('\n')[0] ?? ''}`) },
      });
      started = n.start();
      return n;
    });
    this.watch(id, node);
    this.members.set(id, { id, node, kv, disk, transport, lives });
    this.safety.restarted(id);
    await started;
    this.log(`${id} started (life ${lives}, log ${disk.log.firstIndex()}..${disk.log.lastIndex()}, snapshot ${disk.log.snapshot().meta.index})`);
  }

  private watch(id: string, node: RaftNode): void {
    node.on('leaderChange', ({ leader, term, role }) => {
      this.log(`${id} term ${term} leader ${leader || '-'} role ${role}`);
      if (role === 'leader') this.safety.leader(id, term);
    });
    node.on('failed', (f) => {
      if (this.crashing.has(node)) return;
      this.log(`${id} failed: ${f.code} ${f.message}`);
      this.safety.violations.push(`node ${id} stopped by itself: ${f.code}: ${f.message}`);
    });
    node.on('error', () => undefined); // logged as 'fatal:' through the logger
  }

  /** Kills a node: its disk keeps what a crash keeps, its connections break, the driver stops. */
  crash(id: string): void {
    const m = this.members.get(id);
    if (m?.node === undefined) return;
    const node = m.node;
    this.crashing.add(node);
    m.node = undefined;
    this.crashes++;
    const kept = m.disk.crash(this.lyingDisks);
    this.log(`${id} crashed (keeps ${kept.length} log records)`);
    void m.transport.close();
    // The driver's own fatal-error path stops the ticker and the loop and fails what is pending,
    // as the process's exit would: RaftNode has no public "die now" (test-only reach-in).
    (node as unknown as { die(err: unknown): void }).die(new Error(`simulated crash of ${id}`));
    m.disk = m.disk.reopen(kept, this.streams.disk.fork());
  }

  /** A graceful stop through the driver's own stop() (a leader hands leadership over first). */
  async stop(id: string): Promise<void> {
    const m = this.members.get(id);
    if (m?.node === undefined) return;
    const node = m.node;
    this.log(`${id} stopping gracefully`);
    await node.stop();
    if (m.node !== node) return; // crashed meanwhile
    m.node = undefined;
    const kept = m.disk.closeClean();
    this.log(`${id} stopped (keeps ${kept.length} log records)`);
    m.disk = m.disk.reopen(kept, this.streams.disk.fork());
  }

  async restart(id: string): Promise<void> {
    const m = this.members.get(id);
    if (m === undefined || m.node !== undefined) return;
    await this.boot(id, m.disk, m.lives + 1);
  }
}
