// Issue 40 against a real private registry (test/support/registry.ts: Debian's docker-registry
// with TLS from a CA the test makes, trusted by the machine's dockerd, and an htpasswd login) and
// a real three-process cluster on the machine's Docker (docker-system.ts). One registry and one
// cluster serve every case, in order. Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/registries.test.ts

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskItem } from '../../src/api/control-views.ts';
import { ensureBusyboxImage } from '../../src/executor/busybox-image.ts';
import { ensureTestImage, testImage } from '../executor/test-image.ts';
import { buildSizedImage, TestRegistry } from '../support/registry.ts';
import { ThrottleProxy } from '../support/throttle-proxy.ts';
import { DockerSystem, serviceDoc } from './docker-system.ts';

const registry = new TestRegistry();
let sys: DockerSystem;
let image = '';
const pulled: string[] = [];

beforeAll(async () => {
  sys = new DockerSystem({});
  await ensureTestImage();
  await registry.start(sys.docker);
  image = await registry.push(sys.docker, testImage, 'team/app', 'v1');
  await sys.start();
}, 120_000);

afterAll(async () => {
  const problems: string[] = [];
  await sys.close().catch((err: unknown) => problems.push(String(err)));
  // The images the nodes pulled from the registry go with it.
  for (const ref of pulled) await sys.docker.getImage(ref).remove({ noprune: true }).catch(() => undefined);
  await registry.close();
  if (problems.length > 0) throw new Error(problems.join('\n'));
}, 60_000);

async function call(method: 'PUT' | 'DELETE' | 'GET', urlPath: string, body?: unknown): Promise<{ status: number; text: string }> {
  const n = await sys.leader();
  const res = await fetch(`http://${n.apiAddress}${urlPath}`, {
    method, signal: AbortSignal.timeout(10_000),
    ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, text: await res.text() };
}

/** The failure messages of the service's tasks, once at least `count` of them failed. */
async function failures(service: string, count: number): Promise<string[]> {
  return sys.waitFor(`${count} failed task(s) of ${service}`, async () => {
    const s = await sys.service(service);
    const failed = s.tasks.filter((t: TaskItem) => t.observed === 'failed').map((t) => t.record.message ?? t.report?.message ?? '');
    return failed.length >= count ? failed : undefined;
  }, 60_000);
}

/** Every file under the nodes' data directories, as text: where a password must never be written in the clear. */
function nodeFilesText(): string {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(readFileSync(p).toString('latin1'));
    }
  };
  for (const n of sys.cluster.nodes) walk(n.dir);
  return out.join('\n');
}

describe('a private registry with TLS and a login', () => {
  it('without a login, every replica fails to pull as unauthorized, with the registry\'s answer', async () => {
    // The apply is not failed for a registry that refuses: it keeps the tag and says so.
    const a = await sys.api<{ warnings?: string[] }>('POST', '/v1/apply', { documents: [serviceDoc('priv', { image, replicas: 3 })] });
    expect(a.status).toBe(200);
    expect(a.body.warnings).toEqual([expect.stringMatching(new RegExp(`^service priv: image ${image.replace(/[.]/g, '\\.')} kept as a tag, not pinned to a digest \\(unauthorized: `))]);
    const msgs = await failures('priv', 3);
    for (const m of msgs) {
      expect(m).toMatch(/^image_pull_failed: image \S+ could not be pulled: unauthorized: .*no basic auth credentials/);
      expect(m).toContain(`shoal registry login ${registry.host}`);
    }
  }, 90_000);

  it('with a login, the three replicas pull and run; the password is never answered or stored in the clear', async () => {
    const r = await call('PUT', `/v1/registries/${registry.host}`, { username: registry.username, password: registry.password });
    expect(r.status, r.text).toBe(200);
    pulled.push(image);
    const s = await sys.waitConverged('priv', 90_000);
    const running = s.tasks.filter((t) => t.desired === 'running' && t.observed === 'running');
    expect(running).toHaveLength(3);
    expect((await sys.containers('priv')).filter((c) => c.running)).toHaveLength(3);
    for (const url of ['/v1/registries', '/v1/secrets', '/v1/docs/shoal.secrets', '/v1/docs/shoal.registries', '/v1/audit', '/v1/services/priv']) {
      const a = await call('GET', url);
      expect(a.status, url).toBe(200);
      expect(a.text.includes(registry.password), url).toBe(false);
    }
    expect((await call('GET', '/v1/registries')).text).toContain(`"username":"${registry.username}"`);
    // Not in the log, the snapshots, the nodes' own logs or any other file of theirs.
    expect(nodeFilesText().includes(registry.password)).toBe(false);
    expect(sys.cluster.tailLogs(100_000).includes(registry.password)).toBe(false);
  }, 120_000);

  it('pins the tag to its digest at apply: when the tag moves, every replica of the spec version stays on one build', async () => {
    const a = await sys.api<{ images: Array<{ image: string; digest: string; outcome: string }> }>('POST', '/v1/apply', { documents: [serviceDoc('pinned', { image, replicas: 2 })] });
    expect(a.status).toBe(200);
    const [first] = a.body.images;
    expect(first).toMatchObject({ outcome: 'resolved', image: expect.stringMatching(new RegExp(`^${image.replace(/[.]/g, '\\.')}@sha256:[0-9a-f]{64}$`)) });
    pulled.push(first!.image);
    expect((await sys.service('pinned')).service.record.spec.image).toBe(first!.image);
    await sys.waitConverged('pinned', 90_000);
    // The tag moves to another build.
    const other = 'shoal-test/registry-moved:local';
    await ensureBusyboxImage(sys.docker, other);
    await registry.push(sys.docker, other, 'team/app', 'v1');
    await sys.docker.getImage(other).remove({ noprune: true });
    // The same document again (resolveImage changed, the default): the pin is kept. One more
    // replica of the same spec version starts on the pinned build, not the tag's new one.
    const b = await sys.api<{ services: Array<{ outcome: string }>; images: Array<{ outcome: string }> }>('POST', '/v1/apply', { documents: [serviceDoc('pinned', { image, replicas: 3 })] });
    expect(b.body.images[0]?.outcome).toBe('kept');
    await sys.waitConverged('pinned', 90_000);
    const builds = async (): Promise<Set<string>> => {
      const cs = (await sys.containers('pinned')).filter((c) => c.running);
      return new Set(await Promise.all(cs.map(async (c) => ((await sys.docker.getContainer(c.id).inspect()) as { Image: string }).Image)));
    };
    const before = await builds();
    expect(before.size).toBe(1);
    // resolveImage=always follows the tag: a new spec version, every replica on the new build.
    const c = await sys.api<{ services: Array<{ outcome: string; fields?: string[] }>; images: Array<{ image: string; digest: string }> }>('POST', '/v1/apply?resolveImage=always', { documents: [serviceDoc('pinned', { image, replicas: 3 })] });
    expect(c.body.services[0]).toMatchObject({ outcome: 'updated', fields: ['image'] });
    expect(c.body.images[0]?.digest).not.toBe(first!.digest);
    pulled.push(c.body.images[0]!.image);
    const end = await sys.waitConverged('pinned', 120_000);
    expect(end.service.record.specVersion).toBe(2);
    const after = await builds();
    expect(after.size).toBe(1);
    expect([...after][0]).not.toBe([...before][0]);
  }, 300_000);

  it('a stop-first update pulls the new image on the node before it stops the old task', async () => {
    await sys.apply(serviceDoc('rolling', { image, replicas: 1, update: { order: 'stop-first', parallelism: 1 } }));
    const before = await sys.waitConverged('rolling', 90_000);
    expect(before.tasks.filter((t) => t.desired === 'running')).toHaveLength(1);
    // A new build under a new tag, not on the machine yet.
    const v3 = 'shoal-test/registry-v3:local';
    await ensureBusyboxImage(sys.docker, v3);
    const next = await registry.push(sys.docker, v3, 'team/app', 'v3');
    await sys.docker.getImage(v3).remove({ noprune: true });
    const sinceS = Math.floor(Date.now() / 1000) - 1;
    const a = await sys.api<{ images: Array<{ image: string }> }>('POST', '/v1/apply', { documents: [serviceDoc('rolling', { image: next, replicas: 1, update: { order: 'stop-first', parallelism: 1 } })] });
    const pinnedNext = a.body.images[0]!.image;
    pulled.push(pinnedNext);
    const end = await sys.waitFor('the update done', async () => {
      const s = await sys.service('rolling');
      return s.service.record.specVersion === 2 && s.service.status.converged ? s : undefined;
    }, 120_000);
    expect(end.service.record.spec.image).toBe(pinnedNext);
    const log = sys.events;
    if (log === undefined) throw new Error('no event log');
    await log.catchUp(sys.cluster.clusterId);
    const oldDie = log.events.find((e) => e.action === 'die' && e.service === 'rolling' && e.specVersion === 1);
    expect(oldDie, 'the old task\'s container died').toBeDefined();
    // Docker's own record of the pull, in its event log: before the old container stopped.
    const stream = await sys.docker.getEvents({ since: sinceS, until: Math.ceil(Date.now() / 1000) + 1, filters: { type: ['image'], event: ['pull'] } }) as unknown as NodeJS.ReadableStream;
    const text = await new Promise<string>((resolve, reject) => {
      let out = '';
      stream.on('data', (c: Buffer) => { out += c.toString(); });
      stream.on('end', () => resolve(out));
      stream.on('error', reject);
    });
    const pulls = text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { id: string; timeNano: number })
      .filter((e) => e.id.startsWith(`${registry.host}/team/app`));
    expect(pulls.length, text).toBeGreaterThanOrEqual(1);
    expect(BigInt(pulls[0]!.timeNano) < oldDie!.timeNs, 'the new image was pulled before the old container stopped').toBe(true);
  }, 240_000);

  it('from a slow registry, the old task of a stop-first update still runs while the new image downloads', async () => {
    // The registry through a proxy that holds the download while the test looks (not timed).
    const proxy = new ThrottleProxy(registry.address, 1024 * 1024);
    let host = '';
    try {
      host = `${registry.address.host}:${await proxy.start(registry.address.host)}`;
      registry.trustAlias(host);
      const login = await call('PUT', `/v1/registries/${host}`, { username: registry.username, password: registry.password });
      expect(login.status, login.text).toBe(200);
      const src = 'shoal-test/registry-slow:local';
      await buildSizedImage(src, 1);
      await registry.push(sys.docker, src, 'team/slow', 'v1');
      await sys.docker.getImage(src).remove();
      const next = `${host}/team/slow:v1`;
      pulled.push(next);
      const doc = (img: string) => serviceDoc('slow', { image: img, replicas: 1, update: { order: 'stop-first', parallelism: 1 } });
      await sys.apply(doc(image));
      await sys.waitConverged('slow', 90_000);
      const running = (await sys.containers('slow')).filter((c) => c.running).map((c) => c.id);
      expect(running).toHaveLength(1);
      proxy.hold();
      // Not pinned at apply (its resolution would go through the held proxy): the tag as written.
      const a = await sys.api<unknown>('POST', '/v1/apply?resolveImage=never', { documents: [doc(next)] });
      expect(a.status).toBe(200);
      // The node's pull has reached the registry and waits for its answer: the old task still runs.
      await sys.waitFor('the pull under way', async () => (proxy.connections > 0 ? true : undefined), 60_000);
      expect((await sys.containers('slow')).filter((c) => c.running).map((c) => c.id)).toEqual(running);
      // Its task may be asked to stop already (the pull comes first), but it runs, and no new one does.
      const during = await sys.service('slow');
      expect(during.tasks.filter((t) => t.observed === 'running').map((t) => t.record.specVersion)).toEqual([1]);
      proxy.release();
      const end = await sys.waitFor('the update done', async () => {
        const s = await sys.service('slow');
        return s.service.record.specVersion === 2 && s.service.status.converged ? s : undefined;
      }, 120_000);
      expect(end.service.record.spec.image).toBe(next);
      expect(proxy.bytesSent).toBeGreaterThan(1024 * 1024);
    } finally {
      proxy.release();
      await proxy.close();
      // The logout case below expects the registry's own login alone.
      if (host !== '') await call('DELETE', `/v1/registries/${host}`);
    }
  }, 240_000);

  it('an image index for two platforms runs on the nodes of the one they have; one of a platform no node has is refused with the reason', async () => {
    // An index (manifest list) pushed through the registry's API, naming the test image's manifest.
    const m = await registry.api('GET', '/v2/team/app/manifests/v3', { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
    expect(m.status).toBe(200);
    const entry = (platform: Record<string, string>) => ({ mediaType: 'application/vnd.docker.distribution.manifest.v2+json', size: m.body.length, digest: String(m.headers['docker-content-digest']), platform });
    const putIndex = async (tag: string, platforms: Array<Record<string, string>>) => {
      const body = JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json', manifests: platforms.map(entry) });
      const r = await registry.api('PUT', `/v2/team/app/manifests/${tag}`, { body, headers: { 'content-type': 'application/vnd.docker.distribution.manifest.list.v2+json' } });
      expect(r.status, r.body.toString()).toBe(201);
      return `${registry.host}/team/app:${tag}`;
    };
    const nodes = await sys.nodes();
    const mine = nodes[0]!.record.platform;
    expect(mine, 'the nodes record their platform').toBeDefined();
    expect(nodes.every((n) => JSON.stringify(n.record.platform) === JSON.stringify(mine))).toBe(true);
    const both = await putIndex('multi', [{ os: mine!.os, architecture: mine!.architecture }, { os: 'linux', architecture: 's390x' }]);
    const a = await sys.api<{ images: Array<{ image: string; platforms: unknown[] }> }>('POST', '/v1/apply', { documents: [serviceDoc('multi', { image: both, replicas: 2 })] });
    expect(a.body.images[0]?.platforms).toEqual([{ os: mine!.os, architecture: mine!.architecture }, { os: 'linux', architecture: 's390x' }]);
    pulled.push(a.body.images[0]!.image);
    await sys.waitConverged('multi', 90_000);
    const only = await putIndex('s390x-only', [{ os: 'linux', architecture: 's390x' }]);
    await sys.apply(serviceDoc('elsewhere', { image: only, replicas: 1 }));
    const reason = await sys.waitFor('the task pending with its reason', async () => {
      const t = (await sys.service('elsewhere')).tasks.find((x) => x.record.pendingReason !== null && x.record.pendingReason !== undefined);
      return t?.record.pendingReason ?? undefined;
    }, 30_000);
    const p = `${mine!.os}/${mine!.architecture}${mine!.variant !== undefined ? `/${mine!.variant}` : ''}`;
    // The names in the order the scheduler met the nodes.
    expect(reason).toMatch(new RegExp(`^3 nodes ${p} \\(the image offers linux/s390x only\\) \\((n[123]), (?!\\1)(n[123]), (?!\\1|\\2)n[123]\\)$`));
    expect(await sys.containers('elsewhere')).toEqual([]);
    await call('DELETE', '/v1/services/elsewhere');
    await call('DELETE', '/v1/services/multi');
  }, 180_000);

  it('a tag the registry does not have fails as not_found with its answer', async () => {
    await sys.apply(serviceDoc('missing', { image: `${registry.host}/team/app:nope`, replicas: 1 }));
    const [m] = await failures('missing', 1);
    expect(m).toMatch(/^image_pull_failed: image \S+ could not be pulled: not_found: .*manifest unknown/);
    await call('DELETE', '/v1/services/missing');
  }, 90_000);

  it('a registry whose certificate the nodes do not trust fails as tls', async () => {
    const other = await registry.push(sys.docker, testImage, 'team/app', 'v2');
    await registry.untrust();
    try {
      await sys.apply(serviceDoc('untrusted', { image: other, replicas: 1 }));
      const [m] = await failures('untrusted', 1);
      expect(m).toMatch(/^image_pull_failed: image \S+ could not be pulled: tls: .*x509/);
    } finally {
      await registry.trust();
      await call('DELETE', '/v1/services/untrusted');
    }
  }, 90_000);

  it('logout removes the login and its password', async () => {
    const r = await call('DELETE', `/v1/registries/${registry.host}`);
    expect(r.status, r.text).toBe(200);
    expect(JSON.parse((await call('GET', '/v1/registries')).text)).toMatchObject({ items: [] });
    expect((await call('GET', '/v1/docs/shoal.secrets')).text).not.toContain('registry-');
  }, 30_000);
});
