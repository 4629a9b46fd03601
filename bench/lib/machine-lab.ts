// Machines in network namespaces for node-health benchmarks (bench/node-loss.ts) and the soak
// (bench/soak-node-loss.ts): N `shoal serve` processes, each alone in a namespace of a NetLab
// (test/faults/netns.ts) with the in-memory runtime (its containers live in the process, so
// killing the process is what a machine's death does to them), and the node-health and lease
// settings left at their defaults unless asked. What a machine can suffer:
//
//   death       its link goes down (both ends of the veth) and every process in its namespace
//               is SIGKILLed: nothing answers its address any more, no FIN, no RST
//   revive      link up, shoal started again on the same data
//   stop        SIGTERM: shoal's graceful stop (a goodbye to its peers), the machine stays
//   crash       SIGKILL of shoal alone: the machine stays (its port refuses)
//   pause       SIGSTOP, then SIGCONT
//   disk stall  every durable write waits (POST /v1/drill/actions disk-stall: the storage seam)
//   link fault  1 % of packets dropped (nftables numgen) and the link shaped to 1 Mbit/s with a
//               200 ms queue (tbf) and kept saturated by a bulk flow, both ways: about 200 ms
//               added latency. (tc netem is not built into this kernel: CONFIG_NET_SCH_NETEM.)

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { stringify } from 'yaml';
import { initNode } from '../../src/node/identity.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { call, sleep, useClientCertificate, type HttpResult } from '../../test/faults/http.ts';
import { NetLab } from '../../test/faults/netns.ts';
import { startShoalIn, type ShoalHost } from '../../test/faults/shoal-in-ns.ts';

export interface Machine extends ShoalHost {
  id: string;
  ip: string;
  dir: string;
  log: string;
  /** Link down and processes killed (until revive). */
  dead: boolean;
}

export interface LabOptions {
  machines: number;
  runDir: string;
  /**
   * The nodes' runtime: `memory` (containers live in the shoal process: a death takes them, a
   * restart of shoal too) or `docker` (the machine's daemon: containers outlive shoal and are
   * adopted; a death kills the machine's containers with `docker kill`).
   */
  runtime?: 'memory' | 'docker';
  /** Merged into every node's config (e.g. `control`); nothing: the release's defaults. */
  config?: Record<string, unknown>;
}

export class MachineLab {
  readonly machines: Machine[] = [];
  private flood: ChildProcess | undefined;
  private floodServer: import('node:net').Server | undefined;

  clusterId = '';

  private constructor(readonly lab: NetLab, readonly opts: LabOptions) {}

  get runtime(): 'memory' | 'docker' {
    return this.opts.runtime ?? 'memory';
  }

  static async create(opts: LabOptions): Promise<MachineLab> {
    const lab = await NetLab.create(opts.machines);
    const m = new MachineLab(lab, opts);
    try {
      await m.init();
    } catch (err) {
      await m.destroy();
      throw err;
    }
    return m;
  }

  private async init(): Promise<void> {
    const { runDir, machines } = this.opts;
    mkdirSync(runDir, { recursive: true });
    const caDir = path.join(runDir, 'n1');
    for (let slot = 1; slot <= machines; slot++) {
      const ip = this.lab.ip(slot);
      const dir = path.join(runDir, `n${slot}`);
      const identity = await initNode({ dataDir: dir, name: `n${slot}`, hosts: [ip], ...(slot > 1 ? { caFrom: caDir } : {}) });
      this.clusterId = identity.clusterId;
      this.machines.push({ slot, name: `n${slot}`, id: identity.id, ip, api: `${ip}:7100`, dir, log: path.join(runDir, `n${slot}.log`), proc: undefined, dead: false });
    }
    const ca = { certPem: readFileSync(path.join(caDir, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(caDir, 'tls', 'ca.key'), 'utf8') };
    const client = await issueClientCert(ca, { principal: 'bench', role: 'admin' });
    useClientCertificate({ caPem: ca.certPem, certPem: client.certPem, keyPem: client.keyPem });
    const bootstrap = this.machines.map((n) => ({ id: n.id, name: n.name, peerAddress: `${n.ip}:7200`, apiAddress: n.api }));
    for (const n of this.machines) {
      writeFileSync(path.join(n.dir, 'shoal.yaml'), stringify({
        dataDir: '.', api: { listen: n.api }, peer: { listen: `${n.ip}:7200` }, bootstrap, runtime: { kind: this.runtime }, dns: { enabled: false }, logLevel: 'info',
        ...this.opts.config,
      }));
    }
  }

  byId(id: string): Machine | undefined {
    return this.machines.find((m) => m.id === id);
  }

  live(): Machine[] {
    return this.machines.filter((m) => m.proc !== undefined && !m.dead);
  }

  async start(m: Machine): Promise<void> {
    writeFileSync(m.log, `\n===== lab: start ${m.name} at ${new Date().toISOString()}\n`, { flag: 'a' });
    await startShoalIn(this.lab, m, { config: path.join(m.dir, 'shoal.yaml'), log: m.log, serveWithinMs: 60_000 });
  }

  /** The machine dies: its link goes down at both ends, then every process in its namespace is killed. Returns when (performance.now()). */
  death(m: Machine): number {
    const at = performance.now();
    m.dead = true;
    ipSync(['link', 'set', this.lab.hostVeth(m.slot), 'down']);
    ipSync(['-n', this.lab.ns(m.slot), 'link', 'set', 'eth0', 'down']);
    const pids = spawnSync('ip', ['netns', 'pids', this.lab.ns(m.slot)], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean);
    for (const pid of pids) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
    }
    if (this.runtime === 'docker') {
      const ids = spawnSync('docker', ['ps', '-q', '--filter', `label=io.shoal.node=${m.id}`], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean);
      if (ids.length > 0) spawnSync('docker', ['kill', ...ids]);
    }
    return at;
  }

  /** Link up again and shoal started on the same data. */
  async revive(m: Machine): Promise<void> {
    await this.waitExited(m);
    ipSync(['link', 'set', this.lab.hostVeth(m.slot), 'up']);
    ipSync(['-n', this.lab.ns(m.slot), 'link', 'set', 'eth0', 'up']);
    m.dead = false;
    await this.start(m);
  }

  /** SIGTERM (the graceful stop) or SIGKILL; resolves once the process has exited. */
  async stop(m: Machine, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    m.proc?.kill(signal);
    await this.waitExited(m);
  }

  pause(m: Machine): void {
    m.proc?.kill('SIGSTOP');
  }

  resume(m: Machine): void {
    m.proc?.kill('SIGCONT');
  }

  async diskStall(m: Machine, seconds: number): Promise<HttpResult> {
    return call(m.api, '/v1/drill/actions', { method: 'POST', body: { action: 'disk-stall', seconds }, timeoutMs: 3000 });
  }

  /** The link fault on machine m (see the header): on, or off again. */
  async linkFault(m: Machine, on: boolean): Promise<void> {
    const ns = this.lab.ns(m.slot);
    const veth = this.lab.hostVeth(m.slot);
    if (!on) {
      this.flood?.kill('SIGKILL');
      this.flood = undefined;
      await new Promise((r) => (this.floodServer === undefined ? r(undefined) : this.floodServer.close(r)));
      this.floodServer = undefined;
      spawnSync('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']);
      spawnSync('tc', ['qdisc', 'del', 'dev', veth, 'root']);
      spawnSync('ip', ['netns', 'exec', ns, 'nft', 'delete', 'table', 'inet', 'shoalsoak']);
      return;
    }
    const tbf = ['root', 'tbf', 'rate', '1mbit', 'burst', '16kbit', 'latency', '200ms'];
    ipSync(['netns', 'exec', ns, 'tc', 'qdisc', 'replace', 'dev', 'eth0', ...tbf], 'ip');
    run('tc', ['qdisc', 'replace', 'dev', veth, ...tbf]);
    const rules = [
      'table inet shoalsoak {',
      '  chain input { type filter hook input priority 10; policy accept; numgen random mod 100 < 1 drop; }',
      '  chain output { type filter hook output priority 10; policy accept; numgen random mod 100 < 1 drop; }',
      '}', '',
    ].join('\n');
    const r = spawnSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: rules, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`nft: ${r.stderr}`);
    await this.startFlood(m);
  }

  /** A bulk flow both ways between the machine and the root namespace, so the shaped link stays full. */
  private async startFlood(m: Machine): Promise<void> {
    const net = await import('node:net');
    const chunk = Buffer.alloc(64 * 1024, 7);
    const server = net.createServer((s) => {
      s.on('error', () => undefined);
      s.on('data', () => undefined);
      const pump = (): void => { while (s.write(chunk)); };
      s.on('drain', pump);
      pump();
    });
    await new Promise<void>((r) => server.listen(0, this.lab.hostIp, r));
    this.floodServer = server;
    const port = (server.address() as import('node:net').AddressInfo).port;
    const script = `const s=require('net').connect(${port},'${this.lab.hostIp}');const b=Buffer.alloc(65536,7);const p=()=>{while(s.write(b));};s.on('drain',p);s.on('connect',p);s.on('data',()=>{});s.on('error',()=>process.exit(0));`;
    this.flood = spawn('ip', ['netns', 'exec', this.lab.ns(m.slot), process.execPath, '-e', script], { stdio: 'ignore' });
  }

  /** Round-trip time from the root namespace to machine m, by ping (ms), or null. */
  pingMs(m: Machine): number | null {
    const r = spawnSync('ping', ['-c', '3', '-i', '0.2', '-q', m.ip], { encoding: 'utf8' });
    const avg = /= [\d.]+\/([\d.]+)\//.exec(r.stdout)?.[1];
    return avg === undefined ? null : Number(avg);
  }

  /** One request to the first live machine that answers below 500 (or `m` alone). */
  async api(method: 'GET' | 'POST' | 'PUT' | 'DELETE', urlPath: string, body?: unknown, m?: Machine): Promise<HttpResult> {
    let last: HttpResult = { kind: 'failure', error: 'no live machine' };
    for (const n of m !== undefined ? [m] : this.live()) {
      last = await call(n.api, urlPath, { method, timeoutMs: 3000, ...(body !== undefined ? { body } : {}) });
      if (last.kind === 'answer' && last.status < 500) return last;
    }
    return last;
  }

  async waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 120_000, everyMs = 200): Promise<T> {
    const until = performance.now() + timeoutMs;
    while (performance.now() < until) {
      const v = await probe();
      if (v !== undefined) return v;
      await sleep(everyMs);
    }
    throw new Error(`timed out waiting for ${what}; logs in ${this.opts.runDir}`);
  }

  async destroy(): Promise<void> {
    this.flood?.kill('SIGKILL');
    this.floodServer?.close();
    for (const m of this.machines) m.proc?.kill('SIGKILL');
    await Promise.all(this.machines.map((m) => this.waitExited(m)));
    const veths = this.machines.map((m) => this.lab.hostVeth(m.slot));
    await this.lab.destroy();
    // A namespace outlives its last process while its orphaned TCP sockets time out (a dead
    // machine's connections), and its veth with it: deleting our end deletes the pair now.
    for (const v of veths) spawnSync('ip', ['link', 'del', v], { stdio: 'ignore' });
    if (this.runtime === 'docker' && this.clusterId !== '') {
      const ids = spawnSync('docker', ['ps', '-aq', '--filter', `label=io.shoal.cluster=${this.clusterId}`], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean);
      if (ids.length > 0) spawnSync('docker', ['rm', '-f', ...ids]);
    }
  }

  private async waitExited(m: Machine): Promise<void> {
    const proc = m.proc;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) {
      m.proc = undefined;
      return;
    }
    await new Promise((r) => proc.once('exit', r));
    m.proc = undefined;
  }
}

function ipSync(args: string[], cmd = 'ip'): void {
  const r = spawnSync(cmd === 'ip' ? 'ip' : cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr.trim()}`);
}

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr.trim()}`);
}
