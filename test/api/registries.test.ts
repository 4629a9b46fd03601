// Registry logins on one node that runs the control plane (its agent on the in-memory runtime,
// whose registry at registry.lan:5000 asks for a login): `shoal registry login|ls|logout`, the
// password kept as a sealed secret and never answered (registry ls, secret ls/inspect, /v1/docs,
// the audit log), and the agent pulling with it: refused as `unauthorized` without a login, run
// with one, the credentials sent only for images of that registry.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registriesCollection, secretsCollection } from '../../src/resources/collections.ts';
import { registrySecretName } from '../../src/resources/registry-logins.ts';
import { inProcess } from '../cli/in-process.ts';
import { expectError, problemPaths } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';
import { withStdin } from '../support/stdin.ts';

const host = 'registry.lan:5000';
const password = `tok-${Math.random().toString(36).slice(2)}-en`;
const forms = [password, Buffer.from(password).toString('base64'), Buffer.from(password).toString('hex')];

let s: SingleNode;
let addr: string[];
beforeAll(async () => {
  s = await singleNode({ control: true });
  const address = await s.app.listen({ port: 0, host: '127.0.0.1' });
  addr = ['--addr', address.replace('http://', '')];
  s.runtime?.requireLogin(host, 'ci', password);
});
afterAll(async () => { await s.close(); });

const shoal = (...args: string[]) => inProcess('registry', ...args, ...addr);

function expectNoPassword(text: string): void {
  for (const f of forms) expect(text.includes(f), `the answer holds the password: ${text.slice(0, 300)}`).toBe(false);
}


const apply = (name: string, image: string) => s.app.inject({
  method: 'POST', url: '/v1/apply', payload: { text: `apiVersion: shoal/v1\nkind: Service\nname: ${name}\nimage: ${image}\nreplicas: 1\ncommand: ["sleep", "3600"]\n` },
});

async function taskMessage(service: string, match: RegExp): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const body = (await s.app.inject({ url: `/v1/services/${service}` })).body;
    const m = match.exec(body);
    if (m !== null) return m[0];
    if (Date.now() > deadline) throw new Error(`no task of ${service} says ${match}: ${body.slice(0, 2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('registry logins', () => {
  it('a pull from a registry that asks for a login fails as unauthorized, with the registry\'s answer and what to do', async () => {
    expect((await apply('private', `${host}/team/app:1.0`)).statusCode).toBe(200);
    const msg = await taskMessage('private', /image_pull_failed: [^"]*unauthorized: [^"]*/);
    expect(msg).toContain('authentication required');
    expect(msg).toContain(`shoal registry login ${host}`);
  });

  it('login stores the user and, sealed, the password; nothing answers the password', async () => {
    const r = await withStdin(`${password}\n`, () => shoal('login', host, '--username', 'ci', '--password-stdin'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`logged in: ci at ${host}\n`);
    const again = await withStdin(password, () => shoal('login', host, '--username', 'ci', '--password-stdin', '--json'));
    expect(JSON.parse(again.stdout)).toMatchObject({ outcome: 'unchanged', rev: null, login: { host, username: 'ci' } });

    const ls = await shoal('ls', '--json');
    expect(JSON.parse(ls.stdout)).toMatchObject({ items: [{ host, username: 'ci' }] });
    const secret = registrySecretName(host);
    const stored = s.store.get(secretsCollection, secret)?.doc;
    expect(stored).toHaveProperty('sealed');
    expect(stored).not.toHaveProperty('value');
    for (const url of ['/v1/registries', '/v1/secrets', `/v1/docs/${secretsCollection}/${secret}`, `/v1/docs/${secretsCollection}`, `/v1/docs/${registriesCollection}`, '/v1/audit']) {
      const res = await s.app.inject({ url });
      expectNoPassword(res.body);
    }
    // Not a workload secret: secret ls leaves it out, and the secret routes refuse its name.
    expect((await s.app.inject({ url: '/v1/secrets' })).body).not.toContain(secret);
    expect(problemPaths(expectError(await s.app.inject({ url: `/v1/secrets/${secret}` }), 'bad_request'))).toEqual(['params.name']);
    expect(problemPaths(expectError(await s.app.inject({ method: 'PUT', url: `/v1/secrets/${secret}`, payload: { value: 'x' } }), 'bad_request'))).toEqual(['params.name']);
    // The audit log says who logged in to which registry.
    expect((await s.app.inject({ url: '/v1/audit' })).body).toContain(`${registriesCollection}/`);
  });

  it('the agent pulls with the login for that registry only, and the task runs', async () => {
    expect((await apply('private', `${host}/team/app:1.1`)).statusCode).toBe(200);
    await taskMessage('private', /"observed":"running"/);
    expect((await apply('public', 'docker.io/library/busybox:1.36')).statusCode).toBe(200);
    await taskMessage('public', /"observed":"running"/);
    const pulls = s.runtime?.pullAuths ?? [];
    expect(pulls.find((p) => p.image === `${host}/team/app:1.1`)?.auth).toEqual({ serveraddress: host, username: 'ci', password });
    expect(pulls.find((p) => p.image === 'docker.io/library/busybox:1.36')?.auth).toBeNull();
  });

  it('pins each tag to its digest at apply, keeps the pin while the tag is unchanged, moves it with resolveImage=always', async () => {
    const rt = s.runtime!;
    const ref = `${host}/team/app:2.0`;
    const a = `sha256:${'a'.repeat(64)}`;
    const b = `sha256:${'b'.repeat(64)}`;
    rt.publish(ref, a, [{ os: 'linux', architecture: 'amd64' }, { os: 'linux', architecture: 'arm64', variant: 'v8' }]);
    const first = (await apply('pinned', ref)).json() as { services: Array<{ outcome: string }>; images: unknown[] };
    expect(first.images).toEqual([{
      service: 'pinned', requested: ref, image: `${ref}@${a}`, outcome: 'resolved', digest: a,
      platforms: [{ os: 'linux', architecture: 'amd64' }, { os: 'linux', architecture: 'arm64', variant: 'v8' }],
    }]);
    const spec = async () => ((await s.app.inject({ url: '/v1/services/pinned' })).json() as { service: { record: { spec: { image: string }; specVersion: number } } }).service.record;
    expect((await spec()).spec.image).toBe(`${ref}@${a}`);
    // What the index offers goes into the record, for placement.
    expect(((await s.app.inject({ url: '/v1/services/pinned' })).json() as { service: { record: { imagePlatforms: unknown } } }).service.record.imagePlatforms).toEqual([
      { image: `${ref}@${a}`, platforms: [{ os: 'linux', architecture: 'amd64' }, { os: 'linux', architecture: 'arm64', variant: 'v8' }] },
    ]);
    await taskMessage('pinned', /"observed":"running"/);
    // The tag moves: an apply of the same document keeps the pin (changed, the default)...
    rt.publish(ref, b);
    const same = (await apply('pinned', ref)).json() as { services: Array<{ outcome: string }>; images: Array<{ outcome: string }> };
    expect(same.services[0]?.outcome).toBe('unchanged');
    expect(same.images[0]?.outcome).toBe('kept');
    // ...and resolveImage=always follows the tag: a new spec version, on the new digest.
    const moved = await s.app.inject({ method: 'POST', url: '/v1/apply?resolveImage=always', payload: { text: `apiVersion: shoal/v1\nkind: Service\nname: pinned\nimage: ${ref}\nreplicas: 1\ncommand: ["sleep", "3600"]\n` } });
    expect((moved.json() as { services: Array<{ outcome: string; fields: string[] }> }).services[0]).toMatchObject({ outcome: 'updated', fields: ['image'] });
    expect(await spec()).toMatchObject({ spec: { image: `${ref}@${b}` }, specVersion: 2 });
    // never: the tag as written.
    const never = await s.app.inject({ method: 'POST', url: '/v1/apply?resolveImage=never&dryRun=true', payload: { text: `apiVersion: shoal/v1\nkind: Service\nname: pinned\nimage: ${ref}\nreplicas: 1\ncommand: ["sleep", "3600"]\n` } });
    expect((never.json() as { images?: unknown }).images).toBeUndefined();
  });

  it('a service that names a login (registryLogin) pulls with that one, not its image registry\'s', async () => {
    const r = await withStdin('mirror-pw\n', () => shoal('login', 'mirror.lan', '--username', 'mirror-user', '--password-stdin'));
    expect(r.code, r.stderr).toBe(0);
    const image = `${host}/team/app:2.0`;
    s.runtime?.allowPull(image);
    const res = await s.app.inject({
      method: 'POST', url: '/v1/apply?resolveImage=never',
      payload: { text: `apiVersion: shoal/v1\nkind: Service\nname: named\nimage: ${image}\nregistryLogin: Mirror.LAN\nreplicas: 1\ncommand: ["sleep", "3600"]\n` },
    });
    expect(res.statusCode, res.body).toBe(200);
    const spec = ((await s.app.inject({ url: '/v1/services/named' })).json() as { service: { record: { spec: { registryLogin: string | null } } } }).service.record.spec;
    expect(spec.registryLogin).toBe('mirror.lan');
    // The registry at ${host} wants its own login: the named one is sent, and refused there.
    await taskMessage('named', /unauthorized/);
    const pulls = (s.runtime?.pullAuths ?? []).filter((p) => p.image === image);
    expect(pulls.at(-1)?.auth).toEqual({ serveraddress: 'mirror.lan', username: 'mirror-user', password: 'mirror-pw' });
    expect(problemPaths(expectError(await s.app.inject({
      method: 'POST', url: '/v1/apply', payload: { text: `apiVersion: shoal/v1\nkind: Service\nname: bad\nimage: busybox:1\nregistryLogin: "not a host"\n` },
    }), 'bad_request'))).toEqual(['services[0].registryLogin']);
    expect((await s.app.inject({ method: 'DELETE', url: '/v1/services/named' })).statusCode).toBe(200);
    expect((await shoal('logout', 'mirror.lan')).code).toBe(0);
  });

  it('refuses a host that is not one, and says an unknown login is not found; logout removes the password too', async () => {
    const bad = await withStdin(password, () => shoal('login', 'https://x/y', '--username', 'ci', '--password-stdin'));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('is not a registry host');
    expect(problemPaths(expectError(await s.app.inject({ method: 'PUT', url: '/v1/registries/a%2Fb', payload: { username: 'u', password: 'p' } }), 'bad_request'))).toEqual(['params.host']);
    expect(problemPaths(expectError(await s.app.inject({ method: 'PUT', url: `/v1/registries/${host}`, payload: { username: 'u', password: '' } }), 'bad_request'))).toEqual(['body.password']);
    const unknown = await shoal('logout', 'ghcr.io', '--json');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found');
    const out = await shoal('logout', host);
    expect(out.code, out.stderr).toBe(0);
    expect(s.store.get(secretsCollection, registrySecretName(host))).toBeUndefined();
    expect((await shoal('ls')).stdout).toContain('no registry logins');
    // A registry that refuses (no login now) or does not answer: the tag is kept, the apply says so and is not failed.
    for (const image of [`${host}/team/app:3.0`, 'absent/app:1']) {
      const r = await s.app.inject({ method: 'POST', url: '/v1/apply?resolveImage=always', payload: { text: `apiVersion: shoal/v1\nkind: Service\nname: offline\nimage: ${image}\nreplicas: 0\n` } });
      expect(r.statusCode, r.body).toBe(200);
      const body = r.json() as { warnings: string[] };
      expect(body.warnings).toHaveLength(1);
      expect(body.warnings[0]).toMatch(new RegExp(`^service offline: image ${image.replace(/[.]/g, '\\.')} kept as a tag, not pinned to a digest \\((unauthorized|unreachable): `));
      expect(((await s.app.inject({ url: '/v1/services/offline' })).json() as { service: { record: { spec: { image: string } } } }).service.record.spec.image).toBe(image);
    }
  });
});
