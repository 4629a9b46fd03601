// Three `shoal serve` processes on 127.0.0.1, data in a temporary directory, default durability
// (every Ready is one synced write-ahead log record) and default snapshot settings; only the
// Raft timing is set, to match etcd's.
//
// SHOAL_CPU_PROF=<dir> in the environment starts each node under `node --cpu-prof`, so a
// graceful stop (SIGTERM) leaves one .cpuprofile per process in <dir>
// (summarise them with `npx tsx bench/cpu-profile-summary.ts <dir>`). SHOAL_BIN=<file> runs
// another entry point instead of bin/shoal.js (e.g. the run.mjs of a build made by
// `npm run bench:ab -- --build NAME`); bench/ab.ts passes one per cluster instead.

import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { initNode } from '../../src/node/identity.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { Client, jsonBody, once, type Answer, type Endpoint, type RequestSpec } from './http.ts';
import { agreedLeader, freePort, stopAllAndRemove, spawnLogged, stopProcess, trackTempDir, waitCaughtUp, waitUntil, type Spawned } from './proc.ts';
import type { BenchNode, RejoinReport, System, Timeouts } from './system.ts';

const binPath = process.env.SHOAL_BIN !== undefined && process.env.SHOAL_BIN !== ''
  ? path.resolve(process.env.SHOAL_BIN)
  : fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));

interface ShoalNode extends BenchNode {
  id: string;
  dir: string;
  peerAddress: string;
  proc: Spawned | undefined;
  readonly pid: number | undefined;
}

interface Founder {
  id: string;
  name: string;
  apiAddress: string;
  peerAddress: string;
}

export class ShoalCluster implements System {
  readonly kind = 'shoal';
  nodes: ShoalNode[] = [];
  private root = '';
  private destroyed = false;

  /**
   * `bin`: the entry point the nodes run (default: bin/shoal.js, or SHOAL_BIN). `nodeFlags`: node
   * flags for every node, after those of SHOAL_NODE_FLAGS.
   */
  constructor(
    private readonly timeouts: Timeouts, private readonly keepData = false, private readonly bin = binPath, private readonly nodeFlags: readonly string[] = [],
    /** More keys of every node's config (e.g. `runtime`, `control`), merged over the benchmark's own. */
    private readonly extraConfig: Record<string, unknown> = {},
    /** HTTPS with a client certificate, as shoal serves by default; false: api.insecureLoopback. */
    private readonly clientTls = true,
    /** More environment of every node (e.g. the allocator and NODE_OPTIONS `shoal install` would set: src/cli/node-environment.ts). */
    private readonly env: Record<string, string> = {},
  ) {}

  /** The node ids, in order (shoal only: for the control-plane benchmark). */
  get ids(): string[] {
    return this.nodes.map((n) => n.id);
  }

  async start(): Promise<void> {
    this.root = mkdtempSync(path.join(os.tmpdir(), 'shoal-bench-'));
    if (!this.keepData) trackTempDir(this.root);
    for (let i = 0; i < 3; i++) {
      const name = `n${i + 1}`;
      const dir = path.join(this.root, name);
      const caFrom = i > 0 ? path.join(this.root, 'n1') : undefined;
      const identity = await initNode({ dataDir: dir, name, ...(caFrom ? { caFrom } : {}) });
      const client: Endpoint = { host: '127.0.0.1', port: await freePort() };
      const node: ShoalNode = {
        id: identity.id, name, dir, client, peerAddress: `127.0.0.1:${await freePort()}`, proc: undefined,
        get pid() { return this.proc?.pid; },
      };
      this.nodes.push(node);
      if (i === 0) {
        mkdirSync(path.join(this.caDir(), 'tls'), { recursive: true });
        for (const f of ['node.json', 'tls/ca.crt', 'tls/ca.key']) cpSync(path.join(dir, f), path.join(this.caDir(), f));
      }
    }
    if (this.clientTls) {
      // The benchmark's clients are an admin with a client certificate, as any client of a node.
      const ca = { certPem: readFileSync(path.join(this.caDir(), 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(this.caDir(), 'tls', 'ca.key'), 'utf8') };
      const cert = await issueClientCert(ca, { principal: 'bench', role: 'admin' });
      for (const n of this.nodes) n.client.tls = { ca: ca.certPem, cert: cert.certPem, key: cert.keyPem };
    }
    const founders = this.nodes.map((n) => this.founder(n));
    for (const n of this.nodes) this.writeConfig(n, { bootstrap: founders });
    for (const n of this.nodes) this.spawn(n);
    await waitUntil('shoal: a leader that every node agrees on', async () => (await this.leader()) !== undefined, 60_000);
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    await stopAllAndRemove(this.nodes, this.root, this.keepData);
  }

  async leader(): Promise<number | undefined> {
    return agreedLeader(this.nodes, async (n) => {
      const h = await once<{ leader: string | null }>(n.client, { method: 'GET', path: '/healthz' }, 1000);
      return h.body.leader || undefined;
    }, (n) => n.id);
  }

  writeRequest(collection: string, id: string, value: string): RequestSpec {
    return { method: 'PUT', path: `/v1/docs/${collection}/${id}`, body: Buffer.from(`{"v":${JSON.stringify(value)}}`) };
  }

  readRequest(collection: string, id: string): RequestSpec {
    return { method: 'GET', path: `/v1/docs/${collection}/${id}` };
  }

  writeAccepted(a: Answer): boolean {
    return a.status === 200;
  }

  readFound(a: Answer): boolean {
    return a.status === 200;
  }

  async readValue(client: Client, collection: string, id: string): Promise<string | undefined> {
    const a = await client.send(this.readRequest(collection, id), 10_000);
    if (a.status === 404) return undefined;
    if (a.status !== 200) throw new Error(`shoal read ${collection}/${id}: HTTP ${a.status} ${a.body.toString()}`);
    return (JSON.parse(a.body.toString()) as { doc: { v?: string } }).doc.v;
  }

  async kill(i: number): Promise<void> {
    const n = this.node(i);
    if (n.proc) await stopProcess(n.proc, 'SIGKILL');
    n.proc = undefined;
  }

  async transferLeader(i: number): Promise<void> {
    const r = await once<unknown>(this.node(i).client, { method: 'POST', path: '/v1/cluster/leader', body: jsonBody({ to: this.node(i).id }) }, 10_000);
    if (r.status !== 200) throw new Error(`shoal transfer to ${this.node(i).name}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  }

  async restart(i: number, timeoutMs: number): Promise<void> {
    const n = this.node(i);
    if (n.proc) throw new Error(`shoal: ${n.name} is running`);
    this.spawn(n);
    await waitCaughtUp(`shoal: ${this.node(i).name} caught up`, this, i, timeoutMs, () => undefined);
  }

  async appliedOf(i: number): Promise<number> {
    const r = await once<{ appliedIndex: number }>(this.node(i).client, { method: 'GET', path: '/v1/cluster?local' }, 1000);
    return r.body.appliedIndex;
  }

  /**
   * The safe replacement of a member whose data is gone, as etcd's is: stop it, remove it
   * (DELETE /v1/cluster/members/{id}), wipe its whole data directory and init a new identity
   * from the cluster CA, add it as a learner (POST /v1/cluster/members), start it with `join`
   * and no bootstrap list, wait until it applied as far as the leader, then promote it.
   *
   * Why not the same id on an empty disk: the leader still believes that follower holds its
   * old match index and sends it nothing until the next write, and a voter that lost its hard
   * state could vote twice in one term.
   */
  async wipeAndRejoin(i: number, timeoutMs: number): Promise<RejoinReport> {
    const n = this.node(i);
    if (n.proc) await stopProcess(n.proc, 'SIGTERM');
    n.proc = undefined;
    const seed = this.nodes.find((m) => m !== n && m.proc);
    if (!seed) throw new Error('shoal: no running member to rejoin through');
    const membershipStarted = performance.now();
    await this.call(seed, 'DELETE', `/v1/cluster/members/${n.id}`, undefined);
    rmSync(n.dir, { recursive: true, force: true });
    n.id = (await initNode({ dataDir: n.dir, name: n.name, caFrom: this.caDir() })).id;
    this.writeConfig(n, { join: { api: `${seed.client.host}:${seed.client.port}` } });
    // Added before it starts (force: its API cannot answer the leader's check yet).
    await this.call(seed, 'POST', '/v1/cluster/members?force=true', this.founder(n));
    const membershipMs = performance.now() - membershipStarted;
    const logFrom = this.logText(i).length;
    const started = performance.now();
    this.spawn(n);
    let startMs = Number.NaN;
    await waitCaughtUp(`shoal: ${this.node(i).name} caught up`, this, i, timeoutMs, () => { if (Number.isNaN(startMs)) startMs = performance.now() - started; });
    const catchUpMs = performance.now() - started;
    const promoteStarted = performance.now();
    await this.call(seed, 'POST', `/v1/cluster/members/${n.id}/promote`, undefined);
    const promoteMs = performance.now() - promoteStarted;
    const log = this.logText(i).slice(logFrom);
    const snap = /applied snapshot at index (\d+)/.exec(log);
    const how = `removed, re-initialised with a new id and added as a learner; started empty, ${snap ? `received a snapshot at index ${snap[1]}` : 'caught up from the log (no snapshot)'}; promoted to voter ${Math.round(promoteMs)} ms later`;
    return { catchUpMs, membershipMs, startMs, how };
  }

  private async call(via: ShoalNode, method: 'POST' | 'DELETE', urlPath: string, body: unknown): Promise<void> {
    const r = await once<unknown>(via.client, { method, path: urlPath, ...(body !== undefined ? { body: jsonBody(body) } : {}) }, 15_000);
    if (r.status >= 300) throw new Error(`shoal ${method} ${urlPath}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  }

  /** A copy of the cluster CA (and cluster id), so a new identity can be made whichever node is wiped. */
  private caDir(): string {
    return path.join(this.root, 'ca');
  }

  private node(i: number): ShoalNode {
    const n = this.nodes[i];
    if (!n) throw new Error(`no shoal node ${i}`);
    return n;
  }

  private founder(n: ShoalNode): Founder {
    return { id: n.id, name: n.name, apiAddress: `${n.client.host}:${n.client.port}`, peerAddress: n.peerAddress };
  }

  private writeConfig(n: ShoalNode, how: { bootstrap: Founder[] } | { join: { api: string } }): void {
    const config = {
      dataDir: '.', api: { listen: `${n.client.host}:${n.client.port}`, ...(this.clientTls ? {} : { insecureLoopback: true }) }, peer: { listen: n.peerAddress }, ...how,
      // A tick per heartbeat, as etcd does: --heartbeat-interval is its tick.
      raft: { tickMs: this.timeouts.heartbeatMs, heartbeatIntervalMs: this.timeouts.heartbeatMs, electionTimeoutMs: this.timeouts.electionMs },
      logLevel: 'info',
      ...this.extraConfig,
    };
    writeFileSync(path.join(n.dir, 'shoal.yaml'), stringify(config));
  }

  /** What node `i` has written to its log so far (every start of it, appended). */
  logText(i: number): string {
    const f = this.logFile(this.node(i));
    return existsSync(f) ? readFileSync(f, 'utf8') : '';
  }

  private logFile(n: ShoalNode): string {
    return path.join(this.root, `${n.name}.log`);
  }

  private spawn(n: ShoalNode): void {
    const profDir = process.env.SHOAL_CPU_PROF;
    const prof = profDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profDir)}`, `--cpu-prof-name=shoal-${n.name}-${Date.now()}.cpuprofile`] : [];
    if (profDir) mkdirSync(profDir, { recursive: true });
    // Extra node flags for every shoal node (e.g. --trace-gc, which NODE_OPTIONS refuses).
    const extra = [...(process.env.SHOAL_NODE_FLAGS ?? '').split(' ').filter((f) => f !== ''), ...this.nodeFlags];
    n.proc = spawnLogged(process.execPath, [...prof, ...extra, this.bin, 'serve', '--config', path.join(n.dir, 'shoal.yaml')], this.logFile(n), { ...process.env, ...this.env });
    const proc = n.proc;
    void proc.exited.then(() => { if (n.proc === proc) n.proc = undefined; });
  }
}

/**
 * ms from a node's process start to its API bound, from its start-up line (src/server/lifecycle.ts,
 * startUpLine: "serving the API on ..., N ms after the process started"); NaN when the log has none.
 */
export function boundMsOf(log: string): number {
  const m = /serving the API on [^,"]*, (\d+) ms after the process started/.exec(log);
  return m ? Number(m[1]) : Number.NaN;
}
