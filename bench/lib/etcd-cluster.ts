// Three `etcd` processes on 127.0.0.1 with their own client and peer ports and temporary data
// directories, default durability (fsync of the WAL per Ready) and default snapshot count; only
// --heartbeat-interval and --election-timeout are set, to match shoal's. Requests go through
// etcd's JSON gateway (/v3/kv/put, /v3/kv/range), the HTTP+JSON face comparable to shoal's API.
//
// With `peerTls`, peers talk over mutual TLS with certificates from a CA made the way shoal makes
// its own (ECDSA P-256), as shoal's peers always do; without it, etcd's default plain HTTP.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { createCa, issueNodeCert } from '../../src/security/index.ts';
import { Client, jsonBody, once, type Answer, type Endpoint, type RequestSpec } from './http.ts';
import { agreedLeader, freePort, stopAllAndRemove, spawnLogged, stopProcess, trackTempDir, waitCaughtUp, waitUntil, type Spawned } from './proc.ts';
import type { BenchNode, RejoinReport, System, Timeouts } from './system.ts';

/** The etcd to run: ETCD_BIN, else `etcd` on the PATH. */
export const etcdBinary = process.env.ETCD_BIN !== undefined && process.env.ETCD_BIN !== '' ? process.env.ETCD_BIN : 'etcd';

interface EtcdNode extends BenchNode {
  dir: string;
  peerPort: number;
  memberId: string;
  proc: Spawned | undefined;
  readonly pid: number | undefined;
}

interface StatusBody {
  header: { member_id: string; revision: string };
  leader: string;
  raftIndex: string;
  raftAppliedIndex?: string;
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');

export class EtcdCluster implements System {
  readonly kind = 'etcd';
  nodes: EtcdNode[] = [];
  private root = '';
  private destroyed = false;
  private tlsDir: string | undefined;

  /**
   * `clientTls`: the client URLs are HTTPS and clients must present a certificate of the CA
   * (--client-cert-auth), as shoal's API is, so the comparison stays fair (default on).
   */
  constructor(private readonly timeouts: Timeouts, private readonly peerTls = false, private readonly keepData = false, private readonly clientTls = true) {}

  async start(): Promise<void> {
    this.root = mkdtempSync(path.join(os.tmpdir(), 'etcd-bench-'));
    if (!this.keepData) trackTempDir(this.root);
    for (let i = 0; i < 3; i++) {
      const name = `e${i + 1}`;
      const client: Endpoint = { host: '127.0.0.1', port: await freePort() };
      const node: EtcdNode = {
        name, dir: path.join(this.root, name), client, peerPort: await freePort(), memberId: '', proc: undefined,
        get pid() { return this.proc?.pid; },
      };
      this.nodes.push(node);
    }
    if (this.peerTls || this.clientTls) await this.makeCertificates();
    const token = `bench-${process.pid}-${Date.now()}`;
    for (const n of this.nodes) this.spawn(n, 'new', token);
    await waitUntil('etcd: a leader that every node agrees on', async () => (await this.leader()) !== undefined, 60_000);
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    await stopAllAndRemove(this.nodes, this.root, this.keepData);
  }

  async leader(): Promise<number | undefined> {
    return agreedLeader(this.nodes, async (n) => {
      const s = await this.status(n);
      n.memberId = s.header.member_id;
      return s.leader && s.leader !== '0' ? s.leader : undefined;
    }, (n) => n.memberId);
  }

  writeRequest(collection: string, id: string, value: string): RequestSpec {
    return { method: 'POST', path: '/v3/kv/put', body: jsonBody({ key: b64(`${collection}/${id}`), value: b64(value) }) };
  }

  /** serializable is false by default: a linearizable read (ReadIndex through the leader). */
  readRequest(collection: string, id: string): RequestSpec {
    return { method: 'POST', path: '/v3/kv/range', body: jsonBody({ key: b64(`${collection}/${id}`) }) };
  }

  writeAccepted(a: Answer): boolean {
    return a.status === 200;
  }

  readFound(a: Answer): boolean {
    return a.status === 200 && a.body.includes('"kvs"');
  }

  async readValue(client: Client, collection: string, id: string): Promise<string | undefined> {
    const a = await client.send(this.readRequest(collection, id), 10_000);
    if (a.status !== 200) throw new Error(`etcd read ${collection}/${id}: HTTP ${a.status} ${a.body.toString()}`);
    const body = JSON.parse(a.body.toString()) as { kvs?: { value?: string }[] };
    const v = body.kvs?.[0]?.value;
    return v === undefined ? undefined : Buffer.from(v, 'base64').toString();
  }

  async kill(i: number): Promise<void> {
    const n = this.node(i);
    if (n.proc) await stopProcess(n.proc, 'SIGKILL');
    n.proc = undefined;
  }

  /** etcd's move-leader (`etcdctl move-leader`): asked of the current leader. */
  async transferLeader(i: number): Promise<void> {
    const l = await this.leader();
    const lead = l === undefined ? undefined : this.nodes[l];
    if (!lead) throw new Error('etcd: no leader to move');
    const target = this.node(i).memberId;
    const r = await once<unknown>(lead.client, { method: 'POST', path: '/v3/maintenance/transfer-leadership', body: jsonBody({ targetID: target }) }, 10_000);
    if (r.status !== 200) throw new Error(`etcd move-leader to ${this.node(i).name}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  }

  /** The raft applied index when this etcd reports it (3.4+), else the store revision. */
  async restart(i: number, timeoutMs: number): Promise<void> {
    const n = this.node(i);
    if (n.proc) throw new Error(`etcd: ${n.name} is running`);
    this.spawn(n, 'new', '');
    await waitCaughtUp(`etcd: ${this.node(i).name} caught up`, this, i, timeoutMs, () => undefined);
  }

  async appliedOf(i: number): Promise<number> {
    const s = await this.status(this.node(i));
    return Number(s.raftAppliedIndex ?? s.header.revision);
  }

  /**
   * etcd's documented replacement of a member whose data is gone: stop it, member remove,
   * member add with the same peer URL, start it on an empty data dir with
   * --initial-cluster-state=existing.
   */
  async wipeAndRejoin(i: number, timeoutMs: number): Promise<RejoinReport> {
    const n = this.node(i);
    const oldId = n.memberId;
    if (n.proc) await stopProcess(n.proc, 'SIGTERM');
    n.proc = undefined;
    rmSync(n.dir, { recursive: true, force: true });
    const l = await this.leader();
    const lead = l === undefined ? undefined : this.nodes[l];
    if (!lead) throw new Error('etcd: no leader to rejoin through');
    const membershipStarted = performance.now();
    const removed = await once<unknown>(lead.client, { method: 'POST', path: '/v3/cluster/member/remove', body: jsonBody({ ID: oldId }) }, 10_000);
    if (removed.status !== 200) throw new Error(`etcd member remove: HTTP ${removed.status} ${JSON.stringify(removed.body)}`);
    const added = await once<{ member?: { ID: string } }>(lead.client, { method: 'POST', path: '/v3/cluster/member/add', body: jsonBody({ peerURLs: [this.peerUrl(n)] }) }, 10_000);
    if (added.status !== 200 || !added.body.member) throw new Error(`etcd member add: HTTP ${added.status} ${JSON.stringify(added.body)}`);
    n.memberId = added.body.member.ID;
    const membershipMs = performance.now() - membershipStarted;
    const logFrom = readFileSync(this.logFile(n), 'utf8').length;
    const started = performance.now();
    this.spawn(n, 'existing', '');
    let startMs = Number.NaN;
    await waitCaughtUp(`etcd: ${this.node(i).name} caught up`, this, i, timeoutMs, () => { if (Number.isNaN(startMs)) startMs = performance.now() - started; });
    const catchUpMs = performance.now() - started;
    const log = readFileSync(this.logFile(n), 'utf8').slice(logFrom);
    const snap = /"msg":"(applied snapshot|applied incoming Raft snapshot|received and saved database snapshot)"/.exec(log);
    return { catchUpMs, membershipMs, startMs, how: `started empty, ${snap ? `received a snapshot ("${snap[1]}")` : 'caught up from the leader\'s log (no snapshot)'}` };
  }

  private node(i: number): EtcdNode {
    const n = this.nodes[i];
    if (!n) throw new Error(`no etcd node ${i}`);
    return n;
  }

  private async status(n: EtcdNode): Promise<StatusBody> {
    const r = await once<StatusBody>(n.client, { method: 'POST', path: '/v3/maintenance/status', body: jsonBody({}) }, 1000);
    if (r.status !== 200) throw new Error(`etcd status of ${n.name}: HTTP ${r.status}`);
    return r.body;
  }

  private peerUrl(n: EtcdNode): string {
    return `${this.peerTls ? 'https' : 'http'}://127.0.0.1:${n.peerPort}`;
  }

  private logFile(n: EtcdNode): string {
    return path.join(this.root, `${n.name}.log`);
  }

  private async makeCertificates(): Promise<void> {
    this.tlsDir = path.join(this.root, 'tls');
    mkdirSync(this.tlsDir, { recursive: true });
    const ca = await createCa('etcd-bench');
    writeFileSync(path.join(this.tlsDir, 'ca.crt'), ca.certPem);
    for (const n of this.nodes) {
      const cert = await issueNodeCert(ca, n.name, { hosts: ['127.0.0.1', 'localhost'] });
      writeFileSync(path.join(this.tlsDir, `${n.name}.crt`), cert.certPem);
      writeFileSync(path.join(this.tlsDir, `${n.name}.key`), cert.keyPem, { mode: 0o600 });
    }
    if (this.clientTls) {
      const client = await issueClientCert(ca, { principal: 'bench', role: 'admin' });
      for (const n of this.nodes) n.client.tls = { ca: ca.certPem, cert: client.certPem, key: client.keyPem };
    }
  }

  private spawn(n: EtcdNode, state: 'new' | 'existing', token: string): void {
    const cluster = this.nodes.map((m) => `${m.name}=${this.peerUrl(m)}`).join(',');
    const clientUrl = `${this.clientTls ? 'https' : 'http'}://${n.client.host}:${n.client.port}`;
    const args = [
      '--name', n.name, '--data-dir', n.dir,
      '--listen-client-urls', clientUrl, '--advertise-client-urls', clientUrl,
      '--listen-peer-urls', this.peerUrl(n), '--initial-advertise-peer-urls', this.peerUrl(n),
      '--initial-cluster', cluster, '--initial-cluster-state', state,
      ...(token ? ['--initial-cluster-token', token] : []),
      '--heartbeat-interval', String(this.timeouts.heartbeatMs), '--election-timeout', String(this.timeouts.electionMs),
      '--logger', 'zap', '--log-outputs', 'stderr',
      ...(this.tlsDir !== undefined && this.clientTls ? [
        '--cert-file', path.join(this.tlsDir, `${n.name}.crt`), '--key-file', path.join(this.tlsDir, `${n.name}.key`),
        '--trusted-ca-file', path.join(this.tlsDir, 'ca.crt'), '--client-cert-auth',
      ] : []),
      ...(this.tlsDir !== undefined && this.peerTls ? [
        '--peer-cert-file', path.join(this.tlsDir, `${n.name}.crt`), '--peer-key-file', path.join(this.tlsDir, `${n.name}.key`),
        '--peer-trusted-ca-file', path.join(this.tlsDir, 'ca.crt'), '--peer-client-cert-auth',
      ] : []),
    ];
    n.proc = spawnLogged(etcdBinary, args, this.logFile(n));
    const proc = n.proc;
    void proc.exited.then(() => { if (n.proc === proc) n.proc = undefined; });
  }
}
