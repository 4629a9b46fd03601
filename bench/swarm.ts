// shoal beside Docker Swarm on the same work, in one run (issue 44). Two labs of three network
// namespaces on a bridge each (bench/lib/swarm-lab.ts), a Docker daemon in every namespace, one
// local registry (Debian's docker-registry) that every daemon pulls the image from:
//
//   Swarm   three managers (each also a worker), `docker swarm init` / `join` with the defaults;
//           a stack of three services from one compose file (`docker stack deploy`).
//   shoal   three `shoal serve` nodes, the Docker runtime on the namespace's daemon, the same
//           stack from the same compose file with `network_mode: bridge` added to each service
//           (POST /v1/stacks/bench/deploy: what `shoal stack deploy` sends).
//
// Every figure is read from the daemons' container events (a Timeline: which container of which
// service and slot ran where and when), the same way for both systems, or from the system's own
// API where only it knows (leader, node down, update done). Rounds alternate which system goes
// first; the 60 s partitions of figure 7 run for both systems at once (the wait is idle).
//
// No IPVS in this kernel: Swarm's routing mesh and its per-service virtual IP cannot run, so the
// services use `endpoint_mode: dnsrr` and publish no port; published-port traffic is left out.
//
//   flock /tmp/shoal-heavy.lock npm run bench:swarm -- [--rounds 3] [--write]
//
// Needs root. --write replaces the "swarm" section of bench/RESULTS.md.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parse, stringify } from 'yaml';
import { MachineLab, type Machine } from './lib/machine-lab.ts';
import { cpuMs, machineJiffies, rssMiB } from './lib/proc.ts';
import { writeNamedSection } from './lib/report.ts';
import { Dockerds, Registry, registryPort, mountsUnder, type DNode } from './lib/swarm-lab.ts';
import { cell, convergedNow, duplicates, fmtNum, msBelow, parseSwarmNodes, ratioCell } from './lib/swarm-parse.ts';
import { cutsBetween, keepOwnLiveLabs, NetLab } from '../test/faults/netns.ts';
import { ensureTestImage, testImage } from '../test/executor/test-image.ts';
import { sleep } from '../test/faults/http.ts';

const pollMs = 100;
/** The raw figures of the last --write run, to render again with --from-json. */
const resultsJson = new URL('swarm-results.json', import.meta.url).pathname;
const waitMaxMs = 180_000;
const initial: Record<string, number> = { a: 1, b: 3, c: 5 };
const stopGrace = '1s';
const partitionMs = 60_000;
/** systemd's RestartSec of both units (docker.service, and shoal's src/cli/systemd-unit.ts). */
const restartAfterMs = 2_000;

type Kind = 'shoal' | 'swarm';

/** What the bench asks of either system; times are read from the timeline or the system's own API. */
interface System {
  kind: Kind;
  d: Dockerds;
  /** The timeline's name of a service (`bench_a` for Swarm's stack). */
  svc(short: string): string;
  deploy(): Promise<void>;
  remove(): Promise<void>;
  /** Resolves once the system accepted the change; throws when it refused (no leader). */
  scale(short: string, n: number): Promise<void>;
  /** A rolling update: a new value of env ROUND. */
  update(short: string, round: number): Promise<void>;
  updateCompleted(short: string): Promise<boolean>;
  leader(): Promise<number | undefined>;
  nodeState(slot: number): Promise<'ready' | 'down' | 'other' | undefined>;
  availability(slot: number, a: 'drain' | 'active'): Promise<void>;
  /** The control plane's process on the node: shoal, or (Swarm mode lives in it) dockerd. */
  controlPid(slot: number): number | undefined;
  crash(slot: number): Promise<number>;
  restart(slot: number): Promise<void>;
  die(slot: number): Promise<number>;
  revive(slot: number): Promise<void>;
  tune(): Promise<string>;
  stateBytes(slot: number): number;
  destroy(): Promise<void>;
}

// ---------------------------------------------------------------- Swarm

class SwarmSystem implements System {
  readonly kind = 'swarm';
  private readonly nodeIds = new Map<number, string>();
  private composeFile = '';

  constructor(readonly d: Dockerds, readonly image: string, readonly runDir: string) {}

  svc(short: string): string {
    return `bench_${short}`;
  }

  private live(): DNode[] {
    return this.d.nodes.filter((n) => n.proc !== undefined);
  }

  private node(slot: number): DNode {
    return this.d.nodes[slot - 1] as DNode;
  }

  async form(): Promise<void> {
    const [first, ...rest] = this.d.nodes as [DNode, ...DNode[]];
    await this.d.cliOk(first, ['swarm', 'init', '--advertise-addr', first.ip, '--listen-addr', `${first.ip}:2377`]);
    const token = (await this.d.cliOk(first, ['swarm', 'join-token', '-q', 'manager'])).trim();
    for (const n of rest) await this.d.cliOk(n, ['swarm', 'join', '--token', token, '--advertise-addr', n.ip, '--listen-addr', `${n.ip}:2377`, `${first.ip}:2377`]);
    for (const n of this.d.nodes) this.nodeIds.set(n.slot, (await this.d.cliOk(n, ['info', '-f', '{{.Swarm.NodeID}}'])).trim());
    this.composeFile = path.join(this.runDir, 'stack.yml');
    const service = (replicas: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
      image: this.image, command: ['sleep', '3600'], stop_grace_period: stopGrace, deploy: { replicas, endpoint_mode: 'dnsrr', ...extra },
    });
    writeFileSync(this.composeFile, stringify({
      version: '3.8',
      services: { a: service(initial.a as number), b: service(initial.b as number), c: service(initial.c as number, { update_config: { parallelism: 2 } }) },
    }));
  }

  /** A manager that answers, the leader first when known. */
  private async manager(): Promise<DNode> {
    const l = await this.leader();
    return l !== undefined ? this.node(l) : (this.live()[0] as DNode);
  }

  async deploy(): Promise<void> {
    await this.d.cliOk(await this.manager(), ['stack', 'deploy', '-c', this.composeFile, 'bench']);
  }

  async remove(): Promise<void> {
    const m = await this.manager();
    await this.d.cliOk(m, ['stack', 'rm', 'bench']);
    // The stack's network goes after its tasks: a deploy before that finds it still in use.
    await waitFor('the stack network removed', async () => (await this.d.cliOk(m, ['network', 'ls', '-q', '--filter', 'name=bench_default'])).trim() === '');
  }

  async scale(short: string, n: number): Promise<void> {
    let last = '';
    for (const m of this.live()) {
      const r = await this.d.cli(m, ['service', 'scale', '-d', `${this.svc(short)}=${n}`], 10_000);
      if (r.status === 0) return;
      last = r.stderr.trim();
    }
    throw new Error(`scale refused: ${last}`);
  }

  async update(short: string, round: number): Promise<void> {
    await this.d.cliOk(await this.manager(), ['service', 'update', '-d', '--env-add', `ROUND=${round}`, this.svc(short)]);
  }

  async updateCompleted(short: string): Promise<boolean> {
    const m = await this.manager();
    const info = (await m.docker.getService(this.svc(short)).inspect()) as { UpdateStatus?: { State?: string } };
    return info.UpdateStatus?.State === 'completed';
  }

  async leader(): Promise<number | undefined> {
    for (const n of this.live()) {
      try {
        const nodes = parseSwarmNodes(await n.docker.listNodes());
        const l = nodes.find((x) => x.leader);
        if (l === undefined) continue;
        for (const [slot, id] of this.nodeIds) if (id === l.id) return slot;
      } catch {
        // no leader (503), or a daemon restarting
      }
    }
    return undefined;
  }

  async nodeState(slot: number): Promise<'ready' | 'down' | 'other' | undefined> {
    for (const n of this.live()) {
      if (n.slot === slot) continue;
      try {
        const v = parseSwarmNodes(await n.docker.listNodes()).find((x) => x.id === this.nodeIds.get(slot));
        if (v === undefined) continue;
        return v.state === 'ready' ? 'ready' : v.state === 'down' ? 'down' : 'other';
      } catch {
        // ask another
      }
    }
    return undefined;
  }

  async availability(slot: number, a: 'drain' | 'active'): Promise<void> {
    await this.d.cliOk(await this.manager(), ['node', 'update', '--availability', a, this.nodeIds.get(slot) as string]);
  }

  controlPid(slot: number): number | undefined {
    return this.d.pid(this.node(slot));
  }

  crash(slot: number): Promise<number> {
    return this.d.kill9(this.node(slot));
  }

  restart(slot: number): Promise<void> {
    return this.d.start(this.node(slot));
  }

  async die(slot: number): Promise<number> {
    const n = this.node(slot);
    return this.d.death(n, await this.d.containerPids(n));
  }

  revive(slot: number): Promise<void> {
    return this.d.revive(this.node(slot));
  }

  async tune(): Promise<string> {
    const m = await this.manager();
    const r = await this.d.cli(m, ['swarm', 'update', '--dispatcher-heartbeat', '1s']);
    if (r.status !== 0) throw new Error(`docker swarm update --dispatcher-heartbeat 1s: ${r.stderr.trim()}`);
    const got = (await this.d.cliOk(m, ['info', '-f', '{{.Swarm.Cluster.Spec.Dispatcher.HeartbeatPeriod}}'])).trim();
    return `dispatcher heartbeat 1 s (default 5 s; \`docker info\` now says ${got}): the only timing flag \`docker swarm update\` has; Raft's election and heartbeat ticks have none`;
  }

  stateBytes(slot: number): number {
    return this.d.duBytes(path.join(this.node(slot).dataRoot, 'swarm'));
  }

  async destroy(): Promise<void> {
    await this.d.destroy();
    const veths = this.d.nodes.map((n) => this.d.net.hostVeth(n.slot));
    await this.d.net.destroy();
    // Deleting our end deletes the pair now, not when the namespace's last socket is gone.
    for (const v of veths) spawnSync('ip', ['link', 'del', v], { stdio: 'ignore' });
  }
}

// ---------------------------------------------------------------- shoal

class ShoalSystem implements System {
  readonly kind = 'shoal';
  private readonly replicas: Record<string, number> = { ...initial };

  constructor(readonly d: Dockerds, readonly lab: MachineLab, readonly image: string) {}

  /** The stack's services are named `<stack>-<service>` (src/resources/compose/compile.ts). */
  svc(short: string): string {
    return `bench-${short}`;
  }

  /** The `ROUND` given to c by the last update (as Swarm's `service update --env-add`). */
  private round: number | undefined;

  /**
   * The stack's compose file: Swarm's (SwarmSystem.init), each service with `network_mode: bridge`
   * as well: without it a stack's services join its default network, an overlay over the mesh,
   * which this lab does not run. Replicas as last scaled (a redeploy keeps them).
   */
  composeText(): string {
    const service = (short: string): Record<string, unknown> => ({
      image: this.image, command: ['sleep', '3600'], stop_grace_period: stopGrace, network_mode: 'bridge',
      ...(short === 'c' && this.round !== undefined ? { environment: { ROUND: String(this.round) } } : {}),
      deploy: {
        replicas: this.replicas[short], endpoint_mode: 'dnsrr',
        ...(short === 'c' ? { update_config: { parallelism: 2, ...(this.updateMonitor !== undefined ? { monitor: this.updateMonitor } : {}) } } : {}),
      },
    });
    return stringify({ version: '3.8', services: Object.fromEntries(Object.keys(initial).map((k) => [k, service(k)])) });
  }

  /** `shoal stack deploy bench -c stack.yml`, as the CLI sends it. */
  async deployStack(): Promise<void> {
    await this.ok('stack deploy', 'POST', '/v1/stacks/bench/deploy', { files: [{ path: 'stack.yml', text: this.composeText() }] });
  }

  private m(slot: number): Machine {
    return this.lab.machines[slot - 1] as Machine;
  }

  private slotOf(id: string): number | undefined {
    return this.lab.machines.find((m) => m.id === id)?.slot;
  }

  /** `update.monitor` of service c when set (the bounds run); else the default (5 s, as Swarm's). */
  updateMonitor: string | undefined;

  private async ok(what: string, method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown): Promise<unknown> {
    const r = await this.lab.api(method, url, body);
    if (r.kind !== 'answer' || r.status >= 300) throw new Error(`${what}: ${JSON.stringify(r.kind === 'answer' ? r.body : r.error)}`);
    return r.body;
  }

  async deploy(): Promise<void> {
    Object.assign(this.replicas, initial);
    this.round = undefined;
    await this.deployStack();
  }

  async remove(): Promise<void> {
    await this.ok('stack rm', 'DELETE', '/v1/stacks/bench');
  }

  async scale(short: string, n: number): Promise<void> {
    await this.ok(`scale ${short}`, 'POST', `/v1/services/${this.svc(short)}/scale`, { replicas: n });
    this.replicas[short] = n;
  }

  /** A redeploy of the stack with c's `ROUND` changed (only c's spec differs). */
  async update(short: string, round: number): Promise<void> {
    if (short !== 'c') throw new Error(`the bench updates c only, not ${short}`);
    this.round = round;
    await this.deployStack();
  }

  async updateCompleted(short: string): Promise<boolean> {
    const body = (await this.ok('service', 'GET', `/v1/services/${this.svc(short)}`)) as { service: { record: { updateStatus: { state: string } }; status: { converged: boolean } } };
    return body.service.record.updateStatus.state === 'completed' && body.service.status.converged;
  }

  async leader(): Promise<number | undefined> {
    for (const m of this.lab.live()) {
      const r = await this.lab.api('GET', '/healthz', undefined, m);
      const id = r.kind === 'answer' ? (r.body as { leader?: string | null } | undefined)?.leader : undefined;
      if (typeof id === 'string') return this.slotOf(id);
    }
    return undefined;
  }

  async nodeState(slot: number): Promise<'ready' | 'down' | 'other' | undefined> {
    for (const m of this.lab.live()) {
      if (m.slot === slot) continue;
      const r = await this.lab.api('GET', `/v1/nodes/${this.m(slot).id}`, undefined, m);
      if (r.kind !== 'answer' || r.status !== 200) continue;
      const state = (r.body as { node: { record: { state: string } } }).node.record.state;
      return state === 'ready' ? 'ready' : state === 'down' ? 'down' : 'other';
    }
    return undefined;
  }

  async availability(slot: number, a: 'drain' | 'active'): Promise<void> {
    await this.ok(`availability ${a}`, 'POST', `/v1/nodes/${this.m(slot).id}/availability`, { availability: a });
  }

  controlPid(slot: number): number | undefined {
    return this.m(slot).proc?.pid;
  }

  async crash(slot: number): Promise<number> {
    const at = Date.now();
    await this.lab.stop(this.m(slot), 'SIGKILL');
    return at;
  }

  restart(slot: number): Promise<void> {
    return this.lab.start(this.m(slot));
  }

  async die(slot: number): Promise<number> {
    const n = this.d.nodes[slot - 1] as DNode;
    const pids = await this.d.containerPids(n);
    const m = this.m(slot);
    m.dead = true;
    return this.d.death(n, pids);
  }

  async revive(slot: number): Promise<void> {
    const m = this.m(slot);
    await this.lab.stop(m, 'SIGKILL');
    await this.d.revive(this.d.nodes[slot - 1] as DNode);
    m.dead = false;
    await this.lab.start(m);
  }

  /** The fastest node health allowed (suspect 1 s, down 3 s), each node restarted gracefully in turn. */
  async tune(): Promise<string> {
    for (const m of this.lab.machines) {
      const file = path.join(m.dir, 'shoal.yaml');
      const config = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      writeFileSync(file, stringify({ ...config, control: { suspectAfterMs: 1_000, downAfterMs: 3_000 } }));
      await this.lab.stop(m, 'SIGTERM');
      await this.lab.start(m);
      await waitFor('a leader after a restart', async () => (await this.leader()) !== undefined);
    }
    return 'control.suspectAfterMs 1 s and control.downAfterMs 3 s (defaults 1.5 s and 4 s; 3 s is the least allowed)';
  }

  stateBytes(slot: number): number {
    // The node's data directory less its TLS material: the store (log, snapshots) and its files.
    return this.d.duBytes(this.m(slot).dir) - this.d.duBytes(path.join(this.m(slot).dir, 'tls'));
  }

  async destroy(): Promise<void> {
    for (const m of this.lab.machines) m.proc?.kill('SIGKILL');
    await this.d.destroy();
    await this.lab.destroy();
  }
}

// ---------------------------------------------------------------- helpers

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = waitMaxMs, everyMs = pollMs): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    if (await probe().catch(() => false)) return Date.now();
    if (Date.now() - t0 > timeoutMs) throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

function wantedOf(sys: System, w: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(w).map(([k, v]) => [sys.svc(k), v]));
}

/** Waits until every service runs its wanted count, no slot twice; returns when (ms since the epoch). */
function converged(sys: System, w: Record<string, number>, what = 'convergence'): Promise<number> {
  return waitFor(`${sys.kind}: ${what}`, async () => convergedNow(sys.d.timeline, wantedOf(sys, w)));
}

/** The non-leader node running the most containers. */
async function busyFollower(sys: System): Promise<number> {
  const leader = await sys.leader();
  const counts = sys.d.nodes.filter((n) => n.slot !== leader).map((n) => ({ slot: n.slot, c: sys.d.timeline.running().filter((r) => r.daemon === n.name).length }));
  counts.sort((a, b) => b.c - a.c);
  return (counts[0] as { slot: number }).slot;
}

interface Usage {
  cpuMs: number[];
  rssMiB: number[];
}

function usageStart(pids: Array<number | undefined>): () => Usage {
  const c0 = pids.map((p) => (p === undefined ? Number.NaN : cpuMs(p)));
  return () => ({
    cpuMs: pids.map((p, i) => (p === undefined ? Number.NaN : cpuMs(p) - (c0[i] as number))),
    rssMiB: pids.map((p) => { try { return p === undefined ? Number.NaN : rssMiB(p); } catch { return Number.NaN; } }),
  });
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

// ---------------------------------------------------------------- figures

interface Results {
  deployMs: Record<Kind, number[]>;
  scaleUpMs: Record<Kind, number[]>;
  scaleDownMs: Record<Kind, number[]>;
  scaleFirstMs: Record<Kind, number[]>;
  updateDoneMs: Record<Kind, number[]>;
  updateReplacedMs: Record<Kind, number[]>;
  updateBelowMs: Record<Kind, number[]>;
  leaderMs: Record<Kind, number[]>;
  leaderRestarted: Record<Kind, number[]>;
  leaderChangeMs: Record<Kind, number[]>;
  deathDownMs: Record<string, number[]>;
  deathElsewhereMs: Record<string, number[]>;
  deathDuplicates: Record<string, number[]>;
  drainMs: Record<Kind, number[]>;
  partDuplicates: Record<Kind, number[]>;
  partStoppedAfterHeal: Record<Kind, number[]>;
  partStartedAfterHeal: Record<Kind, number[]>;
  partConvergeMs: Record<Kind, number[]>;
  idle: Record<string, Usage>;
  converging: Record<string, number[]>;
  stateBytes: Record<Kind, number[]>;
  notes: string[];
  tuning: Record<Kind, string>;
}

function emptyResults(): Results {
  const k = (): Record<Kind, number[]> => ({ shoal: [], swarm: [] });
  return {
    deployMs: k(), scaleUpMs: k(), scaleDownMs: k(), scaleFirstMs: k(), updateDoneMs: k(), updateReplacedMs: k(), updateBelowMs: k(), leaderMs: k(), leaderRestarted: k(),
    leaderChangeMs: k(), deathDownMs: {}, deathElsewhereMs: {}, deathDuplicates: {}, drainMs: k(), partDuplicates: k(), partStoppedAfterHeal: k(),
    partStartedAfterHeal: k(), partConvergeMs: k(), idle: {}, converging: {}, stateBytes: k(), notes: [], tuning: { shoal: '', swarm: '' },
  };
}

const push = (rec: Record<string, number[]>, key: string, v: number): void => { (rec[key] ??= []).push(v); };

/** Every round's line, for the report's record of the rounds. */
const roundLines: string[] = [];

function log(line: string): void {
  const l = `${new Date().toISOString().slice(11, 19)} ${line}`;
  roundLines.push(l);
  console.log(l);
}

async function fig1Deploy(sys: System, res: Results, last: boolean): Promise<void> {
  const t0 = Date.now();
  await sys.deploy();
  const t1 = await converged(sys, initial, 'the stack running');
  res.deployMs[sys.kind].push(t1 - t0);
  log(`${sys.kind} deploy: ${t1 - t0} ms`);
  if (!last) {
    await sys.remove();
    await waitFor(`${sys.kind}: every container gone`, async () => sys.d.timeline.running().length === 0);
  }
}

async function fig2Scale(sys: System, res: Results): Promise<void> {
  const pids = sys.d.nodes.map((n) => sys.controlPid(n.slot));
  const dpids = sys.d.nodes.map((n) => sys.d.pid(n));
  const u = usageStart(pids);
  const ud = usageStart(dpids);
  const t0 = Date.now();
  await sys.scale('c', 20);
  const t1 = await converged(sys, { ...initial, c: 20 }, 'c at 20');
  await sys.scale('c', 5);
  const t2 = await converged(sys, initial, 'c back at 5');
  res.scaleUpMs[sys.kind].push(t1 - t0);
  // Where the time goes: from the request to the first new container running (the control plane's answer), and the starts' spread after it (the daemons').
  const firstStart = Math.min(...sys.d.timeline.runs.filter((r) => r.service === sys.svc('c') && r.start >= t0 && r.start <= t1).map((r) => r.start));
  res.scaleFirstMs[sys.kind].push(firstStart - t0);
  res.scaleDownMs[sys.kind].push(t2 - t1);
  const cpu = sum(u().cpuMs) / 3;
  const dcpu = sum(ud().cpuMs) / 3;
  push(res.converging, `${sys.kind}-control`, cpu);
  push(res.converging, `${sys.kind}-dockerd`, dcpu);
  log(`${sys.kind} scale: up ${t1 - t0} ms (first new container running at ${firstStart - t0} ms), down ${t2 - t1} ms; control CPU ${Math.round(cpu)} ms/node, dockerd ${Math.round(dcpu)} ms/node`);
}

async function fig3Update(sys: System, res: Results, round: number): Promise<void> {
  const want = { ...initial, c: 6 };
  const t0 = Date.now();
  await sys.update('c', round);
  const svc = sys.svc('c');
  const tReplaced = await converged(sys, want, 'c updated').then(() => waitFor(`${sys.kind}: every c task replaced`, async () => {
    const runs = sys.d.timeline.running(svc);
    return runs.length === 6 && runs.every((r) => r.start >= t0) && convergedNow(sys.d.timeline, wantedOf(sys, want));
  }));
  const tDone = await waitFor(`${sys.kind}: the update reported complete`, () => sys.updateCompleted('c'), waitMaxMs, 250);
  const below = msBelow(sys.d.timeline.runs, svc, 6, t0, tReplaced);
  res.updateReplacedMs[sys.kind].push(tReplaced - t0);
  res.updateDoneMs[sys.kind].push(tDone - t0);
  res.updateBelowMs[sys.kind].push(below);
  log(`${sys.kind} update: replaced ${tReplaced - t0} ms, reported done ${tDone - t0} ms, below 6 for ${Math.round(below)} ms`);
}

async function fig4Leader(sys: System, res: Results, aReplicas: number): Promise<void> {
  const want = { ...initial, c: 5, a: aReplicas };
  const before = await sys.d.runningIds();
  const leader = await sys.leader();
  if (leader === undefined) throw new Error(`${sys.kind}: no leader`);
  const t0 = await sys.crash(leader);
  const restarted = sleep(restartAfterMs).then(() => sys.restart(leader));
  let tLeader = Number.NaN;
  const leaderWatch = waitFor(`${sys.kind}: a new leader`, async () => {
    const l = await sys.leader();
    if (l !== undefined && l !== leader) { tLeader = Date.now(); return true; }
    return false;
  }).catch(() => undefined);
  await waitFor(`${sys.kind}: the scale accepted`, async () => { await sys.scale('a', aReplicas); return true; }, waitMaxMs, 200);
  const tConv = await converged(sys, want, 'a scaled after the leader kill');
  await restarted;
  await leaderWatch;
  await waitFor(`${sys.kind}: the old leader's node ready`, async () => (await sys.nodeState(leader)) === 'ready');
  // Let the restarted node settle (Swarm's daemon removes what it found running when it restarts).
  await sleep(5_000);
  await converged(sys, want, 'settled after the leader kill');
  const after = await sys.d.runningIds();
  const gone = [...before].filter((id) => !after.has(id)).length;
  res.leaderMs[sys.kind].push(tLeader - t0);
  res.leaderChangeMs[sys.kind].push(tConv - t0);
  res.leaderRestarted[sys.kind].push(gone);
  log(`${sys.kind} leader kill (n${leader}): new leader ${tLeader - t0} ms, change converged ${tConv - t0} ms, containers restarted ${gone}`);
}

async function fig5Death(sys: System, res: Results, tuning: string): Promise<void> {
  const victim = await busyFollower(sys);
  const key = `${sys.kind}-${tuning}`;
  const t0 = await sys.die(victim);
  let tDown = Number.NaN;
  let tElse = Number.NaN;
  await waitFor(`${sys.kind}: n${victim} down and its tasks elsewhere`, async () => {
    if (Number.isNaN(tDown) && (await sys.nodeState(victim)) === 'down') tDown = Date.now();
    if (Number.isNaN(tElse) && convergedNow(sys.d.timeline, wantedOf(sys, initial))) tElse = Date.now();
    return !Number.isNaN(tDown) && !Number.isNaN(tElse);
  });
  const dup = duplicates(sys.d.timeline.runs, t0, Math.max(tDown, tElse));
  push(res.deathDownMs, key, tDown - t0);
  push(res.deathElsewhereMs, key, tElse - t0);
  push(res.deathDuplicates, key, dup.count);
  log(`${sys.kind} death (${tuning}) of n${victim}: down ${tDown - t0} ms, tasks elsewhere ${tElse - t0} ms, duplicates ${dup.count}`);
  await sys.revive(victim);
  await waitFor(`${sys.kind}: n${victim} ready again`, async () => (await sys.nodeState(victim)) === 'ready');
  await converged(sys, initial, 'after the revive');
}

async function fig6Drain(sys: System, res: Results): Promise<void> {
  const victim = await busyFollower(sys);
  const name = `n${victim}`;
  const t0 = Date.now();
  await sys.availability(victim, 'drain');
  const t1 = await waitFor(`${sys.kind}: ${name} drained`, async () => convergedNow(sys.d.timeline, wantedOf(sys, initial)) && !sys.d.timeline.running().some((r) => r.daemon === name));
  res.drainMs[sys.kind].push(t1 - t0);
  log(`${sys.kind} drain of ${name}: ${t1 - t0} ms`);
  await sys.availability(victim, 'active');
}

async function fig7Partition(sys: System, res: Results): Promise<void> {
  const victim = await busyFollower(sys);
  const t0 = Date.now();
  await sys.d.net.setCuts(cutsBetween([victim], sys.d.nodes.map((n) => n.slot).filter((s) => s !== victim)));
  await sleep(partitionMs);
  await sys.d.net.heal();
  const tHeal = Date.now();
  const tConv = await converged(sys, initial, 'after the heal');
  // Changes the heal sets off may come a little later (a node reconnecting, its agent told): watch 10 s more.
  await sleep(10_000);
  const tEnd = await converged(sys, initial, 'settled after the heal');
  const dup = duplicates(sys.d.timeline.runs, t0, tEnd);
  const stopped = sys.d.timeline.endedWithin(tHeal, tEnd).length;
  const started = sys.d.timeline.runs.filter((r) => r.start >= tHeal && r.start < tEnd).length;
  res.partDuplicates[sys.kind].push(dup.count);
  res.partStoppedAfterHeal[sys.kind].push(stopped);
  res.partStartedAfterHeal[sys.kind].push(started);
  res.partConvergeMs[sys.kind].push(tConv - tHeal);
  log(`${sys.kind} partition of n${victim}: duplicates ${dup.count} (${dup.slots.join(' ')}), after the heal ${stopped} stopped, ${started} started, converged ${tConv - tHeal} ms after`);
}

async function fig8Idle(shoal: ShoalSystem, swarm: SwarmSystem, res: Results, seconds: number): Promise<void> {
  const probes = {
    'shoal-control': usageStart(shoal.d.nodes.map((n) => shoal.controlPid(n.slot))),
    'shoal-dockerd': usageStart(shoal.d.nodes.map((n) => shoal.d.pid(n))),
    'swarm-dockerd': usageStart(swarm.d.nodes.map((n) => swarm.d.pid(n))),
  };
  await sleep(seconds * 1000);
  for (const [k, f] of Object.entries(probes)) {
    const u = f();
    res.idle[k] = { cpuMs: u.cpuMs.map((c) => c / seconds / 10), rssMiB: u.rssMiB };
  }
}

// ---------------------------------------------------------------- what bounds shoal where it is behind

/** VmRSS, RssAnon and RssFile of a process, MiB. */
function rssParts(pid: number): { rss: number; anon: number; file: number } {
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(st)?.[1] ?? Number.NaN) / 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/**
 * The shoal lab alone (no Swarm), to measure what bounds the figures where shoal is behind:
 * memory (a bare Node process beside shoal, anonymous and file-backed RSS), CPU (V8 CPU profiles
 * of the three nodes, idle and over scale rounds; idle CPU again with Raft at Swarm's timing:
 * heartbeat 1 s, election 10 s) and the rolling update (again with `update.monitor: 0s`).
 */
async function boundsRun(write: boolean, keepLogs: boolean): Promise<void> {
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-swarm-bounds-'));
  const repo = new URL('..', import.meta.url).pathname;
  const built = spawnSync(process.execPath, ['scripts/bundle.mjs', 'dist'], { cwd: repo, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`npm run build failed: ${built.stderr}`);
  const out: string[] = [];
  const note = (l: string): void => { log(l); out.push(`- ${l}`); };
  let shoal: ShoalSystem | undefined;
  let registry: Registry | undefined;
  let bare: import('node:child_process').ChildProcess | undefined;
  try {
    const shLab = await MachineLab.create({ machines: 3, runDir: path.join(runDir, 'shoal'), runtime: 'docker' });
    const reg = `${shLab.lab.hostIp}:${registryPort}`;
    registry = await Registry.start(runDir, [shLab.lab.hostIp]);
    const shD = new Dockerds(shLab.lab, path.join(runDir, 'shoal'), 'shsh', [reg]);
    shoal = new ShoalSystem(shD, shLab, `${reg}/bench/busybox:1`);
    await shD.startAll();
    await pushImage(shD, shoal.image);
    for (const n of shD.nodes) await shD.cliOk(n, ['pull', shoal.image]);
    const setConfig = (extra: Record<string, unknown>): void => {
      for (const m of shLab.machines) {
        const file = path.join(m.dir, 'shoal.yaml');
        const config = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
        writeFileSync(file, stringify({ ...config, runtime: { kind: 'docker', dockerSocket: (shD.nodes[m.slot - 1] as DNode).socket }, ...extra }));
      }
    };
    const sys = shoal;
    const startAll = async (): Promise<void> => {
      await Promise.all(shLab.machines.map((m) => shLab.start(m)));
      await waitFor('a shoal leader', async () => (await sys.leader()) !== undefined);
    };
    const stopAll = async (): Promise<void> => {
      await Promise.all(shLab.machines.map((m) => shLab.stop(m, 'SIGTERM')));
    };
    setConfig({});
    await startAll();
    await waitFor('every shoal node registered', async () => {
      const r = await shLab.api('GET', '/v1/nodes?consistency=stale');
      return r.kind === 'answer' && r.status === 200 && (r.body as { items: unknown[] }).items.length === 3;
    });
    await sys.deploy();
    await converged(sys, initial, 'the stack running');
    // Memory: shoal beside a bare Node process of the same binary.
    bare = (await import('node:child_process')).spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    await sleep(15_000);
    const parts = shLab.machines.map((m) => rssParts(m.proc?.pid as number));
    const bareParts = rssParts(bare.pid as number);
    note(`memory, MiB: shoal RSS ${parts.map((p) => p.rss.toFixed(0)).join(' / ')} (anonymous ${parts.map((p) => p.anon.toFixed(0)).join(' / ')}, file-backed ${parts.map((p) => p.file.toFixed(0)).join(' / ')}); `
      + `a bare \`node -e 'setInterval(...)'\` of the same binary: RSS ${bareParts.rss.toFixed(0)} (anonymous ${bareParts.anon.toFixed(0)}, file-backed ${bareParts.file.toFixed(0)})`);
    bare.kill('SIGKILL');
    bare = undefined;
    // The rolling update with the default monitor (5 s) and with none.
    for (const monitor of ['5s', '0s']) {
      await sys.scale('c', 6);
      await converged(sys, { ...initial, c: 6 }, 'c at 6');
      // Every deploy of the stack from here on (each update of the rounds too) keeps this monitor:
      // an earlier version set it once and the rounds' applies put the default back.
      sys.updateMonitor = monitor;
      await sys.deployStack();
      await waitFor('c converged', async () => ((await shLab.api('GET', `/v1/services/${sys.svc('c')}`)) as { body?: { service?: { status?: { converged?: boolean } } } }).body?.service?.status?.converged === true);
      const spec = await shLab.api('GET', `/v1/services/${sys.svc('c')}`);
      note(`update policy in force: ${JSON.stringify((spec as { body?: { service?: { record?: { spec?: { update?: unknown } } } } }).body?.service?.record?.spec?.update)}`);
      const res = emptyResults();
      for (let r = 1; r <= 2; r++) await fig3Update(sys, res, r + (monitor === '0s' ? 10 : 0));
      note(`rolling update with update.monitor ${monitor}: replaced ${cell(res.updateReplacedMs.shoal)} ms, reported complete ${cell(res.updateDoneMs.shoal)} ms, fewer than 6 running ${cell(res.updateBelowMs.shoal)} ms (2 rounds)`);
    }
    sys.updateMonitor = undefined;
    await sys.scale('c', 5);
    await converged(sys, initial, 'c back at 5');
    // CPU: profiles of the three nodes, idle 20 s and then two scale rounds, each its own process lifetime.
    for (const phase of ['idle', 'scale'] as const) {
      const dir = path.join(runDir, `prof-${phase}`);
      await stopAll();
      // --cpu-prof is refused in NODE_OPTIONS: a preloaded module takes the profile instead (bench/lib/cpu-prof-preload.mjs).
      process.env.NODE_OPTIONS = `--import ${path.join(repo, 'bench/lib/cpu-prof-preload.mjs')}`;
      process.env.SHOAL_PROF_DIR = dir;
      await startAll();
      delete process.env.NODE_OPTIONS;
      delete process.env.SHOAL_PROF_DIR;
      await sleep(5_000);
      const u = usageStart(shLab.machines.map((m) => m.proc?.pid));
      if (phase === 'idle') await sleep(20_000);
      else for (let r = 0; r < 2; r++) await fig2Scale(sys, emptyResults());
      const cpu = u().cpuMs;
      await stopAll();
      const summary = spawnSync(process.execPath, ['--import', 'tsx', 'bench/cpu-profile-summary.ts', dir, '--top', '8', '--skip-s', '5'], { cwd: repo, encoding: 'utf8' });
      note(`CPU ${phase}: ${cpu.map((c) => Math.round(c)).join(' / ')} ms per node over the ${phase === 'idle' ? '20 s' : 'two scale rounds'}; the profile of each node (first 5 s left out):`);
      out.push('', '```', summary.stdout.split('\n').filter((l) => !l.startsWith('-- inclusive') && l.trim() !== '').slice(0, 80).join('\n'), '```', '');
    }
    // Idle CPU with Raft at Swarm's timing (tick 1 s, heartbeat 1 tick, election 10 ticks).
    setConfig({ raft: { tickMs: 100, heartbeatIntervalMs: 1_000, electionTimeoutMs: 10_000 }, exclusive: { leaseMs: 30_000 } });
    await startAll();
    await sleep(5_000);
    const u = usageStart(shLab.machines.map((m) => m.proc?.pid));
    await sleep(20_000);
    note(`idle CPU with Raft at Swarm's timing (heartbeat 1 s, election 10 s): ${u().cpuMs.map((c) => (c / 200).toFixed(2)).join(' / ')} % of a core per node (20 s)`);
  } finally {
    bare?.kill('SIGKILL');
    delete process.env.NODE_OPTIONS;
    delete process.env.SHOAL_PROF_DIR;
    await shoal?.destroy().catch((e: unknown) => console.error(`shoal teardown: ${String(e)}`));
    await registry?.stop().catch(() => undefined);
    if (!keepLogs) rmSync(runDir, { recursive: true, force: true });
  }
  const text = [
    '### What bounds shoal where it is behind Swarm (`npm run bench:swarm -- --bounds --write`: the shoal lab alone)',
    '',
    `Date: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; same machine and build as the table above.`,
    '',
    ...out,
  ].join('\n');
  console.log(text);
  if (write) writeNamedSection('swarm-bounds', text);
}

// ---------------------------------------------------------------- the run

function versions(): { docker: string; shoal: string; registry: string } {
  const docker = spawnSync('dockerd', ['--version'], { encoding: 'utf8' }).stdout.trim();
  const registry = spawnSync('dpkg-query', ['-W', '-f', '${Version}', 'docker-registry'], { encoding: 'utf8' }).stdout.trim();
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
  return { docker, shoal: `${pkg.version} (${commit})`, registry };
}

async function pushImage(d: Dockerds, ref: string): Promise<void> {
  // The busybox test image, made on the host's daemon, loaded into the first lab daemon, pushed to the registry from there.
  await ensureTestImage();
  const [first] = d.nodes as [DNode];
  const save = spawnSync('sh', ['-c', `docker save ${testImage} | docker -H unix://${first.socket} load`], { encoding: 'utf8' });
  if (save.status !== 0) throw new Error(`docker save | load: ${save.stderr}`);
  await d.cliOk(first, ['tag', testImage, ref]);
  await d.cliOk(first, ['push', ref]);
}

async function main(): Promise<void> {
  // Two labs at once (shoal's and Swarm's): a new one must not remove the other.
  keepOwnLiveLabs();
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' }, write: { type: 'boolean', default: false }, only: { type: 'string', default: '1,2,3,4,5,6,7,8' },
      'keep-logs': { type: 'boolean', default: false }, bounds: { type: 'boolean', default: false },
      'from-json': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log('usage: npm run bench:swarm -- [--rounds 3] [--only 1,2,...,8] [--write] [--keep-logs] | --bounds [--write] | --from-json bench/swarm-results.json [--write]   (root; flock /tmp/shoal-heavy.lock)');
    return;
  }
  if (process.getuid?.() !== 0) throw new Error('bench:swarm needs root (namespaces, daemons, iptables)');
  if (values['from-json'] !== undefined) {
    const saved = JSON.parse(readFileSync(values['from-json'], 'utf8')) as { res: Results; info: RunInfo; roundLines: string[] };
    const text = report(saved.res, saved.info, saved.roundLines);
    console.log(text);
    if (values.write) writeNamedSection('swarm', text);
    return;
  }
  if (values.bounds) {
    await boundsRun(values.write, values['keep-logs']);
    return;
  }
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a whole number ≥ 1, not ${values.rounds}`);
  const only = new Set(values.only.split(',').map(Number));
  const started = Date.now();
  // shoal as installed: the bundle `npm ci` builds (bin/shoal.js runs it when it is fresh), not the sources through tsx.
  const built = spawnSync(process.execPath, ['scripts/bundle.mjs', 'dist'], { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`npm run build failed: ${built.stderr}`);
  const load0 = os.loadavg()[0] ?? 0;
  const jiffies0 = machineJiffies();
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'shoal-swarm-'));
  const res = emptyResults();
  let swarm: SwarmSystem | undefined;
  let shoal: ShoalSystem | undefined;
  let registry: Registry | undefined;
  const onSignal = (): void => { void cleanup().finally(() => process.exit(130)); };
  const cleanup = async (): Promise<void> => {
    await swarm?.destroy().catch((e: unknown) => console.error(`swarm teardown: ${String(e)}`));
    await shoal?.destroy().catch((e: unknown) => console.error(`shoal teardown: ${String(e)}`));
    await registry?.stop().catch(() => undefined);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // Swarm's lab: namespaces and daemons (no swarm mode yet).
    const swNet = await NetLab.create(3);
    const shLab = await MachineLab.create({ machines: 3, runDir: path.join(runDir, 'shoal'), runtime: 'docker' });
    const regs = [`${swNet.hostIp}:${registryPort}`, `${shLab.lab.hostIp}:${registryPort}`];
    registry = await Registry.start(runDir, [swNet.hostIp, shLab.lab.hostIp]);
    const swD = new Dockerds(swNet, path.join(runDir, 'swarm'), 'shsw', regs);
    swarm = new SwarmSystem(swD, `${regs[0]}/bench/busybox:1`, path.join(runDir, 'swarm'));
    const shD = new Dockerds(shLab.lab, path.join(runDir, 'shoal'), 'shsh', regs);
    shoal = new ShoalSystem(shD, shLab, `${regs[1]}/bench/busybox:1`);
    await swD.startAll();
    await shD.startAll();
    await pushImage(swD, swarm.image);
    for (const n of swD.nodes) await swD.cliOk(n, ['pull', swarm.image]);
    for (const n of shD.nodes) await shD.cliOk(n, ['pull', shoal.image]);
    log('daemons up, image in the registry and on every daemon');
    // dockerd idle without swarm mode, before `swarm init`: the baseline of figure 8.
    const base = usageStart(swD.nodes.map((n) => swD.pid(n)));
    await sleep(10_000);
    const b = base();
    res.idle['swarm-dockerd-before-init'] = { cpuMs: b.cpuMs.map((c) => c / 10 / 10), rssMiB: b.rssMiB };
    await swarm.form();
    log('swarm formed');
    for (const m of shLab.machines) {
      const file = path.join(m.dir, 'shoal.yaml');
      const config = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      writeFileSync(file, stringify({ ...config, runtime: { kind: 'docker', dockerSocket: (shD.nodes[m.slot - 1] as DNode).socket } }));
    }
    await Promise.all(shLab.machines.map((m) => shLab.start(m)));
    await waitFor('a shoal leader', async () => (await shoal?.leader()) !== undefined);
    await waitFor('every shoal node registered', async () => {
      const r = await shLab.api('GET', '/v1/nodes?consistency=stale');
      return r.kind === 'answer' && r.status === 200 && (r.body as { items: unknown[] }).items.length === 3;
    });
    log('shoal formed');
    const both = (r: number): System[] => (r % 2 === 0 ? [shoal as System, swarm as System] : [swarm as System, shoal as System]);

    if (only.has(1)) for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig1Deploy(s, res, r === rounds - 1);
    else for (const s of both(0)) await fig1Deploy(s, res, true);
    if (only.has(8)) {
      await sleep(5_000);
      await fig8Idle(shoal, swarm, res, 20);
      log(`idle: ${JSON.stringify(res.idle)}`);
    }
    if (only.has(2)) for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig2Scale(s, res);
    if (only.has(3)) {
      for (const s of both(0)) {
        await s.scale('c', 6);
        await converged(s, { ...initial, c: 6 }, 'c at 6');
      }
      for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig3Update(s, res, r + 1);
      for (const s of both(0)) {
        await s.scale('c', 5);
        await converged(s, initial, 'c back at 5');
      }
    }
    if (only.has(4)) {
      for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig4Leader(s, res, 2 + r);
      for (const s of both(0)) {
        await s.scale('a', 1);
        await converged(s, initial, 'a back at 1');
      }
    }
    if (only.has(5)) for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig5Death(s, res, 'default');
    if (only.has(6)) for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig6Drain(s, res);
    if (only.has(7)) for (let r = 0; r < rounds; r++) await Promise.all(both(r).map((s) => fig7Partition(s, res)));
    if (only.has(8)) for (const s of both(0)) res.stateBytes[s.kind] = s.d.nodes.map((n) => s.stateBytes(n.slot));
    if (only.has(5)) {
      res.tuning.swarm = await swarm.tune();
      res.tuning.shoal = await shoal.tune();
      log(`tuned: swarm ${res.tuning.swarm}; shoal ${res.tuning.shoal}`);
      for (let r = 0; r < rounds; r++) for (const s of both(r)) await fig5Death(s, res, 'tuned');
    }
  } finally {
    const t = Date.now();
    await cleanup();
    log(`teardown ${Date.now() - t} ms`);
  }
  const leftovers = leftoversAfter(runDir);
  const jiffies1 = machineJiffies();
  const busy = (100 * (jiffies1.busy - jiffies0.busy)) / Math.max(1, jiffies1.total - jiffies0.total);
  const info: RunInfo = { rounds, minutes: (Date.now() - started) / 60_000, load0, load1: os.loadavg()[0] ?? 0, busy, leftovers, ...versions(), date: new Date().toISOString() };
  const text = report(res, info, roundLines);
  if (values.write) writeFileSync(resultsJson, `${JSON.stringify({ res, info, roundLines }, null, 1)}\n`);
  console.log(text);
  if (values.write) writeNamedSection('swarm', text);
  // The run's logs (dockerd, shoal, registry) stay only when asked for: the data roots are gone already.
  if (values['keep-logs']) console.log(`logs kept in ${runDir}`);
  else rmSync(runDir, { recursive: true, force: true });
}

/** What the run may have left on the machine: namespaces, bridges, veths, daemons, mounts, iptables rules. */
function leftoversAfter(runDir: string): string[] {
  const out: string[] = [];
  const q = (cmd: string, args: string[]): string => spawnSync(cmd, args, { encoding: 'utf8' }).stdout ?? '';
  const ns = q('ip', ['netns', 'list']).split('\n').filter((l) => l.startsWith('shoal-'));
  if (ns.length > 0) out.push(`namespaces: ${ns.join(', ')}`);
  const links = q('ip', ['-o', 'link', 'show']).split('\n').filter((l) => /: shoal(br)?\d+/.test(l));
  if (links.length > 0) out.push(`links: ${links.length}`);
  const procs = q('pgrep', ['-af', 'exec-root /run/shs']).trim();
  if (procs !== '') out.push(`daemons: ${procs}`);
  const mounts = mountsUnder([runDir, '/run/shsw', '/run/shsh']).concat(q('findmnt', ['-rn', '-o', 'TARGET']).split('\n').filter((m) => /^\/run\/shs[wh]\d/.test(m)));
  if (mounts.length > 0) out.push(`mounts: ${mounts.length}`);
  const rules = q('iptables', ['-w', '5', '-S']).split('\n').filter((l) => l.includes('shoal-fault-lab'));
  if (rules.length > 0) out.push(`iptables rules: ${rules.length}`);
  return out;
}

interface RunInfo {
  rounds: number;
  minutes: number;
  load0: number;
  load1: number;
  /** % of the machine's CPU time busy over the run (everything on it, the run included). */
  busy: number;
  leftovers: string[];
  docker: string;
  shoal: string;
  registry: string;
  /** When the run ended (ISO). */
  date: string;
}

function row(what: string, shoal: number[], swarm: number[], digits = 0): string {
  return `| ${what} | ${cell(shoal, digits)} | ${cell(swarm, digits)} | ${ratioCell(shoal, swarm)} |`;
}

function report(res: Results, run: RunInfo, rounds: readonly string[]): string {
  const s = (k: string): number[] => res.deathDownMs[k] ?? [];
  const e = (k: string): number[] => res.deathElsewhereMs[k] ?? [];
  const dd = (k: string): number[] => res.deathDuplicates[k] ?? [];
  const idle = (k: string): Usage => res.idle[k] ?? { cpuMs: [], rssMiB: [] };
  const added = (f: (u: Usage) => number[]): number[] => f(idle('swarm-dockerd')).map((v, i) => v - (f(idle('shoal-dockerd'))[i] ?? Number.NaN));
  const conv = (k: string): number[] => res.converging[k] ?? [];
  // While converging, shoal's own calls make its dockerd work too: the whole of shoal's side (its process and its dockerd) against Swarm's dockerd.
  const convTotal = conv('shoal-control').map((v, i) => v + (conv('shoal-dockerd')[i] ?? Number.NaN));
  const mib = (xs: number[]): number[] => xs.map((x) => x / 2 ** 20);
  const lines = [
    '## shoal beside Docker Swarm (issue 44): three nodes each, the same work, one run',
    '',
    `Command: \`flock /tmp/shoal-heavy.lock npm run bench:swarm -- --rounds ${run.rounds} --write\` (root), ${fmtNum(run.minutes, 1)} min end to end, lab built and removed.`,
    `Date: ${run.date.slice(0, 16).replace('T', ' ')} UTC`,
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? 'unknown'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, Node ${process.version}; 1-minute load average ${run.load0.toFixed(1)} at the start, ${run.load1.toFixed(1)} at the end; the machine's CPU was ${run.busy.toFixed(0)} % busy over the run (the run included).`,
    `Versions: ${run.docker} (Debian docker.io, Swarm mode built in), shoal ${run.shoal}, docker-registry ${run.registry}.`,
    `Left on the machine afterwards: ${run.leftovers.length === 0 ? 'nothing (no namespace, bridge, veth, daemon, mount or iptables rule of the lab)' : run.leftovers.join('; ')}.`,
    '',
    'Two labs of three network namespaces on a bridge, a Docker daemon in each namespace (its own data root, vfs storage, its own iptables), one local registry (Debian\'s',
    '`docker-registry`) on each bridge serving one store: both systems pull the same busybox image from it. **Swarm**: three managers, each also a worker, `docker swarm init`/`join` with the',
    'defaults; a stack of three services from one compose file (`docker stack deploy`), on the stack\'s default overlay network. **shoal**: three `shoal serve` nodes with the Docker runtime on',
    'their namespace\'s daemon, the same stack deployed from the same compose file (`POST /v1/stacks/bench/deploy`: what `shoal stack deploy` sends) with `network_mode: bridge` added to each service, so its tasks are on each daemon\'s default bridge: without it a stack\'s services join its default network, an overlay over the mesh, which this lab does not run (Swarm\'s stack does make its overlay: work shoal is spared here).',
    'Services: `a` 1 replica, `b` 3, `c` 5 (update parallelism 2), each `sleep 3600` with a stop grace period of 1 s. **No IPVS in this kernel**: Swarm\'s routing mesh and its default',
    'per-service virtual IP cannot run, so its services use `endpoint_mode: dnsrr` and publish no port; published-port traffic is not measured.',
    '',
    'Every time is read the same way for both systems from the daemons\' container events (which container of which service and slot ran on which daemon, when): "converged" is every',
    'service running its wanted count of containers, no slot twice. Leader, node down and update done are each system\'s own word (Swarm\'s `GET /nodes`, `UpdateStatus`; shoal\'s',
    '`/healthz`, node record, `updateStatus`), polled every 100 ms. Rounds alternate which system goes first; the partitions of figure 7 ran for both systems at once (the 60 s wait is idle).',
    `Median (range) over ${run.rounds} rounds; ratio = shoal / Swarm of the medians (below 1: shoal faster or smaller).`,
    '',
    '| figure | shoal | Swarm | shoal/Swarm |',
    '|---|---:|---:|---:|',
    row('1. deploy the stack (3 services, 9 tasks) until every task runs, ms', res.deployMs.shoal, res.deployMs.swarm),
    row('2. scale 5 → 20 until converged, ms', res.scaleUpMs.shoal, res.scaleUpMs.swarm),
    row('2. … of which until the first new container runs, ms', res.scaleFirstMs?.shoal ?? [], res.scaleFirstMs?.swarm ?? []),
    row('2. scale 20 → 5 until converged, ms', res.scaleDownMs.shoal, res.scaleDownMs.swarm),
    row('3. rolling update of 6 replicas, parallelism 2: every task replaced, ms', res.updateReplacedMs.shoal, res.updateReplacedMs.swarm),
    row('3. … until the system reports the update complete, ms', res.updateDoneMs.shoal, res.updateDoneMs.swarm),
    row('3. … time with fewer than 6 running, ms', res.updateBelowMs.shoal, res.updateBelowMs.swarm),
    row('4. leader kill -9: time to a new leader, ms', res.leaderMs.shoal, res.leaderMs.swarm),
    row('4. … containers restarted (0 expected)', res.leaderRestarted.shoal, res.leaderRestarted.swarm),
    row('4. … until a change (scale) is accepted and converged, ms', res.leaderChangeMs.shoal, res.leaderChangeMs.swarm),
    row('5. node death, defaults: declared down, ms', s('shoal-default'), s('swarm-default')),
    row('5. … its tasks running elsewhere, ms', e('shoal-default'), e('swarm-default')),
    row('5. … duplicate containers of a slot meanwhile', dd('shoal-default'), dd('swarm-default')),
    row('5. node death, tuned: declared down, ms', s('shoal-tuned'), s('swarm-tuned')),
    row('5. … its tasks running elsewhere, ms', e('shoal-tuned'), e('swarm-tuned')),
    row('5. … duplicate containers of a slot meanwhile', dd('shoal-tuned'), dd('swarm-tuned')),
    row('6. drain a node until its tasks run elsewhere, ms', res.drainMs.shoal, res.drainMs.swarm),
    row('7. partition 60 s: slots running twice at once', res.partDuplicates.shoal, res.partDuplicates.swarm),
    row('7. … containers stopped after the heal', res.partStoppedAfterHeal.shoal, res.partStoppedAfterHeal.swarm),
    row('7. … containers started after the heal', res.partStartedAfterHeal.shoal, res.partStartedAfterHeal.swarm),
    row('7. … heal → converged, ms', res.partConvergeMs.shoal, res.partConvergeMs.swarm),
    row('8. idle RSS per node, MiB: shoal process vs what Swarm mode adds to dockerd', idle('shoal-control').rssMiB, added((u) => u.rssMiB)),
    row('8. idle CPU per node, % of a core: shoal vs what Swarm mode adds', idle('shoal-control').cpuMs, added((u) => u.cpuMs), 2),
    row('8. CPU per node over one scale 5 → 20 → 5, ms: shoal and its dockerd vs the Swarm-mode dockerd (same container work)', convTotal, conv('swarm-dockerd')),
    row('8. data on disk per node, MiB (shoal data dir less TLS; dockerd data-root/swarm)', mib(res.stateBytes.shoal), mib(res.stateBytes.swarm), 2),
    '',
    'Figure 8, the parts: idle per node over 20 s with the stack running (9 containers), RSS and % of a core:',
    `shoal process ${cell(idle('shoal-control').rssMiB)} MiB, ${cell(idle('shoal-control').cpuMs, 2)} %; `
      + `the dockerd under shoal (no Swarm mode) ${cell(idle('shoal-dockerd').rssMiB)} MiB, ${cell(idle('shoal-dockerd').cpuMs, 2)} %; `
      + `the dockerd in Swarm mode ${cell(idle('swarm-dockerd').rssMiB)} MiB, ${cell(idle('swarm-dockerd').cpuMs, 2)} %; `
      + `the same Swarm-lab dockerd before \`swarm init\` (no containers) ${cell(idle('swarm-dockerd-before-init').rssMiB)} MiB, ${cell(idle('swarm-dockerd-before-init').cpuMs, 2)} %. `
      + 'What Swarm mode adds is the Swarm-mode dockerd less the dockerd under shoal, node by node (same daemon, same containers). Over the scale rounds: '
      + `shoal ${cell(conv('shoal-control'))} ms per node, the dockerd under it ${cell(conv('shoal-dockerd'))} ms, the dockerd in Swarm mode ${cell(conv('swarm-dockerd'))} ms `
      + '(the container work is the same; shoal\'s agent\'s calls to its daemon are part of its cost, so the row compares shoal and its daemon with Swarm\'s daemon).',
    '',
    `Tuned (figure 5 only): Swarm: ${res.tuning.swarm || 'not run'}. shoal: ${res.tuning.shoal || 'not run'}.`,
    '',
    'Victims: the node killed, drained or cut off in figures 5-7 is, each round, the non-leader running the most containers; the leader killed in figure 4 is restarted 2 s later',
    '(systemd\'s RestartSec for docker.service and shoal\'s unit): for Swarm that is the whole dockerd, as Swarm mode lives in it; for shoal, the shoal process (its containers live in dockerd).',
    'A node death: its link down at both ends, then every process of its namespace (dockerd, containerd, the shims, shoal) and its containers SIGKILLed; then it is revived.',
    'Figure 7 cuts every packet between the node and the other two (nftables in the namespaces; the registry stays reachable), holds it 60 s, heals, and counts for 10 s more.',
    ...(res.notes.length > 0 ? ['', ...res.notes.map((n) => `- ${n}`)] : []),
    '',
    '<details><summary>The rounds, as they ran</summary>',
    '',
    '```',
    ...rounds,
    '```',
    '</details>',
  ];
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main();
  process.exit(0);
}

