// A shoal cluster of real `shoal serve` processes, one per network namespace of a NetLab, for
// fault tests. Nodes live in slots: slot i is namespace i with address 10.213.<k>.<i>. The first
// `voters` slots found the cluster; the others are spares that a membership change fills with a
// freshly initialized node (a new id in the same slot each time), which waits for a snapshot
// from the leader because its config has no bootstrap list.
//
// Every process's output goes to <runDir>/logs/n<slot>.log (appended across restarts, each start
// marked), and data to <runDir>/data/n<slot>-g<generation>/.

import type { ChildProcess } from 'node:child_process';
import { appendFileSync, closeSync, copyFileSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { exitCodes } from '../../src/cli/args.ts';
import { initNode } from '../../src/node/identity.ts';
import type { MemberRecord } from '../../src/resources/membership.ts';
import { call, sleep, useClientCertificate, type HttpResult } from './http.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { NetLab } from './netns.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const binPath = path.join(repoRoot, 'bin', 'shoal.js');
const apiPort = 7100;
const peerPort = 7200;

export interface RaftTimings {
  tickMs: number;
  heartbeatIntervalMs: number;
  electionTimeoutMs: number;
}

export interface FaultClusterOptions {
  runDir: string;
  /** Founding voters (slots 1..voters). */
  voters: number;
  /** Extra slots for membership changes. */
  spares: number;
  timings: RaftTimings;
  proposalTimeoutMs: number;
  snapshotEntries: number;
  snapshotIntervalMs: number;
  logKeepEntries: number;
}

/** A process exit that nobody asked for: a crash of the node itself. */
export interface UnexpectedExit {
  node: string;
  id: string;
  time: number;
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface FaultNode {
  /** 1-based; the namespace and the last byte of the address. */
  readonly slot: number;
  readonly name: string;
  readonly ip: string;
  readonly apiAddress: string;
  readonly peerAddress: string;
  readonly logPath: string;
  /** The current identity in this slot; a new one after each reset. */
  id: string;
  generation: number;
  dir: string;
  /** In the cluster's membership, as far as this harness made it so. */
  member: boolean;
  proc: ChildProcess | undefined;
  paused: boolean;
  /** Set while the harness itself stops the process, so its exit is expected. */
  stopping: boolean;
}

interface Health {
  role?: string;
  term?: number;
  leader?: string | null;
}

export class FaultCluster {
  readonly nodes: FaultNode[] = [];
  readonly unexpectedExits: UnexpectedExit[] = [];
  /** Nodes the harness is removing from the membership: learning of it, one exits with exitCodes.removed (5) by itself, as it should. */
  readonly removing = new Set<string>();
  private readonly caDir: string;

  private constructor(readonly lab: NetLab, private readonly opts: FaultClusterOptions) {
    this.caDir = path.join(opts.runDir, 'data', 'ca');
  }

  /** Builds the network, initializes the founders and writes their configs; starts nothing. */
  static async create(opts: FaultClusterOptions): Promise<FaultCluster> {
    if (opts.voters < 1) throw new RangeError('at least one voter');
    const lab = await NetLab.create(opts.voters + opts.spares);
    const cluster = new FaultCluster(lab, opts);
    try {
      await cluster.initFounders();
    } catch (err) {
      await lab.destroy();
      throw err;
    }
    return cluster;
  }

  members(): FaultNode[] {
    return this.nodes.filter((n) => n.member);
  }

  /** Members whose process runs and is not paused: the ones that can answer. */
  live(): FaultNode[] {
    return this.nodes.filter((n) => n.member && n.proc !== undefined && !n.paused);
  }

  byId(id: string): FaultNode | undefined {
    return this.nodes.find((n) => n.id === id);
  }

  async start(node: FaultNode): Promise<void> {
    if (node.proc) throw new Error(`${node.name} is already running`);
    appendFileSync(node.logPath, `\n===== harness: start ${node.name} id ${node.id} gen ${node.generation} at ${performance.now().toFixed(1)} ms (${new Date().toISOString()})\n`);
    const fd = openSync(node.logPath, 'a');
    let spawned: ReturnType<NetLab['spawnIn']>;
    try {
      spawned = this.lab.spawnIn(node.slot, [process.execPath, binPath, 'serve', '--config', path.join(node.dir, 'shoal.yaml')], {
        cwd: repoRoot, stdio: ['ignore', fd, fd],
      });
    } finally {
      closeSync(fd);
    }
    const proc = spawned.child;
    node.proc = proc;
    node.paused = false;
    node.stopping = false;
    proc.once('exit', (code, signal) => {
      if (node.proc === proc) node.proc = undefined;
      const at = performance.now();
      appendFileSync(node.logPath, `===== harness: ${node.name} exited (code ${code}, signal ${signal}) at ${at.toFixed(1)} ms\n`);
      if (!node.stopping && !(code === exitCodes.removed && this.removing.has(node.id))) this.unexpectedExits.push({ node: node.name, id: node.id, time: at, code, signal });
    });
    await spawned.started;
  }

  /** kill -9. Works on a paused process too. */
  async kill(node: FaultNode): Promise<void> {
    const proc = node.proc;
    if (!proc) return;
    node.stopping = true;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
    node.paused = false;
  }

  pause(node: FaultNode): void {
    if (!node.proc || node.paused) return;
    node.proc.kill('SIGSTOP');
    node.paused = true;
  }

  resume(node: FaultNode): void {
    if (!node.proc || !node.paused) return;
    node.proc.kill('SIGCONT');
    node.paused = false;
  }

  /** The node that the most recent term's leader claims to be, among live members; undefined if none. */
  async currentLeader(): Promise<FaultNode | undefined> {
    const answers = await Promise.all(this.live().map(async (n) => ({ n, h: await this.health(n) })));
    let best: { n: FaultNode; term: number } | undefined;
    for (const { n, h } of answers) {
      if (h?.role === 'leader' && (h.term ?? 0) > (best?.term ?? -1)) best = { n, term: h.term ?? 0 };
    }
    return best?.n;
  }

  /** Polls until every live member names the same leader, itself live; returns it. */
  async waitForLeader(timeoutMs: number): Promise<FaultNode> {
    const deadline = performance.now() + timeoutMs;
    let last = '';
    while (performance.now() < deadline) {
      const live = this.live();
      const answers = await Promise.all(live.map((n) => this.health(n)));
      const leaders = new Set(answers.map((h) => h?.leader ?? null));
      const [only] = [...leaders];
      const node = typeof only === 'string' ? this.byId(only) : undefined;
      if (leaders.size === 1 && node !== undefined && live.includes(node)) return node;
      last = live.map((n, i) => `${n.name}: ${answers[i]?.leader ?? 'none'}`).join(', ');
      await sleep(100);
    }
    throw new Error(`no agreed leader within ${timeoutMs} ms (${last})`);
  }

  /** Waits until the node answers /readyz?sync: it knows a leader and has applied what it had committed. */
  async waitReady(node: FaultNode, timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    let last = '';
    while (performance.now() < deadline) {
      const r = await call(node.apiAddress, '/readyz?sync', { timeoutMs: 3000 });
      if (r.kind === 'answer' && r.status === 200) return;
      last = r.kind === 'answer' ? `${r.status} ${JSON.stringify(r.body)}` : r.error;
      await sleep(200);
    }
    throw new Error(`${node.name} not ready (readyz?sync) within ${timeoutMs} ms: ${last}`);
  }

  /** Waits until the process answers /healthz at all (it has started serving). */
  async waitServing(node: FaultNode, timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (node.proc === undefined) throw new Error(`${node.name} exited while starting; see ${node.logPath}`);
      if (await this.health(node)) return;
      await sleep(100);
    }
    throw new Error(`${node.name} did not serve /healthz within ${timeoutMs} ms; see ${node.logPath}`);
  }

  /**
   * Empties a spare slot and initializes a new node in it (a new id, the cluster's CA), with a
   * config without bootstrap that joins through `joinApi` (a member's API, asked for the members'
   * addresses so the node can answer the leader): started, it waits to be added and to get a
   * snapshot.
   */
  async resetSpare(node: FaultNode, joinApi: string): Promise<void> {
    if (node.member) throw new Error(`${node.name} is a member; remove it first`);
    await this.kill(node);
    node.generation++;
    node.dir = path.join(this.opts.runDir, 'data', `${node.name}-g${node.generation}`);
    rmSync(node.dir, { recursive: true, force: true });
    const identity = await initNode({ dataDir: node.dir, name: `${node.name}-g${node.generation}`, caFrom: this.caDir, hosts: [node.ip] });
    node.id = identity.id;
    this.writeConfig(node, { join: { api: joinApi } });
  }

  /** The member record the API expects when adding the node. */
  record(node: FaultNode): MemberRecord {
    return { id: node.id, name: `${node.name}-g${node.generation}`, peerAddress: node.peerAddress, apiAddress: node.apiAddress };
  }

  /** Kills every process and deletes the network. Data and logs stay in runDir. */
  async destroy(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.kill(n)));
    await this.lab.destroy();
  }

  /** One admin request to some live member, trying each in turn. */
  async admin(method: 'GET' | 'POST' | 'DELETE', urlPath: string, body?: unknown): Promise<HttpResult> {
    let last: HttpResult = { kind: 'failure', error: 'no live member' };
    for (const n of this.live()) {
      last = await call(n.apiAddress, urlPath, { method, timeoutMs: 8000, ...(body !== undefined ? { body } : {}) });
      if (last.kind === 'answer' && last.status < 500) return last;
    }
    return last;
  }

  private async health(n: FaultNode): Promise<Health | undefined> {
    const r = await call(n.apiAddress, '/healthz', { timeoutMs: 1000 });
    return r.kind === 'answer' && r.status === 200 ? (r.body as Health) : undefined;
  }

  private async initFounders(): Promise<void> {
    const { runDir, voters, spares } = this.opts;
    mkdirSync(path.join(runDir, 'logs'), { recursive: true });
    for (let slot = 1; slot <= voters + spares; slot++) {
      const name = `n${slot}`;
      const ip = this.lab.ip(slot);
      const node: FaultNode = {
        slot, name, ip, apiAddress: `${ip}:${apiPort}`, peerAddress: `${ip}:${peerPort}`,
        logPath: path.join(runDir, 'logs', `${name}.log`), id: '', generation: 0,
        dir: path.join(runDir, 'data', `${name}-g0`), member: slot <= voters, proc: undefined, paused: false, stopping: false,
      };
      writeFileSync(node.logPath, '');
      if (node.member) {
        const first = this.nodes[0];
        const identity = await initNode({ dataDir: node.dir, name, hosts: [ip], ...(first ? { caFrom: this.caDir } : {}) });
        node.id = identity.id;
        if (!first) this.keepCa(node.dir);
      }
      this.nodes.push(node);
    }
    const founders = this.members().map((n) => this.record(n));
    for (const n of this.members()) this.writeConfig(n, { bootstrap: founders });
    // The clients and the nemesis talk to the nodes as an admin, with a certificate of the cluster CA.
    const ca = { certPem: readFileSync(path.join(this.caDir, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(this.caDir, 'tls', 'ca.key'), 'utf8') };
    const client = await issueClientCert(ca, { principal: 'fault-client', role: 'admin' });
    useClientCertificate({ caPem: ca.certPem, certPem: client.certPem, keyPem: client.keyPem });
  }

  /** Copies what `initNode({caFrom})` reads out of the first node, so that node may be removed later. */
  private keepCa(firstDir: string): void {
    mkdirSync(path.join(this.caDir, 'tls'), { recursive: true });
    for (const f of ['node.json', 'tls/ca.crt', 'tls/ca.key']) copyFileSync(path.join(firstDir, f), path.join(this.caDir, f));
  }

  private writeConfig(node: FaultNode, founding: { bootstrap: MemberRecord[] } | { join: { api: string } }): void {
    const o = this.opts;
    const config = {
      dataDir: '.', api: { listen: node.apiAddress }, peer: { listen: node.peerAddress }, ...founding,
      raft: { ...o.timings, snapshotEntries: o.snapshotEntries, snapshotIntervalMs: o.snapshotIntervalMs, logKeepEntries: o.logKeepEntries },
      limits: { proposalTimeoutMs: o.proposalTimeoutMs },
      logLevel: 'info',
    };
    writeFileSync(path.join(node.dir, 'shoal.yaml'), stringify(config));
  }
}
