// POST /v1/stacks/{name}/deploy and the stack routes through inject(), on one node that runs the
// control plane on an in-memory runtime: a deploy creates the services, networks and secrets
// the files name (and the stack's record); a dry run of the same files reports no change, of a
// changed file exactly the change; --prune removes what the files no longer name; rm removes
// everything the stack made and nothing else; refusals are the catalogue's, with compose paths.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, problemPaths } from '../api/expect-error.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

let s: SingleNode;
beforeAll(async () => {
  s = await singleNode({ control: true });
  await until('the node registered', async () => ((await get<{ items: unknown[] }>('/v1/nodes')).items.length === 1));
});
afterAll(async () => { await s.close(); });

async function get<T>(url: string): Promise<T> {
  const res = await s.app.inject({ url });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as T;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const compose = (webImage: string, withCache: boolean): string => `
x-env: &env
  TZ: \${TZ:-Europe/Paris}
services:
  web:
    image: ${webImage}
    ports: ["8080:80"]
    environment:
      <<: *env
      API_URL: http://api:3000
    depends_on: [api]
    expose: ["80"]
  api:
    image: busybox:1.36
    command: ["sleep", "3600"]
    environment:
      DB_HOST: db:5432
      DB_PASSWORD_FILE: /run/secrets/db_password
    secrets: [db_password]
    depends_on:
      db: {condition: service_healthy}
  db:
    image: busybox:1.36
    command: sleep 3600
    volumes: [data:/data]
    healthcheck: {test: ["CMD", "true"], interval: 1s}
    secrets: [db_password]
${withCache ? '  cache:\n    image: busybox:1.36\n    command: ["sleep", "3600"]\n' : ''}volumes:
  data: {}
secrets:
  db_password:
    file: ./db_password.txt
`;

interface Outcome { name: string; outcome: string; fields?: string[]; changes?: Record<string, { before: unknown; after: unknown }> }
interface Deploy { dryRun: boolean; rev: number | null; services: Outcome[]; networks: Outcome[]; secrets: Outcome[]; policies: Outcome[]; warnings: { path: string; message: string }[] }

const readFiles = { './db_password.txt': Buffer.from('s3cret\n').toString('base64') };
const deploy = (name: string, text: string, opts: { dryRun?: boolean; prune?: boolean } = {}) => s.app.inject({
  method: 'POST', url: `/v1/stacks/${name}/deploy${opts.dryRun === true ? '?dryRun=true' : ''}`,
  payload: { files: [{ path: 'compose.yaml', text }], readFiles, ...(opts.prune === true ? { prune: true } : {}) },
});

const outcomes = (d: Deploy) => Object.fromEntries([...d.networks.map((n) => [`network ${n.name}`, n.outcome]), ...d.secrets.map((n) => [`secret ${n.name}`, n.outcome]), ...d.services.map((n) => [`service ${n.name}`, n.outcome])]);

describe('compose stacks through the API', () => {
  it('deploys every resource of the stack, its services carrying the stack as their source', async () => {
    const res = await deploy('app', compose('busybox:1.36', true));
    expect(res.statusCode, res.body).toBe(200);
    const d = res.json() as Deploy;
    expect(outcomes(d)).toEqual({
      'network app-default': 'created', 'network ingress': 'created', 'secret app-db-password': 'created',
      'service app-web': 'created', 'service app-api': 'created', 'service app-db': 'created', 'service app-cache': 'created',
    });
    expect(d.warnings.map((w) => w.path)).toEqual(['services.web.expose']);
    // The published port is opened as Compose opens it, where the firewall is on.
    expect(d.policies).toEqual([{ name: 'app-published', outcome: 'created' }]);
    const policy = await get<{ policy: { record: { spec: { publish: unknown[] } } } }>('/v1/firewall-policies/app-published');
    expect(policy.policy.record.spec.publish).toEqual([{ service: 'app-web', ports: [{ port: 8080, protocol: 'tcp' }], nodes: [] }]);
    const web = await get<{ service: { record: { source: string; spec: { env: Record<string, string>; networks: string[]; ports: unknown[] } } } }>('/v1/services/app-web');
    expect(web.service.record.source).toBe('stack:app');
    expect(web.service.record.spec.env).toEqual({ API_URL: 'http://api:3000', TZ: 'Europe/Paris' });
    expect(web.service.record.spec.networks).toEqual(['app-default', 'ingress']);
    const db = await get<{ service: { record: { spec: { mounts: unknown[]; secrets: unknown[] } } } }>('/v1/services/app-db');
    expect(db.service.record.spec.mounts).toEqual([{ type: 'volume', source: 'app_data', target: '/data', readOnly: false }]);
    expect(db.service.record.spec.secrets).toEqual([{ name: 'app-db-password', target: 'db_password', mode: 0o400 }]);
    const list = await get<{ items: { name: string; record: { services: string[]; networks: string[]; secrets: string[] } }[] }>('/v1/stacks');
    expect(list.items.map((i) => [i.name, i.record.services, i.record.networks, i.record.secrets])).toEqual([
      ['app', ['app-api', 'app-cache', 'app-db', 'app-web'], ['app-default'], ['app-db-password']],
    ]);
    await until('app-db runs', async () => (await get<{ service: { status: { running: number } } }>('/v1/services/app-db')).service.status.running === 1);
  });

  it('a dry run of the same files reports no change, and of a changed file exactly the change', async () => {
    const same = (await deploy('app', compose('busybox:1.36', true), { dryRun: true })).json() as Deploy;
    expect(Object.values(outcomes(same)).every((o) => o === 'unchanged'), JSON.stringify(same)).toBe(true);
    const changed = (await deploy('app', compose('busybox:1.37', true), { dryRun: true })).json() as Deploy;
    expect(outcomes(changed)).toMatchObject({ 'service app-web': 'updated', 'service app-api': 'unchanged', 'network app-default': 'unchanged' });
    const web = changed.services.find((o) => o.name === 'app-web');
    expect(web?.changes).toEqual({ image: { before: 'busybox:1.36', after: 'busybox:1.37' } });
    // Nothing was written.
    expect((await get<{ service: { record: { spec: { image: string } } } }>('/v1/services/app-web')).service.record.spec.image).toBe('busybox:1.36');
  });

  it('without --prune keeps what the files no longer name; with it removes exactly that', async () => {
    const kept = (await deploy('app', compose('busybox:1.37', false))).json() as Deploy;
    expect(outcomes(kept)).toMatchObject({ 'service app-web': 'updated' });
    expect(kept.services.map((o) => o.name)).not.toContain('app-cache');
    await get('/v1/services/app-cache');
    const pruned = (await deploy('app', compose('busybox:1.37', false), { prune: true })).json() as Deploy;
    expect(outcomes(pruned)).toMatchObject({ 'service app-cache': 'removed', 'service app-web': 'unchanged' });
    expect((await s.app.inject({ url: '/v1/services/app-cache' })).statusCode).toBe(404);
  });

  it('--prune removes the networks and secrets the files no longer name; without it they stay the stack\'s', async () => {
    const full = 'services:\n  w:\n    image: busybox:1.36\n    networks: [extra]\n    secrets: [token]\nnetworks:\n  extra: {}\nsecrets:\n  token: {content: abc}\n';
    const bare = 'services:\n  w:\n    image: busybox:1.36\n';
    expect(outcomes((await deploy('p', full)).json() as Deploy)).toEqual({ 'network p-extra': 'created', 'secret p-token': 'created', 'service p-w': 'created' });
    const kept = (await deploy('p', bare)).json() as Deploy;
    expect(outcomes(kept)).toEqual({ 'network p-default': 'created', 'service p-w': 'updated' });
    expect((await get<{ stack: { record: { networks: string[]; secrets: string[] } } }>('/v1/stacks/p')).stack.record).toMatchObject({ networks: ['p-default', 'p-extra'], secrets: ['p-token'] });
    const pruned = (await deploy('p', bare, { prune: true })).json() as Deploy;
    expect(outcomes(pruned)).toEqual({ 'network p-default': 'unchanged', 'network p-extra': 'removed', 'secret p-token': 'removed', 'service p-w': 'unchanged' });
    expect((await s.app.inject({ url: '/v1/networks/p-extra' })).statusCode).toBe(404);
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/stacks/p' })).statusCode).toBe(200);
  });

  it('refuses a service of the same name made by hand, and nothing is applied', async () => {
    const byHand = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { documents: [{ apiVersion: 'shoal/v1', kind: 'Service', name: 'other-web', image: 'busybox:1.36', command: ['sleep', '3600'] }] } });
    expect(byHand.statusCode, byHand.body).toBe(200);
    const res = await deploy('other', 'services:\n  web:\n    image: busybox:1.36\n  api:\n    image: busybox:1.36\n');
    expect(problemPaths(expectError(res, 'bad_request'))).toEqual(['services.web']);
    expect((await s.app.inject({ url: '/v1/services/other-api' })).statusCode).toBe(404);
    expect((await s.app.inject({ url: '/v1/stacks/other' })).statusCode).toBe(404);
  });

  it('refuses every problem of the files at once with its compose path, in the catalogue\'s shape', async () => {
    const res = await deploy('bad', `
services:
  web:
    build: .
    image: nginx:1.27
    links: [db]
    volumes: ["./html:/usr/share/nginx/html"]
    portz: ["80:80"]
  db:
    image: postgres:16
    network_mode: "service:web"
`);
    const details = expectError(res, 'bad_request') as { problems: { path: string; message: string }[] };
    expect(details.problems.map((p) => p.path)).toEqual([
      'services.web.build', 'services.web.links', 'services.web.portz', 'services.web.volumes[0]', 'services.db.network_mode',
    ]);
    expect(details.problems.find((p) => p.path === 'services.web.portz')?.message).toContain('did you mean ports?');
    expect((await s.app.inject({ url: '/v1/stacks/bad' })).statusCode).toBe(404);
  });

  it('rm removes everything the stack made (services, network, secret, record) and nothing else', async () => {
    const res = await s.app.inject({ method: 'DELETE', url: '/v1/stacks/app' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ removed: { services: ['app-api', 'app-db', 'app-web'], networks: ['app-default'], secrets: ['app-db-password'], policies: ['app-published'] }, kept: [] });
    expect((await s.app.inject({ url: '/v1/firewall-policies/app-published' })).statusCode).toBe(404);
    expect((await get<{ items: unknown[] }>('/v1/stacks')).items).toEqual([]);
    expect((await s.app.inject({ url: '/v1/networks/app-default' })).statusCode).toBe(404);
    expect((await s.app.inject({ url: '/v1/secrets/app-db-password' })).statusCode).toBe(404);
    // The service made by hand stays.
    await get('/v1/services/other-web');
    expectError(await s.app.inject({ method: 'DELETE', url: '/v1/stacks/app' }), 'not_found');
  });

  it('a replicated-job is a job of the stack: it runs at the deploy that creates or changes it, not at one that leaves it; rm removes it', async () => {
    const files = (arg: string): string => `services:\n  web:\n    image: busybox:1.36\n    command: ["sleep", "3600"]\n  migrate:\n    image: chore:2\n    command: ["echo", "${arg}"]\n    deploy: {mode: replicated-job}\n`;
    type JobDeploy = Deploy & { jobs: { name: string; outcome: string; run: string | null }[] };
    // The in-memory runtime's containers of chore:2 exit 0 after 200 ms.
    s.runtime?.program((spec) => spec.image === 'chore:2', { exitAfterMs: 200, exitCode: 0 });
    const first = (await deploy('chores', files('v1'))).json() as JobDeploy;
    expect(first.jobs).toEqual([expect.objectContaining({ name: 'chores-migrate', outcome: 'created', run: expect.any(String) })]);
    const job = await get<{ job: { schedule: string | null }; runs: { id: string; cause: string }[] }>('/v1/jobs/chores-migrate');
    expect([job.job.schedule, job.runs.map((r) => [r.id, r.cause])]).toEqual([null, [[first.jobs[0]?.run, 'manual']]]);
    expect((await get<{ stack: { record: { jobs: string[]; services: string[] } } }>('/v1/stacks/chores')).stack.record).toMatchObject({ jobs: ['chores-migrate'], services: ['chores-web'] });
    await until('the first run finished', async () => (await get<{ runs: { state: string }[] }>('/v1/jobs/chores-migrate')).runs.every((r) => !['pending', 'running'].includes(r.state)));
    const again = (await deploy('chores', files('v1'))).json() as JobDeploy;
    expect(again.jobs).toEqual([expect.objectContaining({ outcome: 'unchanged', run: null })]);
    const changed = (await deploy('chores', files('v2'))).json() as JobDeploy;
    expect(changed.jobs).toEqual([expect.objectContaining({ outcome: 'updated', run: expect.any(String) })]);
    expect(changed.jobs[0]?.run).not.toBe(first.jobs[0]?.run);
    // A job of that name made by hand is not the stack's to take.
    const hand = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { documents: [{ apiVersion: 'shoal/v1', kind: 'Job', name: 'hand-migrate', image: 'busybox:1.36' }] } });
    expect(hand.statusCode, hand.body).toBe(200);
    expect(problemPaths(expectError(await deploy('hand', files('v1')), 'bad_request'))).toEqual(['services.migrate']);
    const rm = await s.app.inject({ method: 'DELETE', url: '/v1/stacks/chores' });
    expect(rm.json()).toMatchObject({ removed: { services: ['chores-web'], jobs: ['chores-migrate'] } });
    expect((await s.app.inject({ url: '/v1/jobs/chores-migrate' })).statusCode).toBe(404);
    await get('/v1/jobs/hand-migrate');
  });

  it('honours driver_opts and ipv4_address: the task runs with its volume made with the options and exactly its address; another stack fixing that address is refused', async () => {
    const files = 'services:\n  db:\n    image: busybox:1.36\n    command: ["sleep", "3600"]\n    volumes: [scratch:/scratch]\n    networks: {back: {ipv4_address: 10.77.0.50}}\n'
      + 'networks:\n  back: {ipam: {config: [{subnet: 10.77.0.0/16}]}}\nvolumes:\n  scratch: {driver_opts: {type: tmpfs, device: tmpfs, o: size=1m}}\n';
    const res = await deploy('fx', files);
    expect(res.statusCode, res.body).toBe(200);
    const db = await get<{ service: { record: { spec: { mounts: unknown[]; networkAddresses: Record<string, string> } } } }>('/v1/services/fx-db');
    expect(db.service.record.spec.mounts).toEqual([{ type: 'volume', source: 'fx_scratch', target: '/scratch', readOnly: false, volumeOptions: { device: 'tmpfs', o: 'size=1m', type: 'tmpfs' } }]);
    expect(db.service.record.spec.networkAddresses).toEqual({ 'fx-back': '10.77.0.50' });
    await until('fx-db runs', async () => (await get<{ service: { status: { running: number } } }>('/v1/services/fx-db')).service.status.running === 1);
    const net = await get<{ network: { record: { addresses: Record<string, string> } } }>('/v1/networks/fx-back');
    expect(Object.values(net.network.record.addresses)).toEqual(['10.77.0.50']);
    const container = s.runtime?.all().find((c) => c.name.startsWith('shoal-fx-db.'));
    expect(s.runtime?.specOf(container?.id ?? '')?.networks).toEqual([{ name: 'fx-back', address: '10.77.0.50' }]);
    expect(s.runtime?.volume('fx_scratch')).toEqual({ driver: 'local', options: { device: 'tmpfs', o: 'size=1m', type: 'tmpfs' } });
    // Another stack on that network fixing the same address: refused, and nothing applied.
    const other = 'services:\n  cache:\n    image: busybox:1.36\n    networks: {shared: {ipv4_address: 10.77.0.50}}\nnetworks:\n  shared: {external: true, name: fx-back}\n';
    const refused = expectError(await deploy('fy', other), 'bad_request');
    expect(JSON.stringify(refused)).toContain('10.77.0.50 on network fx-back is already the fixed address of service fx-db');
    expect((await s.app.inject({ url: '/v1/services/fy-cache' })).statusCode).toBe(404);
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/stacks/fx' })).statusCode).toBe(200);
  });
});
