// The lab of the Swarm comparison (bench/swarm.ts): network namespaces on a bridge (a NetLab of
// test/faults/netns.ts), a Docker daemon in each (started with `nsenter --net=`, as the overlay
// lab does: `ip netns exec` remounts /sys and dockerd finds no cgroups), and a local registry
// (Debian's docker-registry) on the bridge that every daemon trusts as insecure and pulls from.
//
// Each daemon: its own data root (vfs: the image is a static busybox of a few MB), exec root, pid
// file and socket, its own iptables rules in its namespace, its default bridge in its namespace.
// Its container events stream into a Timeline (swarm-parse.ts): which container of which service
// and slot ran where and when, the ground truth both systems are measured by.
//
// Nothing outlives destroy(): containers removed, daemons stopped (SIGTERM, then SIGKILL), the
// namespaces, veths, bridge and the lab's DOCKER-USER rule removed (NetLab), the exec roots, the
// data roots and the registry's storage deleted.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { stringify } from 'yaml';
import type { NetLab } from '../../test/faults/netns.ts';
import { pingDocker } from '../../test/executor/dockerd.ts';
import { sleep } from '../../test/faults/http.ts';
import { parseDuBytes, parseEvent, Timeline } from './swarm-parse.ts';

export const registryPort = 5000;
const dockerdStartMs = 60_000;
const dockerdStopMs = 15_000;

/** One registry process per bridge address, all serving one storage directory. */
export class Registry {
  private readonly procs: ChildProcess[] = [];

  private constructor(readonly root: string) {}

  static async start(runDir: string, addresses: readonly string[]): Promise<Registry> {
    const root = path.join(runDir, 'registry');
    mkdirSync(root, { recursive: true });
    const reg = new Registry(root);
    try {
      for (const addr of addresses) {
        const config = path.join(runDir, `registry-${addr}.yml`);
        // No blob-descriptor cache: the registries on the other bridges must see a push at once.
        writeFileSync(config, stringify({
          version: 0.1, log: { level: 'warn' }, storage: { filesystem: { rootdirectory: root }, delete: { enabled: true } },
          http: { addr: `${addr}:${registryPort}` },
        }));
        const log = openSync(path.join(runDir, `registry-${addr}.log`), 'a');
        try {
          const p = spawn('docker-registry', ['serve', config], { stdio: ['ignore', log, log] });
          p.on('error', () => undefined);
          reg.procs.push(p);
        } finally {
          closeSync(log);
        }
        await waitHttp(`http://${addr}:${registryPort}/v2/`, 20_000);
      }
    } catch (err) {
      await reg.stop();
      throw err;
    }
    return reg;
  }

  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => stopChild(p)));
    rmSync(this.root, { recursive: true, force: true });
  }
}

async function waitHttp(url: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.status < 500) return;
    } catch {
      // not yet
    }
    await sleep(200);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

export interface DNode {
  slot: number;
  name: string;
  ip: string;
  socket: string;
  execRoot: string;
  dataRoot: string;
  docker: Docker;
  proc: ChildProcess | undefined;
  /** The daemon's event stream, while it runs. */
  events: Readable | undefined;
}

/** A Docker daemon in each namespace of a NetLab, their events in one Timeline. */
export class Dockerds {
  readonly nodes: DNode[] = [];
  readonly timeline = new Timeline();

  constructor(readonly net: NetLab, readonly runDir: string, readonly tag: string, private readonly insecure: readonly string[]) {
    mkdirSync(runDir, { recursive: true });
    for (let slot = 1; slot <= net.nodeCount; slot++) {
      const socket = `/run/${tag}${net.index}n${slot}.sock`;
      this.nodes.push({
        slot, name: `n${slot}`, ip: net.ip(slot), socket, execRoot: `/run/${tag}${net.index}n${slot}`, dataRoot: path.join(runDir, `docker-n${slot}`),
        docker: new Docker({ socketPath: socket }), proc: undefined, events: undefined,
      });
    }
  }

  /** One after the other: daemons setting up their iptables chains at once (each in its own namespace) fail now and then here. */
  async startAll(): Promise<void> {
    for (const n of this.nodes) await this.start(n);
  }

  async start(n: DNode): Promise<void> {
    const log = openSync(path.join(this.runDir, `dockerd-${n.name}.log`), 'a');
    try {
      const child = spawn('nsenter', [
        `--net=/run/netns/${this.net.ns(n.slot)}`, 'dockerd',
        '--data-root', n.dataRoot, '--exec-root', n.execRoot, '--pidfile', `${n.execRoot}.pid`,
        '-H', `unix://${n.socket}`, '--iptables=true', '--storage-driver=vfs',
        ...this.insecure.flatMap((r) => ['--insecure-registry', r]),
      ], { stdio: ['ignore', log, log] });
      child.on('error', () => undefined);
      n.proc = child;
      child.once('exit', () => { if (n.proc === child) n.proc = undefined; });
    } finally {
      closeSync(log);
    }
    const until = Date.now() + dockerdStartMs;
    while (Date.now() < until) {
      if (await pingDocker(n.socket)) {
        await this.watch(n);
        return;
      }
      if (n.proc === undefined) break;
      await sleep(200);
    }
    throw new Error(`dockerd of ${this.tag} ${n.name} did not answer; see ${this.runDir}/dockerd-${n.name}.log`);
  }

  /** The daemon's pid (nsenter execs dockerd: the child's pid is dockerd's). */
  pid(n: DNode): number | undefined {
    try {
      return Number(readFileSync(`${n.execRoot}.pid`, 'utf8').trim());
    } catch {
      return n.proc?.pid;
    }
  }

  /** Follows the daemon's container events into the timeline, after reconciling it with a listing. */
  private async watch(n: DNode): Promise<void> {
    const stream = (await n.docker.getEvents({ filters: { type: ['container'] } })) as Readable;
    n.events = stream;
    let rest = '';
    stream.on('data', (b: Buffer) => {
      rest += b.toString('utf8');
      let i: number;
      while ((i = rest.indexOf('\n')) >= 0) {
        const e = parseEvent(rest.slice(0, i));
        rest = rest.slice(i + 1);
        if (e !== undefined) this.timeline.add(n.name, e);
      }
    });
    stream.on('error', () => undefined);
    const list = await n.docker.listContainers({ filters: { status: ['running'] } });
    const now = Date.now();
    const running = list.flatMap((c) => {
      const e = parseEvent(JSON.stringify({ Type: 'container', Action: 'start', timeNano: now * 1e6, Actor: { ID: c.Id, Attributes: { ...c.Labels, name: (c.Names[0] ?? '').replace(/^\//, '') } } }));
      return e === undefined ? [] : [{ id: e.id, service: e.service, slot: e.slot, startedAt: now }];
    });
    this.timeline.resync(n.name, now, running);
  }

  /** Ids of the running containers of either system on every daemon that answers. */
  async runningIds(): Promise<Set<string>> {
    const ids = new Set<string>();
    for (const n of this.nodes) {
      if (n.proc === undefined) continue;
      try {
        for (const c of await n.docker.listContainers({ filters: { status: ['running'] } })) ids.add(c.Id);
      } catch {
        // a daemon restarting
      }
    }
    return ids;
  }

  /** `docker -H <socket> ...` (the CLI: what a user types). */
  cli(n: DNode, args: string[], timeoutMs = 60_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn('docker', ['-H', `unix://${n.socket}`, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
      child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.once('close', (status) => {
        clearTimeout(timer);
        resolve({ status, stdout, stderr });
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        resolve({ status: -1, stdout, stderr: String(err) });
      });
    });
  }

  async cliOk(n: DNode, args: string[], timeoutMs = 60_000): Promise<string> {
    const r = await this.cli(n, args, timeoutMs);
    if (r.status !== 0) throw new Error(`docker ${args.join(' ')} on ${this.tag} ${n.name}: ${r.stderr.trim() || r.stdout.trim()}`);
    return r.stdout;
  }

  /** Pids of the containers running on the daemon (their init processes), for a machine's death. */
  async containerPids(n: DNode): Promise<number[]> {
    const pids: number[] = [];
    for (const c of await n.docker.listContainers()) {
      const info = await n.docker.getContainer(c.Id).inspect();
      if (info.State.Pid > 0) pids.push(info.State.Pid);
    }
    return pids;
  }

  /**
   * The machine dies: its link goes down at both ends, every process of its namespace (dockerd,
   * containerd, the shims, shoal) and every container of its daemon is SIGKILLed. `containerPids`
   * are read before (containerPids()): the daemon cannot answer afterwards. Returns the time (ms since the epoch).
   */
  death(n: DNode, containerPids: readonly number[]): number {
    const at = Date.now();
    ipSync(['link', 'set', this.net.hostVeth(n.slot), 'down']);
    ipSync(['-n', this.net.ns(n.slot), 'link', 'set', 'eth0', 'down']);
    const pids = spawnSync('ip', ['netns', 'pids', this.net.ns(n.slot)], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean).map(Number);
    for (const pid of [...pids, ...containerPids]) {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
    n.events?.destroy();
    n.events = undefined;
    this.timeline.daemonLost(n.name, at);
    return at;
  }

  /** The link comes up again and the daemon is started on the same data (it cleans up after the kill). */
  async revive(n: DNode): Promise<void> {
    await this.waitExited(n);
    // The killed daemon left its pid file; dockerd refuses to start while the pid in it names a
    // live process, and on a busy machine (pid_max 32768 here) another process may have it by
    // now. The daemon is known to have exited (above): the file is stale.
    rmSync(`${n.execRoot}.pid`, { force: true });
    ipSync(['link', 'set', this.net.hostVeth(n.slot), 'up']);
    ipSync(['-n', this.net.ns(n.slot), 'link', 'set', 'eth0', 'up']);
    await this.start(n);
  }

  /** SIGKILL of dockerd alone (a crash; its containers' shims live on). */
  async kill9(n: DNode): Promise<number> {
    const at = Date.now();
    const pid = this.pid(n);
    if (pid !== undefined) {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
    n.events?.destroy();
    n.events = undefined;
    await this.waitExited(n);
    return at;
  }

  private async waitExited(n: DNode): Promise<void> {
    const p = n.proc;
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) {
      n.proc = undefined;
      return;
    }
    await new Promise((r) => p.once('exit', r));
    n.proc = undefined;
  }

  /** Bytes under a path of the node's data root (`swarm`: Swarm's state), by du. */
  duBytes(p: string): number {
    const r = spawnSync('du', ['-sb', p], { encoding: 'utf8' });
    return r.status === 0 ? parseDuBytes(r.stdout) : Number.NaN;
  }

  /** Removes every container, stops every daemon, deletes exec and data roots. Idempotent. */
  async destroy(): Promise<void> {
    for (const n of this.nodes) {
      n.events?.destroy();
      n.events = undefined;
      if (n.proc === undefined) continue;
      try {
        const ids = (await n.docker.listContainers({ all: true })).map((c) => c.Id);
        await Promise.all(ids.map((id) => n.docker.getContainer(id).remove({ force: true }).catch(() => undefined)));
      } catch {
        // the daemon is gone: the namespace kill below ends what is left
      }
    }
    await Promise.all(this.nodes.map(async (n) => {
      const p = n.proc;
      if (p !== undefined) await stopChild(p);
      n.proc = undefined;
    }));
    for (const n of this.nodes) {
      // A daemon killed earlier may have left mounts under its roots: unmount them lazily.
      for (const m of mountsUnder([n.execRoot, n.dataRoot])) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
      rmSync(n.execRoot, { recursive: true, force: true });
      rmSync(`${n.execRoot}.pid`, { force: true });
      rmSync(n.socket, { force: true });
      rmSync(n.dataRoot, { recursive: true, force: true });
    }
  }
}

/** Mount points at or under any of `roots`, deepest first. */
export function mountsUnder(roots: readonly string[]): string[] {
  let text = '';
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const points = text.split('\n').map((l) => l.split(' ')[4] ?? '').filter((p) => roots.some((r) => p === r || p.startsWith(`${r}/`)));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), dockerdStopMs);
  await exited;
  clearTimeout(timer);
}

function ipSync(args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
}
