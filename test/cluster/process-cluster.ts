// A cluster of real `shoal serve` processes on loopback, for multi-process tests: temporary data
// directories, free ports, start/kill/stop of single nodes, and HTTP helpers.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { initNode } from '../../src/node/identity.ts';
import type { MemberRecord } from '../../src/resources/membership.ts';
import { freePort } from '../../bench/lib/proc.ts';

const binPath = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));

export interface ClusterNode extends MemberRecord {
  dir: string;
  proc: ChildProcess | undefined;
  logs: string[];
  /** When each chunk of `logs` arrived (Date.now()), index by index. */
  logTimes: number[];
}

export interface ClusterOptions {
  nodes?: number;
  tickMs?: number;
  electionTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  snapshotEntries?: number;
  snapshotIntervalMs?: number;
  logKeepEntries?: number;
  /** The container runtime of every node (config `runtime.kind`); `memory` runs the control plane's tasks in process. */
  runtime?: 'docker' | 'memory' | 'none';
  /** What every node offers the scheduler (config `node`), instead of the machine's cores and memory. */
  capacity?: { cpuMillis: number; memoryBytes: number };
  /** Node health (config `control`): silence before a node is suspect, and down; the grace of a node known to be restarting. */
  control?: { suspectAfterMs?: number; downAfterMs?: number; restartGraceMs?: number };
  /** Config keys for one node, over the rest (e.g. `runtime: {kind: docker, dockerSocket}` for n3 alone). */
  configFor?: (name: string) => Record<string, unknown>;
  /**
   * Each node on its own loopback address (127.0.0.11, .12, ...) instead of all on 127.0.0.1: a
   * node dials its peers from the address it listens on, so a test can drop one node's traffic
   * by address, both ways (test/system/exclusive.test.ts).
   */
  ownHosts?: boolean;
}

/** The first loopback address of `ownHosts` (n1 is .11). */
const ownHostBase = 11;

export class ProcessCluster {
  readonly root = mkdtempSync(path.join(os.tmpdir(), 'shoal-cluster-'));
  nodes: ClusterNode[] = [];
  /** The cluster's id (set by init); containers carry it in their `io.shoal.cluster` label. */
  clusterId = '';

  constructor(private readonly opts: ClusterOptions = {}) {}

  async init(): Promise<void> {
    const n = this.opts.nodes ?? 3;
    for (let i = 0; i < n; i++) {
      const name = `n${i + 1}`;
      const host = this.opts.ownHosts === true ? `127.0.0.${ownHostBase + i}` : '127.0.0.1';
      const dir = path.join(this.root, name);
      const caFrom = i > 0 ? path.join(this.root, 'n1') : undefined;
      const identity = await initNode({ dataDir: dir, name, ...(caFrom ? { caFrom } : {}) });
      this.clusterId = identity.clusterId;
      this.nodes.push({
        id: identity.id, name, dir, proc: undefined, logs: [], logTimes: [],
        apiAddress: `${host}:${await freePort()}`, peerAddress: `${host}:${await freePort()}`,
      });
    }
    const bootstrap = this.nodes.map(({ id, name, apiAddress, peerAddress }) => ({ id, name, apiAddress, peerAddress }));
    for (const node of this.nodes) {
      const config = {
        dataDir: '.', api: { listen: node.apiAddress, insecureLoopback: true }, peer: { listen: node.peerAddress }, bootstrap,
        raft: {
          tickMs: this.opts.tickMs ?? 50, heartbeatIntervalMs: this.opts.heartbeatIntervalMs ?? 50,
          electionTimeoutMs: this.opts.electionTimeoutMs ?? 500,
          snapshotEntries: this.opts.snapshotEntries ?? 10_000, logKeepEntries: this.opts.logKeepEntries ?? 5_000,
          ...(this.opts.snapshotIntervalMs !== undefined ? { snapshotIntervalMs: this.opts.snapshotIntervalMs } : {}),
        },
        logLevel: 'info',
        ...(this.opts.runtime !== undefined ? { runtime: { kind: this.opts.runtime } } : {}),
        ...(this.opts.capacity !== undefined ? { node: this.opts.capacity } : {}),
        ...(this.opts.control !== undefined ? { control: this.opts.control } : {}),
        ...this.opts.configFor?.(node.name),
      };
      writeFileSync(path.join(node.dir, 'shoal.yaml'), stringify(config));
    }
  }

  /** `args`: more `shoal serve` flags (e.g. `--peers`). */
  start(node: ClusterNode, args: string[] = []): void {
    if (node.proc) throw new Error(`${node.name} already running`);
    const proc = spawn(process.execPath, [binPath, 'serve', '--config', path.join(node.dir, 'shoal.yaml'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer): void => {
      node.logs.push(b.toString());
      node.logTimes.push(Date.now());
      if (node.logs.length > 2000) {
        node.logs.splice(0, 1000);
        node.logTimes.splice(0, 1000);
      }
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    proc.once('exit', () => { if (node.proc === proc) node.proc = undefined; });
    node.proc = proc;
  }

  /**
   * A stopped node's machine got new addresses: new ports for its API and peer listener in its
   * config (`host` too, if given). Its stored state is left as it is: the members' records still
   * name the old addresses.
   */
  async move(node: ClusterNode, host = splitHost(node.peerAddress)): Promise<void> {
    if (node.proc) throw new Error(`${node.name} is running; stop it before moving it`);
    node.apiAddress = `${host}:${await freePort()}`;
    node.peerAddress = `${host}:${await freePort()}`;
    const file = path.join(node.dir, 'shoal.yaml');
    const config = parseYaml(readFileSync(file, 'utf8')) as { api: { listen: string }; peer: { listen: string } };
    config.api.listen = node.apiAddress;
    config.peer.listen = node.peerAddress;
    writeFileSync(file, stringify(config));
  }

  startAll(): void {
    for (const n of this.nodes) this.start(n);
  }

  /** SIGKILL: no graceful anything. */
  async kill(node: ClusterNode): Promise<void> {
    const proc = node.proc;
    if (!proc) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
    node.proc = undefined;
  }

  /** SIGTERM: graceful stop; resolves with the exit code. */
  async stop(node: ClusterNode): Promise<number | null> {
    const proc = node.proc;
    if (!proc) return null;
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    const code = await exited;
    node.proc = undefined;
    return code;
  }

  async destroy(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.kill(n)));
    rmSync(this.root, { recursive: true, force: true });
  }

  byId(id: string): ClusterNode | undefined {
    return this.nodes.find((n) => n.id === id);
  }

  /** Polls the running nodes until they agree on a leader; returns it. */
  async waitForLeader(timeoutMs = 20_000, among: ClusterNode[] = this.nodes): Promise<ClusterNode> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const seen = new Set<string>();
      let answered = 0;
      for (const n of among) {
        if (!n.proc) continue;
        const h = await getJson<{ leader: string | null }>(n, '/healthz').catch(() => undefined);
        if (h?.body.leader) seen.add(h.body.leader);
        if (h) answered++;
      }
      const [leader] = [...seen];
      if (seen.size === 1 && answered === among.filter((n) => n.proc).length && leader) {
        const node = this.byId(leader);
        if (node?.proc) return node;
      }
      await sleep(50);
    }
    throw new Error(`no leader within ${timeoutMs} ms\n${this.tailLogs()}`);
  }

  tailLogs(lines = 30): string {
    return this.nodes.map((n) => `--- ${n.name} (${n.id})\n${n.logs.join('').split('\n').slice(-lines).join('\n')}`).join('\n');
  }
}

const splitHost = (hostPort: string): string => hostPort.slice(0, hostPort.lastIndexOf(':'));

/**
 * When the first chunk of `node`'s output holding `text` arrived (Date.now()), or undefined: the
 * moment a node did something, as near as this process can see it, without polling its API.
 */
export function logArrival(node: ClusterNode, text: string): number | undefined {
  const i = node.logs.findIndex((chunk) => chunk.includes(text));
  return i < 0 ? undefined : node.logTimes[i];
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function getJson<T>(node: MemberRecord, urlPath: string, timeoutMs = 2000): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://${node.apiAddress}${urlPath}`, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: (await res.json()) as T };
}

export async function putJson<T>(node: MemberRecord, urlPath: string, body: unknown, timeoutMs = 5000, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://${node.apiAddress}${urlPath}`, {
    method: 'PUT', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, body: (await res.json()) as T };
}

/**
 * putJson as a client that retries does (docs/errors.md: every 503 is retryable): a 503 answered
 * while leadership settles (an election on a loaded machine, a hand-over) is tried again until
 * `withinMs`; any other answer, or the last 503, is returned. For a test's writes that are not
 * themselves under test.
 */
export async function putJsonSettled<T>(node: MemberRecord, urlPath: string, body: unknown, withinMs = 15_000): Promise<{ status: number; body: T }> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const r = await putJson<T>(node, urlPath, body).catch((err: unknown) => ({ status: 0, body: { error: String(err) } as T }));
    if ((r.status !== 503 && r.status !== 0) || Date.now() > deadline) return r;
    await sleep(200);
  }
}

/** A cluster for one test file: initialised and led before the tests, destroyed after them. */
export function useCluster(opts: ClusterOptions): ProcessCluster {
  const cluster = new ProcessCluster(opts);
  beforeAll(async () => {
    await cluster.init();
    cluster.startAll();
    await cluster.waitForLeader();
  }, 60_000);
  afterAll(async () => {
    await cluster.destroy();
  });
  return cluster;
}
