// A real three-process cluster whose agents run their tasks on the machine's Docker daemon, for
// the system tests of this folder (issue 22's scenarios). All three nodes share the one daemon;
// the labels keep them apart (each agent touches only containers carrying its cluster's id and
// its node's id). Nothing is pulled: the services run the local test image.
//
// withDockerSystem(options, body) starts a fresh cluster for one test and, however the body ends,
// kills the processes and removes every container carrying the cluster's label: a failed test
// leaves nothing running. Docker's events for the cluster are recorded from before the first
// container exists (container-events.ts). Run the tests under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/<file>.test.ts

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import type { NodeView, ServiceView, TaskItem } from '../../src/api/control-views.ts';
import { labelKeys } from '../../src/executor/labels.ts';
import { ProcessCluster, getJson, sleep, type ClusterNode } from '../cluster/process-cluster.ts';
import { defaultSocketPath, ensureDockerd } from '../executor/dockerd.ts';
import { SocketProxy } from '../executor/socket-proxy.ts';
import { ensureTestImage, testImage } from '../executor/test-image.ts';
import { ContainerEventLog } from './container-events.ts';

export interface SystemOptions {
  /** The agents' runtime: Docker (the default), or the in-memory one (bench/control.ts; no daemon needed). */
  runtime?: 'docker' | 'memory';
  /**
   * Node health (config `control`); the tests that lose a node use the fastest allowed, 3 s, and
   * a restart grace as short (they stop a node's shoal, whose machine then refuses the peer port).
   */
  control?: { suspectAfterMs: number; downAfterMs: number; restartGraceMs?: number };
  /** A node (by name) whose agent reaches Docker through a socket proxy the test closes and reopens. */
  proxied?: string;
  /** Each node on its own loopback address (ProcessCluster's `ownHosts`). */
  ownHosts?: boolean;
}

/** One of shoal's containers as Docker shows it. */
export interface Container {
  id: string;
  nodeId: string;
  service: string;
  slot: string;
  specVersion: number;
  taskId: string;
  running: boolean;
  startedAt: string;
}

interface Answer<T> { status: number; body: T }

/** How long an API call is retried while no node answers it (an election, a node restarting). */
const apiRetryMs = 15_000;

/** A Service document for apply: the test image sleeping, stopped at once (sleep ignores SIGTERM as pid 1). */
export function serviceDoc(name: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: 'shoal/v1', kind: 'Service', name, image: testImage, command: ['sleep', '3600'], stopGracePeriod: '1s', ...fields };
}

export class DockerSystem {
  readonly docker = new Docker({ socketPath: defaultSocketPath });
  readonly cluster: ProcessCluster;
  /** Set by start(). */
  events: ContainerEventLog | undefined;
  readonly proxy: SocketProxy | undefined;
  readonly runtime: 'docker' | 'memory';
  private readonly tmp = mkdtempSync(path.join(os.tmpdir(), 'shoal-system-'));

  constructor(opts: SystemOptions) {
    this.runtime = opts.runtime ?? 'docker';
    const proxySocket = path.join(this.tmp, 'docker.sock');
    this.proxy = opts.proxied === undefined ? undefined : new SocketProxy({ socketPath: proxySocket }, defaultSocketPath);
    this.cluster = new ProcessCluster({
      runtime: this.runtime,
      ...(opts.control !== undefined ? { control: opts.control } : {}),
      ...(opts.ownHosts === true ? { ownHosts: true } : {}),
      configFor: (name) => (name === opts.proxied ? { runtime: { kind: 'docker', dockerSocket: proxySocket } } : {}),
    });
  }

  async start(): Promise<void> {
    if (this.runtime === 'docker') {
      await ensureDockerd();
      await ensureTestImage();
    }
    await this.proxy?.open();
    await this.cluster.init();
    if (this.runtime === 'docker') this.events = await ContainerEventLog.follow(this.docker, this.cluster.clusterId);
    this.cluster.startAll();
    await this.cluster.waitForLeader(30_000);
    await this.waitFor('every node registered with its runtime up', async () => {
      const nodes = await this.nodes().catch(() => []);
      return nodes.length === 3 && nodes.every((n) => n.record.runtime.status === 'up' && n.record.state === 'ready') ? true : undefined;
    });
  }

  /** Kills the processes, then removes every container carrying the cluster's label. Never throws twice. */
  async close(): Promise<void> {
    this.events?.close();
    const problems: string[] = [];
    await Promise.all(this.cluster.nodes.map((n) => this.cluster.kill(n))).catch((err: unknown) => problems.push(String(err)));
    if (this.cluster.clusterId !== '' && this.runtime === 'docker') {
      try {
        await this.removeContainers();
      } catch (err) {
        problems.push(`removing the cluster's containers: ${String(err)}`);
      }
    }
    await this.proxy?.close();
    await this.cluster.destroy();
    rmSync(this.tmp, { recursive: true, force: true });
    if (problems.length > 0) throw new Error(problems.join('\n'));
  }

  private async removeContainers(): Promise<void> {
    const label = `${labelKeys.cluster}=${this.cluster.clusterId}`;
    const list = await this.docker.listContainers({ all: true, filters: { label: [label] } });
    await Promise.all(list.map(async (c) => {
      try {
        await this.docker.getContainer(c.Id).remove({ force: true, v: true });
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode !== 404) throw err;
      }
    }));
    const left = await this.docker.listContainers({ all: true, filters: { label: [label] } });
    if (left.length > 0) throw new Error(`containers left behind: ${left.map((c) => c.Id).join(', ')}`);
  }

  node(name: string): ClusterNode {
    const n = this.cluster.nodes.find((x) => x.name === name);
    if (n === undefined) throw new Error(`no node ${name}`);
    return n;
  }

  /** The node that every running node names as leader. */
  leader(timeoutMs = 30_000): Promise<ClusterNode> {
    return this.cluster.waitForLeader(timeoutMs);
  }

  /**
   * One API call, to the first running node that answers it (`via` first when given). A refused
   * connection or a 503 (no leader yet, a node stopping) is tried on the next node, and again
   * until apiRetryMs has passed.
   */
  async api<T>(method: 'GET' | 'POST', urlPath: string, body?: unknown, via?: ClusterNode): Promise<Answer<T>> {
    const deadline = Date.now() + apiRetryMs;
    let last = 'no node is running';
    for (;;) {
      const order = [...(via !== undefined ? [via] : []), ...this.cluster.nodes.filter((n) => n !== via)].filter((n) => n.proc !== undefined);
      for (const n of order) {
        try {
          const res = await fetch(`http://${n.apiAddress}${urlPath}`, {
            method, signal: AbortSignal.timeout(10_000),
            ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
          });
          const answer = { status: res.status, body: (await res.json()) as T };
          if (res.status !== 503) return answer;
          last = `${n.name} answered 503: ${JSON.stringify(answer.body)}`;
        } catch (err) {
          last = `${n.name}: ${(err as Error).message}`;
        }
      }
      if (Date.now() > deadline) throw new Error(`${method} ${urlPath}: ${last}`);
      await sleep(200);
    }
  }

  /** POST /v1/apply of the documents; throws unless it answers 200. */
  async apply(...documents: Record<string, unknown>[]): Promise<void> {
    const r = await this.api<unknown>('POST', '/v1/apply', { documents });
    if (r.status !== 200) throw new Error(`apply answered ${r.status}: ${JSON.stringify(r.body)}`);
  }

  async service(name: string): Promise<{ service: ServiceView; tasks: TaskItem[] }> {
    const r = await this.api<{ service: ServiceView; tasks: TaskItem[] }>('GET', `/v1/services/${name}`);
    if (r.status !== 200) throw new Error(`GET /v1/services/${name} answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body;
  }

  async nodes(): Promise<NodeView[]> {
    const r = await this.api<{ items: NodeView[] }>('GET', '/v1/nodes');
    if (r.status !== 200) throw new Error(`GET /v1/nodes answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body.items;
  }

  async nodeView(name: string): Promise<NodeView> {
    const n = (await this.nodes()).find((x) => x.name === name);
    if (n === undefined) throw new Error(`node ${name} is not registered`);
    return n;
  }

  /** The cluster's containers as Docker shows them (optionally those of one service). */
  async containers(service?: string): Promise<Container[]> {
    const label = [`${labelKeys.cluster}=${this.cluster.clusterId}`, ...(service !== undefined ? [`${labelKeys.service}=${service}`] : [])];
    const list = await this.docker.listContainers({ all: true, filters: { label } });
    const out: Container[] = [];
    for (const c of list) {
      const info = await this.docker.getContainer(c.Id).inspect().catch(() => undefined);
      if (info === undefined) continue;
      const l = info.Config.Labels;
      out.push({
        id: info.Id, nodeId: l[labelKeys.node] ?? '', service: l[labelKeys.service] ?? '', slot: l[labelKeys.slot] ?? '',
        specVersion: Number(l[labelKeys.specVersion]), taskId: l[labelKeys.task] ?? '', running: info.State.Running, startedAt: info.State.StartedAt,
      });
    }
    return out.sort((a, b) => a.slot.localeCompare(b.slot, undefined, { numeric: true }) || a.id.localeCompare(b.id));
  }

  /** Polls `probe` until it returns something other than undefined; fails with the nodes' logs after `timeoutMs`. */
  async waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let lastError = '';
    for (;;) {
      try {
        const v = await probe();
        if (v !== undefined) return v;
      } catch (err) {
        lastError = ` (last error: ${(err as Error).message})`;
      }
      if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms${lastError}\n${this.cluster.tailLogs(25)}`);
      await sleep(200);
    }
  }

  /** Waits until the service's status says converged; returns its view and tasks. */
  waitConverged(name: string, timeoutMs = 60_000): Promise<{ service: ServiceView; tasks: TaskItem[] }> {
    return this.waitFor(`service ${name} converged`, async () => {
      const s = await this.service(name);
      return s.service.status.converged ? s : undefined;
    }, timeoutMs);
  }

  /** Whether the node answers /healthz and knows a leader. */
  async answers(node: ClusterNode): Promise<boolean> {
    const h = await getJson<{ leader: string | null }>(node, '/healthz').catch(() => undefined);
    return h !== undefined && h.status === 200 && h.body.leader !== null;
  }
}

/** A fresh cluster for `body`; torn down, with every container it made, however `body` ends. */
export async function withDockerSystem(opts: SystemOptions, body: (sys: DockerSystem) => Promise<void>): Promise<void> {
  const sys = new DockerSystem(opts);
  let outcome: { failed: false } | { failed: true; err: unknown } = { failed: false };
  try {
    await sys.start();
    await body(sys);
  } catch (err) {
    outcome = { failed: true, err };
  }
  try {
    await sys.close();
  } catch (err) {
    // The test's own failure says more; the clean-up's is reported beside it.
    if (!outcome.failed) throw err;
    console.error(`clean-up after a failed test also failed: ${String(err)}`);
  }
  if (outcome.failed) throw outcome.err;
}

/** The running tasks of the current spec version, by node name. */
export function perNode(tasks: readonly TaskItem[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tasks) if (t.desired === 'running' && t.observed === 'running') out[t.nodeName ?? '-'] = (out[t.nodeName ?? '-'] ?? 0) + 1;
  return out;
}
