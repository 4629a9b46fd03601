// Three (or more) `shoal serve` processes in the network namespaces of a NetLab
// (test/faults/netns.ts), each with the mesh configured: its own WireGuard interface name (the
// wireguard-go control sockets in /var/run/wireguard are shared by every namespace) and the
// runtime `none`. Each process is started in a process group of its own, so a test can kill
// shoal the way a crash or systemd's stop would (the whole group) and check that the
// wireguard-go it started survives. `clients` adds namespaces after the nodes' on the same LAN
// bridge, with nothing in them (a LAN client: bench/vip-task-loss.ts); `config` is merged into
// every node's shoal.yaml (e.g. `vips`, or `control` to replace the lab's fast node health).

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { initNode } from '../../src/node/identity.ts';
import { parseWgDump, type WgInterfaceDump } from '../../net/wg-dump.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { call, sleep, useClientCertificate } from '../faults/http.ts';
import { NetLab } from '../faults/netns.ts';
import { startShoalIn, type ShoalHost } from '../faults/shoal-in-ns.ts';

export const meshPort = 51820;

export interface LabNode extends ShoalHost {
  id: string;
  ip: string;
  dir: string;
  ifname: string;
}

export interface MeshLabOptions {
  /** Namespaces after the nodes' (slots count+1..), on the same bridge, running nothing. */
  clients?: number;
  /** Merged into every node's config, over the lab's own keys (a function: of the lab, whose addresses it may name). */
  config?: Record<string, unknown> | ((lab: NetLab) => Record<string, unknown>);
}

export class MeshLab {
  readonly nodes: LabNode[] = [];

  private constructor(readonly lab: NetLab, readonly runDir: string, private readonly opts: MeshLabOptions) {}

  static async create(count: number, runDir: string, opts: MeshLabOptions = {}): Promise<MeshLab> {
    const lab = await NetLab.create(count + (opts.clients ?? 0));
    const m = new MeshLab(lab, runDir, opts);
    try {
      await m.init(count);
    } catch (err) {
      await m.destroy();
      throw err;
    }
    return m;
  }

  private async init(count: number): Promise<void> {
    mkdirSync(this.runDir, { recursive: true });
    const caDir = path.join(this.runDir, 'n1');
    for (let slot = 1; slot <= count; slot++) {
      const ip = this.lab.ip(slot);
      const dir = path.join(this.runDir, `n${slot}`);
      const identity = await initNode({ dataDir: dir, name: `n${slot}`, hosts: [ip], ...(slot > 1 ? { caFrom: caDir } : {}) });
      this.nodes.push({ slot, name: `n${slot}`, id: identity.id, ip, api: `${ip}:7100`, dir, ifname: `shw${this.lab.index}n${slot}`, proc: undefined });
    }
    // The nodes serve HTTPS (their addresses are not loopback): the lab talks to them as an admin
    // with a client certificate of the cluster CA, as the fault suite does.
    const ca = { certPem: readFileSync(path.join(caDir, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(caDir, 'tls', 'ca.key'), 'utf8') };
    const client = await issueClientCert(ca, { principal: 'mesh-lab', role: 'admin' });
    useClientCertificate({ caPem: ca.certPem, certPem: client.certPem, keyPem: client.keyPem });
    const bootstrap = this.nodes.map((n) => ({ id: n.id, name: n.name, peerAddress: `${n.ip}:7200`, apiAddress: n.api }));
    for (const n of this.nodes) {
      writeFileSync(path.join(n.dir, 'shoal.yaml'), stringify({
        dataDir: '.', api: { listen: n.api }, peer: { listen: `${n.ip}:7200` }, bootstrap, runtime: { kind: 'none' }, logLevel: 'info',
        control: { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 },
        mesh: { listen: `${n.ip}:${meshPort}`, interface: n.ifname, reportIntervalMs: 1_000, resyncIntervalMs: 1_000 },
        ...(typeof this.opts.config === 'function' ? this.opts.config(this.lab) : this.opts.config),
      }));
    }
  }

  /** Starts shoal in the node's namespace, in a process group of its own. */
  async start(n: LabNode): Promise<void> {
    await startShoalIn(this.lab, n, { config: path.join(n.dir, 'shoal.yaml'), log: path.join(this.runDir, `${n.name}.log`), detached: true, serveWithinMs: 30_000 });
  }

  /** SIGKILL to shoal's whole process group: what a crash, or systemd stopping the unit, does. */
  async killGroup(n: LabNode): Promise<void> {
    const proc = n.proc;
    if (proc?.pid === undefined) return;
    const exited = new Promise((r) => proc.once('exit', r));
    try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ }
    await exited;
  }

  /** Runs a command in the node's namespace; returns its status and output. */
  exec(n: LabNode, argv: string[], timeoutMs = 30_000): { status: number | null; stdout: string; stderr: string } {
    const r = spawnSync('ip', ['netns', 'exec', this.lab.ns(n.slot), ...argv], { encoding: 'utf8', timeout: timeoutMs });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  dump(n: LabNode): WgInterfaceDump | null {
    const r = this.exec(n, ['wg', 'show', n.ifname, 'dump']);
    return r.status === 0 ? parseWgDump(r.stdout) : null;
  }

  /** The node records as some live node's API lists them. */
  async records(): Promise<Array<{ id: string; mesh: { publicKey: string; address: string | null; peers: Array<{ nodeId: string; latestHandshakeAt: number | null; rxBytes: number }> } | null }>> {
    for (const n of this.nodes.filter((x) => x.proc !== undefined)) {
      const r = await call(n.api, '/v1/nodes?consistency=stale', { timeoutMs: 3000 });
      if (r.kind === 'answer' && r.status === 200) return (r.body as { items: Array<{ record: never }> }).items.map((i) => i.record);
    }
    return [];
  }

  async waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const v = await probe();
      if (v !== undefined) return v;
      await sleep(250);
    }
    throw new Error(`timed out waiting for ${what}; logs in ${this.runDir}`);
  }

  async destroy(): Promise<void> {
    for (const n of this.nodes) await this.killGroup(n);
    await this.lab.destroy();
    // wireguard-go's control sockets live outside the namespaces; SIGKILL leaves them behind.
    for (const n of this.nodes) rmSync(`/var/run/wireguard/${n.ifname}.sock`, { force: true });
  }
}
