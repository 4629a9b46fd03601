// The overlay lab: the mesh lab's three `shoal serve` nodes (test/net/mesh-lab.ts), each in its
// own network namespace with the mesh, and each with **its own Docker daemon inside that
// namespace** as its runtime. So each node's bridges, VXLAN devices and containers live in its
// namespace, and the only way between them is the lab's link (WireGuard on it). The firewall
// (nftables, net/firewall*.ts) is on in every node.
//
// dockerd is started with `nsenter --net=` rather than `ip netns exec`: the latter gives the
// process a mount namespace with /sys remounted, where the cgroup hierarchy is missing and
// dockerd refuses to start. Each daemon has its own data root (vfs storage: the test image is a
// few MB), exec root, pid file and socket, no default bridge (`--bridge=none`), and its own
// iptables rules in its namespace. The busybox test image is imported into each
// (test/executor/test-image.ts). death(n) is a machine's death (bench/vip-task-loss.ts): links
// down, then its shoal, containers, daemon and everything else in its namespace killed.
// destroy() removes the containers, stops the daemons and the lab, also after a failure.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { pingDocker } from '../executor/dockerd.ts';
import { ensureTestImage } from '../executor/test-image.ts';
import { sleep } from '../faults/http.ts';
import { MeshLab, type LabNode, type MeshLabOptions } from './mesh-lab.ts';

const dockerdStartMs = 60_000;
const dockerdStopMs = 15_000;

export class OverlayLab {
  private readonly dockerds = new Map<number, ChildProcess>();

  private constructor(readonly mesh: MeshLab, private readonly firewall: boolean) {}

  /**
   * `firewall: false` leaves the nodes' firewall off (the benchmark measures the overlay alone);
   * `clients` and `config` are the mesh lab's (MeshLabOptions).
   */
  static async create(runDir: string, opts: { firewall?: boolean } & MeshLabOptions = {}): Promise<OverlayLab> {
    const mesh = await MeshLab.create(3, runDir, { ...(opts.clients !== undefined ? { clients: opts.clients } : {}), ...(opts.config !== undefined ? { config: opts.config } : {}) });
    const lab = new OverlayLab(mesh, opts.firewall ?? true);
    try {
      await lab.init();
    } catch (err) {
      await lab.destroy();
      throw err;
    }
    return lab;
  }

  get nodes(): LabNode[] {
    return this.mesh.nodes;
  }

  /** The node's Docker socket (short: a unix socket path has at most 107 bytes). */
  socket(n: LabNode): string {
    return `/run/shov${this.mesh.lab.index}n${n.slot}.sock`;
  }

  private execRoot(n: LabNode): string {
    return `/run/shov${this.mesh.lab.index}n${n.slot}`;
  }

  private async init(): Promise<void> {
    for (const n of this.nodes) {
      const file = path.join(n.dir, 'shoal.yaml');
      const config = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      writeFileSync(file, stringify({ ...config, runtime: { kind: 'docker', dockerSocket: this.socket(n) }, firewall: { enabled: this.firewall } }));
    }
    await Promise.all(this.nodes.map((n) => this.startDockerd(n)));
    for (const n of this.nodes) await ensureTestImage([], this.socket(n));
  }

  private async startDockerd(n: LabNode): Promise<void> {
    // A run killed before its destroy() (a test process killed, not failed) leaves its daemon's
    // network namespace files mounted under the exec root; the daemon would trip on them.
    removeMounted(this.execRoot(n));
    const log = openSync(path.join(this.mesh.runDir, `dockerd-${n.name}.log`), 'a');
    try {
      const child = spawn('nsenter', [
        `--net=/run/netns/${this.mesh.lab.ns(n.slot)}`, 'dockerd',
        '--data-root', path.join(this.mesh.runDir, `docker-${n.name}`), '--exec-root', this.execRoot(n), '--pidfile', `${this.execRoot(n)}.pid`,
        '-H', `unix://${this.socket(n)}`, '--iptables=true', '--bridge=none', '--storage-driver=vfs',
      ], { stdio: ['ignore', log, log] });
      child.on('error', () => undefined);
      this.dockerds.set(n.slot, child);
    } finally {
      closeSync(log);
    }
    const until = Date.now() + dockerdStartMs;
    while (Date.now() < until) {
      if (await pingDocker(this.socket(n))) return;
      if (this.dockerds.get(n.slot)?.exitCode !== null) break;
      await sleep(250);
    }
    throw new Error(`dockerd of ${n.name} did not answer; see ${this.mesh.runDir}/dockerd-${n.name}.log`);
  }

  /** `docker -H <the node's socket> ...`. */
  docker(n: LabNode, args: string[], timeoutMs = 30_000): { status: number | null; stdout: string; stderr: string } {
    const r = spawnSync('docker', ['-H', `unix://${this.socket(n)}`, ...args], { encoding: 'utf8', timeout: timeoutMs });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  /** The ids of the node's containers of `service`. */
  containers(n: LabNode, service: string): string[] {
    return this.docker(n, ['ps', '-q', '--filter', `label=io.shoal.service=${service}`]).stdout.split('\n').filter(Boolean);
  }

  /** A container's address on a Docker network, as `docker inspect` shows it. */
  addressOn(n: LabNode, container: string, dockerNetwork: string): string {
    const r = this.docker(n, ['inspect', '-f', `{{(index .NetworkSettings.Networks "${dockerNetwork}").IPAddress}}`, container]);
    return r.stdout.trim();
  }

  /**
   * The node's machine dies: its link goes down at both ends (nothing answers its address any
   * more: no FIN, no RST), then its shoal, its containers (`docker kill`, while its daemon still
   * answers) and every process left in its namespace (wireguard-go, dockerd, containerd and the
   * shims) are SIGKILLed. Returns when its bridge port went down (Date.now()): from then on
   * nothing reaches it. Nothing here blocks the caller's event loop (a bench polls meanwhile).
   */
  async death(n: LabNode): Promise<number> {
    await runAsync('ip', ['link', 'set', this.mesh.lab.hostVeth(n.slot), 'down']);
    const at = Date.now();
    await runAsync('ip', ['-n', this.mesh.lab.ns(n.slot), 'link', 'set', 'eth0', 'down']);
    await this.mesh.killGroup(n);
    n.proc = undefined;
    const docker = ['-H', `unix://${this.socket(n)}`];
    const ids = (await runAsync('docker', [...docker, 'ps', '-q'], false)).split('\n').filter(Boolean);
    if (ids.length > 0) await runAsync('docker', [...docker, 'kill', ...ids], false);
    const pids = (await runAsync('ip', ['netns', 'pids', this.mesh.lab.ns(n.slot)])).split(/\s+/).filter(Boolean);
    for (const pid of pids) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
    }
    return at;
  }

  async destroy(): Promise<void> {
    // shoal first: it would make again what is removed below.
    for (const n of this.nodes) await this.mesh.killGroup(n);
    for (const n of this.nodes) {
      const ids = this.docker(n, ['ps', '-aq'], 10_000).stdout.split('\n').filter(Boolean);
      if (ids.length > 0) this.docker(n, ['rm', '-f', ...ids], 30_000);
    }
    await Promise.all([...this.dockerds.values()].map((d) => stop(d)));
    const veths = Array.from({ length: this.mesh.lab.nodeCount }, (_, i) => this.mesh.lab.hostVeth(i + 1));
    await this.mesh.destroy();
    // A namespace outlives its last process while its orphaned TCP sockets time out (a dead
    // machine's connections), and its veth with it: deleting our end deletes the pair now.
    for (const v of veths) spawnSync('ip', ['link', 'del', v], { stdio: 'ignore' });
    for (const n of this.nodes) {
      removeMounted(this.execRoot(n));
      // What a killed daemon (death) leaves beside its exec root.
      for (const f of [`${this.execRoot(n)}.pid`, this.socket(n)]) rmSync(f, { force: true });
      // vfs keeps a full copy of the image per container: the logs stay, the layers go. A killed
      // daemon (death) leaves its containers' mounts (shm) under the data root as well.
      removeMounted(path.join(this.mesh.runDir, `docker-${n.name}`));
    }
  }
}

/** Runs a program to its end without blocking; its stdout. A failure throws when `check`. */
function runAsync(cmd: string, args: readonly string[], check = true): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    c.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    c.once('error', reject);
    c.once('close', (code) => (code === 0 || !check ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')}: ${err.trim()}`))));
  });
}

/** Unmounts what a daemon left mounted under its exec root or data root (its containers' netns
 * files and shm, when it was killed), deepest first, then removes the directory: rmSync alone
 * fails with EBUSY. */
function removeMounted(dir: string): void {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) spawnSync('umount', ['-l', point]);
  rmSync(dir, { recursive: true, force: true });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), dockerdStopMs);
  await exited;
  clearTimeout(timer);
}
