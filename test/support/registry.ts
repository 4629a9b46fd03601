// A real private registry for the system tests: Debian's `docker-registry` (the CNCF
// distribution registry) on this machine, serving TLS with a certificate of a CA the test makes, and
// asking for a login (htpasswd, bcrypt). The machine's dockerd trusts the CA through
// /etc/docker/certs.d/HOST:PORT/ca.crt (read at each pull, no restart), removed again by close().
// push() tags a local image under the registry's name, pushes it with the login and removes the
// local tag again, so a task's start must pull it. api() talks to the registry's HTTP API
// directly (manifests, an image index for several platforms).
//
// It listens on the address of Docker's default bridge (docker0's gateway, 172.17.0.1 as a rule):
// local to this machine like loopback, but not in dockerd's default insecure range 127.0.0.0/8,
// where dockerd skips certificate checks and, after an HTTPS answer it dislikes (a 401), falls
// back to plain HTTP and reports that failure instead of the registry's answer.

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { testImage } from '../executor/test-image.ts';

const run = promisify(execFile);

async function freePort(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, address, () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a !== null ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

export interface RegistryAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export class TestRegistry {
  readonly username = 'shoal-test';
  readonly password = `pw-${Math.random().toString(36).slice(2)}-secret`;
  host = '';
  private proc: ChildProcess | undefined;
  private ca = '';
  private certsDir = '';
  /** certs.d directories of other HOST:PORTs that reach this registry (a throttling proxy), removed by close(). */
  private readonly aliasDirs: string[] = [];
  private log = '';
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-registry-'));

  /** Starts the registry and waits until it answers (401 to an anonymous /v2/). */
  async start(docker: Docker): Promise<void> {
    const bridge = await docker.getNetwork('bridge').inspect() as { IPAM?: { Config?: Array<{ Gateway?: string; Subnet?: string }> } };
    // A daemon restarted on an existing bridge may list only the subnet: the gateway is then its
    // first address, as Docker assigns it (docker0's own address).
    const ipv4 = bridge.IPAM?.Config?.filter((c) => c.Subnet === undefined || !c.Subnet.includes(':')) ?? [];
    const address = ipv4.find((c) => c.Gateway !== undefined)?.Gateway ?? firstAddress(ipv4.find((c) => c.Subnet !== undefined)?.Subnet);
    if (address === undefined) throw new Error('Docker\'s bridge network has no gateway address to serve the test registry on');
    const port = await freePort(address);
    this.host = `${address}:${port}`;
    const d = (f: string): string => path.join(this.dir, f);
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    await run('openssl', ['req', '-x509', ...ec, '-keyout', d('ca.key'), '-out', d('ca.crt'), '-subj', '/CN=shoal test registry CA', '-days', '2']);
    await run('openssl', ['req', ...ec, '-keyout', d('server.key'), '-out', d('server.csr'), '-subj', `/CN=${address}`]);
    writeFileSync(d('ext.cnf'), `subjectAltName=IP:${address}\nextendedKeyUsage=serverAuth\n`);
    await run('openssl', ['x509', '-req', '-in', d('server.csr'), '-CA', d('ca.crt'), '-CAkey', d('ca.key'), '-CAcreateserial', '-out', d('server.crt'), '-days', '2', '-extfile', d('ext.cnf')]);
    this.ca = readFileSync(d('ca.crt'), 'utf8');
    const { stdout } = await run('htpasswd', ['-Bbn', this.username, this.password]);
    writeFileSync(d('htpasswd'), stdout);
    mkdirSync(d('data'));
    writeFileSync(d('config.yml'), [
      'version: 0.1',
      'log:', '  level: warn',
      'storage:', `  filesystem:`, `    rootdirectory: ${d('data')}`, '  delete:', '    enabled: true',
      'http:', `  addr: ${this.host}`, '  tls:', `    certificate: ${d('server.crt')}`, `    key: ${d('server.key')}`,
      'auth:', '  htpasswd:', '    realm: shoal-test', `    path: ${d('htpasswd')}`,
      '',
    ].join('\n'));
    // dockerd reads the CA of a registry from here at each pull.
    this.certsDir = path.join('/etc/docker/certs.d', this.host);
    mkdirSync(this.certsDir, { recursive: true });
    writeFileSync(path.join(this.certsDir, 'ca.crt'), this.ca);
    this.proc = spawn('docker-registry', ['serve', d('config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer): void => { this.log = (this.log + b.toString()).slice(-8_000); };
    this.proc.stdout?.on('data', keep);
    this.proc.stderr?.on('data', keep);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const r = await this.api('GET', '/v2/', { auth: false }).catch(() => undefined);
      if (r?.status === 401) return;
      if (Date.now() > deadline || this.proc.exitCode !== null) throw new Error(`the registry did not start at ${this.host}:\n${this.log}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  /** One request to the registry's HTTP API over TLS (trusting only the test's CA), with the login unless `auth: false`. */
  api(method: string, urlPath: string, opts: { auth?: boolean; body?: Buffer | string; headers?: Record<string, string> } = {}): Promise<RegistryAnswer> {
    const [host, port] = this.host.split(':');
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.auth !== false) headers.authorization = `Basic ${Buffer.from(`${this.username}:${this.password}`).toString('base64')}`;
    return new Promise((resolve, reject) => {
      const req = https.request({ host, port: Number(port), method, path: urlPath, ca: this.ca, headers, timeout: 10_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath}: no answer within 10 s`)));
      req.end(opts.body);
    });
  }

  /** Tags the local image `source` as HOST/repo:tag, pushes it with the login, and removes the local tag. Returns the reference. */
  async push(docker: Docker, source: string, repo: string, tag: string): Promise<string> {
    const ref = `${this.host}/${repo}:${tag}`;
    await docker.getImage(source).tag({ repo: `${this.host}/${repo}`, tag });
    const stream = (await docker.getImage(ref).push({ authconfig: { username: this.username, password: this.password, serveraddress: this.host } })) as NodeJS.ReadableStream;
    const text = await new Promise<string>((resolve, reject) => {
      let out = '';
      stream.on('data', (c: Buffer) => { out += c.toString(); });
      stream.on('end', () => resolve(out));
      stream.on('error', reject);
    });
    await docker.getImage(ref).remove({ noprune: true });
    const failure = text.split('\n').filter((l) => l.includes('"error"'));
    if (failure.length > 0) throw new Error(`pushing ${ref} failed: ${failure.join('\n')}`);
    return ref;
  }

  /** The registry's address and port (Docker's bridge gateway, a free port). */
  get address(): { host: string; port: number } {
    const [host, port] = this.host.split(':');
    return { host: host ?? '', port: Number(port) };
  }

  /** Makes dockerd trust the registry's CA at another HOST:PORT too (a proxy in front of it, same IP). */
  trustAlias(hostPort: string): void {
    const dir = path.join('/etc/docker/certs.d', hostPort);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'ca.crt'), this.ca);
    this.aliasDirs.push(dir);
  }

  /** Takes the CA out of dockerd's certs.d: pulls fail on the certificate until trust(). */
  async untrust(): Promise<void> {
    rmSync(path.join(this.certsDir, 'ca.crt'), { force: true });
  }

  async trust(): Promise<void> {
    mkdirSync(this.certsDir, { recursive: true });
    writeFileSync(path.join(this.certsDir, 'ca.crt'), this.ca);
  }

  /** Stops the registry and removes its files and the CA from dockerd's certs.d. Idempotent. */
  async close(): Promise<void> {
    const p = this.proc;
    this.proc = undefined;
    if (p !== undefined && p.exitCode === null) {
      const exited = new Promise((res) => p.once('exit', res));
      p.kill('SIGTERM');
      await Promise.race([exited, new Promise((res) => setTimeout(res, 5_000))]);
      if (p.exitCode === null) p.kill('SIGKILL');
    }
    if (this.certsDir !== '') rmSync(this.certsDir, { recursive: true, force: true });
    for (const d of this.aliasDirs.splice(0)) rmSync(d, { recursive: true, force: true });
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Builds an image of the test image plus `sizeMiB` of random bytes (a layer of its own, so a pull
 * must download it), tagged `tag`; with the classic builder (no BuildKit needed).
 */
export async function buildSizedImage(tag: string, sizeMiB: number): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-sized-image-'));
  try {
    writeFileSync(path.join(dir, 'blob'), randomBytes(Math.round(sizeMiB * 2 ** 20)));
    writeFileSync(path.join(dir, 'Dockerfile'), `FROM ${testImage}\nCOPY blob /blob\n`);
    await run('docker', ['build', '-q', '-t', tag, dir], { env: { ...process.env, DOCKER_BUILDKIT: '0' } });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The first host address of an IPv4 subnet (`172.17.0.0/16` → `172.17.0.1`). */
function firstAddress(subnet: string | undefined): string | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(subnet ?? '');
  if (m === null) return undefined;
  const n = ((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8) | Number(m[4])) >>> 0;
  const bits = Number(m[5]);
  const first = ((bits === 0 ? 0 : (n & (~0 << (32 - bits)))) + 1) >>> 0;
  return [first >>> 24, (first >>> 16) & 255, (first >>> 8) & 255, first & 255].join('.');
}
