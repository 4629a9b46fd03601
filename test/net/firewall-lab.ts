// A node and its workloads in network namespaces, for the firewall tests with real packets.
//
//   shoalfw-<k>-h    the node ("host"): one bridge per network (bra, brb) holding the network's
//                    gateway from the allocator, IP forwarding on, and a Docker look-alike in
//                    iptables: FORWARD policy DROP, jumping to DOCKER-USER first, as Docker sets it.
//   shoalfw-<k>-<w>  one namespace per workload, its eth0 on the bridge of its network, its
//                    address from the allocator, the default route through the gateway.
//
// Each namespace runs test/fixtures/net-workload.mjs (listeners, and probes on command). The
// lab index k is the test process's pid, so concurrent runs never meet; namespaces of a pid
// that is gone are removed first.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pidAlive, runQuiet } from '../faults/netns.ts';

const fixture = path.resolve(import.meta.dirname, '../fixtures/net-workload.mjs');

export function labPrerequisites(): string[] {
  const problems: string[] = [];
  if (process.platform !== 'linux') problems.push('the firewall tests need Linux network namespaces');
  if (process.getuid?.() !== 0) problems.push('the firewall tests must run as root (namespaces, bridges, nftables)');
  for (const [cmd, args, pkg] of [['ip', ['-V'], 'iproute2'], ['nft', ['--version'], 'nftables'], ['conntrack', ['--version'], 'conntrack'], ['iptables', ['--version'], 'iptables']] as const) {
    if (spawnSync(cmd, args, { stdio: 'ignore' }).status !== 0) problems.push(`'${cmd}' is missing: apt-get install -y ${pkg}`);
  }
  return problems;
}

function sh(cmd: string, args: readonly string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout;
}

function removeNamespaces(k: number): void {
  for (const ns of runQuiet('ip', ['netns', 'list']).split('\n').map((l) => l.split(' ')[0] ?? '').filter((n) => n.startsWith(`shoalfw-${k}-`))) {
    for (const pid of runQuiet('ip', ['netns', 'pids', ns]).split(/\s+/).filter(Boolean)) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
    }
    runQuiet('ip', ['netns', 'del', ns]);
  }
}

/** Removes what runs that died left behind. */
function removeStale(): void {
  const owners = new Set<number>();
  for (const line of runQuiet('ip', ['netns', 'list']).split('\n')) {
    const m = /^shoalfw-(\d+)-/.exec(line);
    if (m !== null) owners.add(Number(m[1]));
  }
  for (const k of owners) if (k !== process.pid && !pidAlive(k)) removeNamespaces(k);
}

/** One JSON-line conversation with a workload process. */
export class Workload {
  private seq = 0;
  private readonly waiting = new Map<number, (r: Record<string, unknown>) => void>();
  readonly ready: Promise<void>;

  constructor(readonly name: string, readonly address: string, private readonly child: ChildProcess) {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    let onReady: () => void = () => undefined;
    this.ready = new Promise((resolve) => { onReady = resolve; });
    lines.on('line', (line) => {
      const r = JSON.parse(line) as Record<string, unknown>;
      if (r.ready === true) onReady();
      const w = this.waiting.get(Number(r.seq));
      if (w !== undefined) {
        this.waiting.delete(Number(r.seq));
        w(r);
      }
    });
  }

  ask(cmd: Record<string, unknown>): Promise<Record<string, unknown>> {
    const seq = ++this.seq;
    return new Promise((resolve) => {
      this.waiting.set(seq, resolve);
      this.child.stdin?.write(`${JSON.stringify({ ...cmd, seq })}\n`);
    });
  }

  /** A new TCP connection to host:port: true when it is accepted. */
  async reaches(host: string, port: number, timeoutMs = 1500): Promise<boolean> {
    return (await this.ask({ op: 'probe', host, port, timeoutMs })).ok === true;
  }

  stop(): void {
    this.child.kill('SIGKILL');
  }
}

export interface LabNetwork {
  name: string;
  /** The bridge's name in the host namespace. */
  bridge: string;
  gateway: string;
  prefix: number;
}

export class FirewallLab {
  readonly host: string;
  private readonly workloads: Workload[] = [];

  constructor() {
    removeStale();
    this.host = `shoalfw-${process.pid}-h`;
    removeNamespaces(process.pid);
    sh('ip', ['netns', 'add', this.host]);
    sh('ip', ['-n', this.host, 'link', 'set', 'lo', 'up']);
    sh('ip', ['netns', 'exec', this.host, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  }

  /** Docker's iptables shape in the host namespace: FORWARD policy DROP, DOCKER-USER evaluated first. */
  dockerLookAlike(): void {
    const ipt = (args: string[]): string => sh('ip', ['netns', 'exec', this.host, 'iptables', '-w', '5', ...args]);
    ipt(['-P', 'FORWARD', 'DROP']);
    ipt(['-N', 'DOCKER-USER']);
    ipt(['-A', 'FORWARD', '-j', 'DOCKER-USER']);
  }

  iptablesHas(rule: readonly string[]): boolean {
    return spawnSync('ip', ['netns', 'exec', this.host, 'iptables', '-w', '5', '-C', ...rule], { stdio: 'ignore' }).status === 0;
  }

  addNetwork(n: LabNetwork): void {
    sh('ip', ['-n', this.host, 'link', 'add', n.bridge, 'type', 'bridge']);
    sh('ip', ['-n', this.host, 'addr', 'add', `${n.gateway}/${n.prefix}`, 'dev', n.bridge]);
    sh('ip', ['-n', this.host, 'link', 'set', n.bridge, 'up']);
  }

  /** A workload namespace on a network's bridge, running the workload fixture listening on `ports`. */
  async addWorkload(name: string, n: LabNetwork, address: string, ports: readonly number[]): Promise<Workload> {
    const ns = `shoalfw-${process.pid}-${name}`;
    const veth = `v${name}`;
    sh('ip', ['netns', 'add', ns]);
    sh('ip', ['-n', this.host, 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    sh('ip', ['-n', this.host, 'link', 'set', veth, 'master', n.bridge, 'up']);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    sh('ip', ['-n', ns, 'addr', 'add', `${address}/${n.prefix}`, 'dev', 'eth0']);
    sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    sh('ip', ['-n', ns, 'route', 'add', 'default', 'via', n.gateway]);
    return this.start(name, ns, address, ports);
  }

  /** The workload fixture in the host namespace itself (the node's own listeners). */
  hostListeners(ports: readonly number[]): Promise<Workload> {
    return this.start('host', this.host, '', ports);
  }

  private async start(name: string, ns: string, address: string, ports: readonly number[]): Promise<Workload> {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, fixture, ...ports.map(String)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const w = new Workload(name, address, child);
    this.workloads.push(w);
    await w.ready;
    return w;
  }

  nftList(): string {
    return sh('ip', ['netns', 'exec', this.host, 'nft', 'list', 'table', 'inet', 'shoal']);
  }

  destroy(): void {
    for (const w of this.workloads) w.stop();
    removeNamespaces(process.pid);
  }
}
