// A compose stack on three real shoal processes with the Docker runtime: the overlay lab's nodes
// (test/net/overlay-lab.ts), each in its own network namespace with its own Docker daemon, the
// WireGuard mesh between them. One cluster is shared by the cases, which run in order: a stack of
// a web front (n1), an API (n2) and a database-like service (n3; a listener, a healthcheck, a
// named volume and a secret from a file) with depends_on service_healthy; the front reaches the
// database by its compose name from another node; one service is updated; --prune removes the
// one the files no longer name; rm removes everything the stack made and nothing else. Between them,
// the routing mesh (issue 38): a service's ingress port reached through every node and from a
// node's host, and only its remaining task once one stops.
// Needs what the overlay test needs (root, iproute2, wireguard-tools, wireguard-go, dockerd,
// busybox-static); run it under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/compose-stack.test.ts

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, type HttpResult } from '../faults/http.ts';
import { prerequisiteProblems } from '../faults/netns.ts';
import type { LabNode } from '../net/mesh-lab.ts';
import { OverlayLab } from '../net/overlay-lab.ts';

const image = 'shoal-test/busybox:local';
const password = 'correct horse battery staple';

function problems(): string[] {
  const out = prerequisiteProblems();
  for (const tool of ['wg', 'wireguard-go', 'dockerd', 'docker', 'nsenter']) if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) out.push(`${tool} is missing`);
  if (!existsSync('/dev/net/tun')) out.push('/dev/net/tun is missing');
  if (!existsSync('/bin/busybox')) out.push('/bin/busybox is missing');
  return out;
}

/** The stack: `apiVersion` is the API's VERSION variable; `withApi: false` leaves the api out. */
function composeFile(o: { apiVersion: string; withApi: boolean }): string {
  return `
x-sleep: &sleep
  image: ${image}
  command: ["sleep", "3600"]
  stop_grace_period: 1s
services:
  front:
    image: ${image}
    command: ["sh", "-c", "while true; do echo front | nc -l -p 80; done"]
    stop_grace_period: 1s
    # Host mode: published where the task runs, by Docker (the routing mesh has its own test, test/system/ingress.test.ts).
    ports: [{target: 80, published: 8080, mode: host}]
    environment:
      DB_HOST: db:5432
${o.withApi ? '    depends_on: [api]\n' : ''}    deploy:
      placement: {constraints: ["node.hostname == n1"]}
${o.withApi ? `  api:
    <<: *sleep
    environment: {VERSION: "${o.apiVersion}"}
    depends_on:
      db: {condition: service_healthy}
    deploy:
      placement: {constraints: ["node.hostname == n2"]}
` : ''}  db:
    image: ${image}
    command: ["sh", "-c", "while true; do echo pong | nc -l -p 5432; done"]
    stop_grace_period: 1s
    healthcheck:
      test: ["CMD", "sh", "-c", "test -f /run/secrets/db_password"]
      interval: 1s
      start_period: 2s
    volumes: ["data:/data"]
    secrets: [db_password]
    deploy:
      placement: {constraints: ["node.hostname == n3"]}
volumes:
  data: {}
secrets:
  db_password:
    file: ./db_password.txt
`;
}

interface Outcome { name: string; outcome: string; changes?: Record<string, { before: unknown; after: unknown }> }
interface DeployAnswer { services: Outcome[]; networks: Outcome[]; secrets: Outcome[]; policies: Outcome[] }

describe('a compose stack on three processes with the Docker runtime', () => {
  let lab: OverlayLab;
  let n1: LabNode;
  let n2: LabNode;
  let n3: LabNode;

  const api = async (p: string, method: 'GET' | 'POST' | 'DELETE' = 'GET', body?: unknown): Promise<HttpResult> =>
    call(n1.api, p, { method, ...(body !== undefined ? { body } : {}), timeoutMs: 20_000 });

  const deploy = async (text: string, opts: { dryRun?: boolean; prune?: boolean } = {}): Promise<DeployAnswer> => {
    const body = { files: [{ path: 'compose.yaml', text }], readFiles: { './db_password.txt': Buffer.from(password).toString('base64') }, ...(opts.prune === true ? { prune: true } : {}) };
    return lab.mesh.waitFor('the stack deploy to be answered', async () => {
      const r = await api(`/v1/stacks/app/deploy${opts.dryRun === true ? '?dryRun=true' : ''}`, 'POST', body);
      if (r.kind === 'answer' && r.status === 200) return r.body as DeployAnswer;
      // A cluster just started raises its feature level a moment later; no leader yet: retry.
      if (r.kind === 'answer' && r.status < 500 && r.code !== 'feature_not_enabled') throw new Error(`deploy refused: ${JSON.stringify(r)}`);
      return undefined;
    });
  };

  const running = (n: LabNode, service: string): Promise<string> => lab.mesh.waitFor(`${service} running on ${n.name}`, () => lab.containers(n, service)[0], 120_000);
  const exec = (n: LabNode, container: string, cmd: string): { status: number | null; stdout: string } => lab.docker(n, ['exec', container, 'sh', '-c', cmd], 30_000);
  const outcomes = (a: DeployAnswer): Record<string, string> => Object.fromEntries([...a.networks, ...a.secrets, ...a.services].map((o) => [o.name, o.outcome]));

  beforeAll(async () => {
    const missing = problems();
    if (missing.length > 0) throw new Error(`the compose stack test cannot run on this machine:\n  ${missing.join('\n  ')}`);
    lab = await OverlayLab.create(mkdtempSync(path.join(os.tmpdir(), 'shoal-stack-')));
    [n1, n2, n3] = lab.nodes as [LabNode, LabNode, LabNode];
    await Promise.all(lab.nodes.map((n) => lab.mesh.start(n)));
  }, 240_000);

  afterAll(async () => {
    await lab?.destroy();
  }, 120_000);

  it('deploys the stack: every resource created, the api started only once the db runs healthy', async () => {
    // A service made by hand, which the stack's rm must leave alone.
    await lab.mesh.waitFor('a service made by hand', async () => {
      const r = await api('/v1/apply', 'POST', { documents: [{ apiVersion: 'shoal/v1', kind: 'Service', name: 'keep', image, command: ['sleep', '3600'], stopGracePeriod: '1s', constraints: ['node.name == n2'] }] });
      return r.kind === 'answer' && r.status === 200 ? true : undefined;
    });
    const a = await deploy(composeFile({ apiVersion: '1', withApi: true }));
    expect(outcomes(a)).toEqual({ 'app-default': 'created', 'app-db-password': 'created', 'app-front': 'created', 'app-api': 'created', 'app-db': 'created' });
    expect(a.policies).toEqual([{ name: 'app-published', outcome: 'created' }]);
    const [db, apiC] = await Promise.all([running(n3, 'app-db'), running(n2, 'app-api'), running(n1, 'app-front')]);
    const startedAt = (n: LabNode, c: string): number => Date.parse(lab.docker(n, ['inspect', '-f', '{{.State.StartedAt}}', c]).stdout.trim());
    // depends_on: the api's container was created only after the db's ran (and reported healthy).
    expect(startedAt(n2, apiC)).toBeGreaterThan(startedAt(n3, db));
    expect(exec(n3, db, 'cat /run/secrets/db_password').stdout).toBe(password);
    expect(lab.docker(n3, ['volume', 'ls', '-q']).stdout.split('\n')).toContain('app_data');
    const front = lab.containers(n1, 'app-front')[0] ?? '';
    const ports = lab.docker(n1, ['inspect', '-f', '{{json .HostConfig.PortBindings}}', front]).stdout;
    expect(JSON.parse(ports)).toMatchObject({ '80/tcp': [{ HostPort: '8080' }] });
  }, 240_000);

  it('the front on n1 reaches the database on n3 by its compose name', async () => {
    const front = await running(n1, 'app-front');
    const db = await running(n3, 'app-db');
    const dbAddress = lab.addressOn(n3, db, 'shoal-app-default');
    await lab.mesh.waitFor('db to resolve from the front', () => (exec(n1, front, 'nslookup db').stdout.includes(dbAddress) ? true : undefined), 60_000);
    const answer = await lab.mesh.waitFor('an answer from db:5432', () => {
      const r = exec(n1, front, 'echo ping | nc -w 3 db 5432');
      return r.stdout.includes('pong') ? r.stdout : undefined;
    }, 60_000);
    expect(answer.trim()).toBe('pong');
  }, 150_000);

  it('the published port answers from outside the node (the stack\'s publish policy opens it)', async () => {
    const read = (): Promise<string> => new Promise((resolve) => {
      const socket = connect({ host: n1.ip, port: 8080 });
      let text = '';
      socket.setTimeout(3_000, () => socket.destroy());
      socket.on('data', (b: Buffer) => { text += b.toString(); });
      socket.on('close', () => resolve(text));
      socket.on('error', () => resolve(''));
      socket.on('connect', () => socket.end('hello\n'));
    });
    const got = await lab.mesh.waitFor('an answer on n1:8080', async () => {
      const t = await read();
      return t.includes('front') ? t : undefined;
    }, 60_000);
    expect(got.trim()).toBe('front');
  }, 90_000);

  it('the routing mesh: a 2-replica service publishing an ingress port answers through each node, the one without a task too', async () => {
    // Issue 38, on the real processes: the ingress network made at apply, the tasks joined to it,
    // Docker binding nothing, and every node's nftables table forwarding over the overlay.
    const service = {
      apiVersion: 'shoal/v1', kind: 'Service', name: 'mesh', image, replicas: 2, stopGracePeriod: '1s', constraints: ['node.name != n3'], maxPerNode: 1,
      command: ['sh', '-c', 'while true; do echo mesh-$(hostname) | nc -l -p 80; done'], ports: [{ published: 8081, target: 80 }],
    };
    const policy = { apiVersion: 'shoal/v1', kind: 'FirewallPolicy', name: 'mesh-published', publish: [{ service: 'mesh' }] };
    await lab.mesh.waitFor('the mesh service applied', async () => {
      const r = await api('/v1/apply', 'POST', { documents: [service, policy] });
      return r.kind === 'answer' && r.status === 200 ? true : undefined;
    });
    const [c1] = await Promise.all([running(n1, 'mesh'), running(n2, 'mesh')]);
    expect(JSON.parse(lab.docker(n1, ['inspect', '-f', '{{json .HostConfig.PortBindings}}', c1]).stdout) ?? {}).toEqual({});
    const read = (host: string): Promise<string> => new Promise((resolve) => {
      const socket = connect({ host, port: 8081 });
      let text = '';
      socket.setTimeout(3_000, () => socket.destroy());
      socket.on('data', (b: Buffer) => { text += b.toString(); });
      socket.on('close', () => resolve(text));
      socket.on('error', () => resolve(''));
      socket.on('connect', () => socket.end('hello\n'));
    });
    for (const n of [n1, n2, n3]) {
      const got = await lab.mesh.waitFor(`an answer through ${n.name}:8081`, async () => {
        const t = await read(n.ip);
        return t.startsWith('mesh-') ? t : undefined;
      }, 60_000);
      expect(got.trim()).toMatch(/^mesh-/);
    }
    // From the host of n3 (no task there) to its own address: the output hook's DNAT.
    const fromHost = await lab.mesh.waitFor('an answer from n3\'s host', () => {
      const r = lab.mesh.exec(n3, ['sh', '-c', `echo hi | /bin/busybox nc -w 3 ${n3.ip} 8081`]);
      return r.stdout.startsWith('mesh-') ? r.stdout : undefined;
    }, 30_000);
    expect(fromHost.trim()).toMatch(/^mesh-/);

    // One task stops (scaled to 1): once n3's table has one backend, every new connection, through any node, reaches the other.
    await lab.mesh.waitFor('the mesh service scaled to 1', async () => {
      const r = await api('/v1/apply', 'POST', { documents: [{ ...service, replicas: 1 }, policy] });
      return r.kind === 'answer' && r.status === 200 ? true : undefined;
    });
    const survivor = await lab.mesh.waitFor('one mesh task left', () => {
      const left = [n1, n2].flatMap((n) => lab.containers(n, 'mesh').map((c) => ({ n, c })));
      return left.length === 1 ? left[0] : undefined;
    }, 60_000);
    const hostname = lab.docker(survivor.n, ['exec', survivor.c, 'hostname']).stdout.trim();
    await lab.mesh.waitFor('n3\'s table down to one backend', () => {
      const set = lab.mesh.exec(n3, ['nft', '-j', 'list', 'set', 'ip', 'shoal-ingress', 'backends']).stdout;
      return (set.match(/"concat"/g) ?? []).length === 1 ? true : undefined;
    }, 30_000);
    // The task's nc serves one connection at a time (a moment between two): a refused attempt is tried again.
    const answer = async (host: string): Promise<string> => {
      for (let i = 0; i < 5; i++) {
        const t = (await read(host)).trim();
        if (t !== '') return t;
        await new Promise((r) => setTimeout(r, 200));
      }
      return '';
    };
    for (const n of [n3, n1, n2]) {
      for (let i = 0; i < 4; i++) expect(await answer(n.ip), `through ${n.name}`).toBe(`mesh-${hostname}`);
    }
  }, 180_000);

  it('a dry run of the same files changes nothing; an update of one service changes exactly it', async () => {
    const same = await deploy(composeFile({ apiVersion: '1', withApi: true }), { dryRun: true });
    expect(Object.values(outcomes(same)).every((o) => o === 'unchanged')).toBe(true);
    const before = await running(n2, 'app-api');
    const a = await deploy(composeFile({ apiVersion: '2', withApi: true }));
    expect(outcomes(a)).toMatchObject({ 'app-api': 'updated', 'app-front': 'unchanged', 'app-db': 'unchanged' });
    expect(a.services.find((s) => s.name === 'app-api')?.changes).toEqual({ env: { before: { VERSION: '1' }, after: { VERSION: '2' } } });
    const after = await lab.mesh.waitFor('the api replaced', () => {
      const c = lab.containers(n2, 'app-api')[0];
      return c !== undefined && c !== before ? c : undefined;
    }, 120_000);
    expect(exec(n2, after, 'echo $VERSION').stdout.trim()).toBe('2');
  }, 180_000);

  it('--prune removes the service the files no longer name', async () => {
    const a = await deploy(composeFile({ apiVersion: '2', withApi: false }), { prune: true });
    // The front's depends_on on the api goes with it (the stack's record); its spec is as it was.
    expect(outcomes(a)).toMatchObject({ 'app-api': 'removed', 'app-front': 'unchanged', 'app-db': 'unchanged' });
    await lab.mesh.waitFor('the api container gone', () => (lab.containers(n2, 'app-api').length === 0 ? true : undefined), 60_000);
    expect(lab.containers(n2, 'keep').length).toBe(1);
  }, 120_000);

  it('rm removes everything the stack made (containers, network, secret) and nothing else', async () => {
    const r = await api('/v1/stacks/app', 'DELETE');
    expect(r.kind === 'answer' && r.status).toBe(200);
    for (const n of [n1, n3]) await lab.mesh.waitFor(`the stack's containers gone on ${n.name}`, () => (lab.containers(n, 'app-front').length + lab.containers(n, 'app-db').length === 0 ? true : undefined), 60_000);
    for (const [p, want] of [['/v1/networks/app-default', 404], ['/v1/secrets/app-db-password', 404], ['/v1/firewall-policies/app-published', 404], ['/v1/stacks/app', 404], ['/v1/services/keep', 200]] as const) {
      const got = await api(p);
      expect(got.kind === 'answer' ? got.status : got.kind, p).toBe(want);
    }
    expect(lab.containers(n2, 'keep').length).toBe(1);
  }, 120_000);
});
