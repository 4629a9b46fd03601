// The receiving side of a rolling upgrade on one in-memory node (src/api/upgrade-routes.ts,
// src/node/upgrade-*.ts): a build is kept only when its sha256 matches, it is an npm package of
// shoal, and it starts and names its version; activation and rollback move the releases/current
// and releases/previous links and then ask for the restart (a fake here: a real one would end the
// test runner), and are refused, with nothing changed, when the node could not restart into them.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApi } from '../../src/api/app.ts';
import { Registry } from '../../src/base/metrics.ts';
import type { UpgradeHost } from '../../src/node/upgrade/upgrade-host.ts';
import { receiveBuild } from '../../src/node/upgrade/upgrade-receive.ts';
import { Releases, releaseMarkerFile } from '../../src/node/upgrade/upgrade-releases.ts';
import { ShoalError } from '../../src/errors.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { seedReleases } from '../../src/node/upgrade/upgrade-seed.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

const repo = path.resolve(import.meta.dirname, '../..');
const repoDeps = (JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies;

let s: SingleNode;
let app: FastifyInstance;
let work: string;
let host: UpgradeHost & { restarts: number };

/**
 * A tarball as `npm pack` makes it: package/ with package.json and a bin/shoal.js that prints
 * `says` and the feature level it applies (`level`; null: says none, as releases before level 6).
 */
function makeTarball(version: string, opts: { says?: string; deps?: Record<string, string>; extra?: string; link?: string; level?: number | null } = {}): { file: string; sha256: string } {
  const dir = mkdtempSync(path.join(work, 'pkg-'));
  mkdirSync(path.join(dir, 'package', 'bin'), { recursive: true });
  writeFileSync(path.join(dir, 'package', 'package.json'), JSON.stringify({ name: 'shoal', version, dependencies: opts.deps ?? repoDeps }));
  writeFileSync(path.join(dir, 'package', 'bin', 'shoal.js'), `console.log(JSON.stringify({ version: ${JSON.stringify(opts.says ?? version)}${opts.level === null ? '' : `, featureLevelMax: ${opts.level ?? featureLevelMax}`} }));\n`);
  if (opts.link !== undefined) symlinkSync(opts.link, path.join(dir, 'package', 'linked'));
  const entries = ['package'];
  if (opts.extra !== undefined) {
    writeFileSync(path.join(dir, opts.extra), 'x');
    entries.push(opts.extra);
  }
  const file = path.join(dir, 'out.tgz');
  execFileSync('tar', ['-czf', file, '-C', dir, ...entries]);
  return { file, sha256: createHash('sha256').update(readFileSync(file)).digest('hex') };
}

function put(t: { file: string; sha256: string }, sha256 = t.sha256) {
  return app.inject({ method: 'PUT', url: `/v1/upgrade/build?sha256=${sha256}`, headers: { 'content-type': 'application/octet-stream' }, payload: readFileSync(t.file) });
}

/** A releases folder whose seed release is what "this process" runs from, with the repo's node_modules. */
function seedFolder(dataDir: string): string {
  const seed = path.join(dataDir, 'releases', '0.0.1-seed');
  mkdirSync(seed, { recursive: true });
  writeFileSync(path.join(seed, 'package.json'), JSON.stringify({ name: 'shoal', version: '0.0.1', dependencies: repoDeps }));
  symlinkSync(path.join(repo, 'node_modules'), path.join(seed, 'node_modules'));
  writeFileSync(path.join(seed, releaseMarkerFile), JSON.stringify({ name: '0.0.1-seed', version: '0.0.1', sha256: '0'.repeat(64), receivedAt: new Date(0).toISOString(), nodeModules: 'installed' }));
  symlinkSync('0.0.1-seed', path.join(dataDir, 'releases', 'current'));
  // As the running process records at start (processUpgradeHost).
  Releases.ofDataDir(dataDir, seed).recordLevel('0.0.1-seed', featureLevelMax);
  return path.join(dataDir, 'releases', 'current');
}

beforeAll(async () => {
  s = await singleNode();
});
beforeEach(async () => {
  await app?.close();
  work = mkdtempSync(path.join(os.tmpdir(), 'shoal-upgrade-'));
  const runningRoot = seedFolder(work);
  const h = { releases: Releases.ofDataDir(work, runningRoot), runningRoot, nodeBinary: process.execPath, restarts: 0, restart: () => { h.restarts++; } };
  host = h;
  app = buildApi({ ...s.ctx, metrics: new Registry(), streams: new Set(), upgrade: host });
});
afterAll(async () => {
  await app.close();
  await s.close();
});

describe('PUT /v1/upgrade/build', () => {
  it('keeps a build whose sha256 matches, sharing node_modules when the dependencies are the same, and says so when it is sent again', async () => {
    const t = makeTarball('0.2.0');
    const res = await put(t);
    expect(res.statusCode, res.body).toBe(200);
    const name = `0.2.0-${t.sha256.slice(0, 8)}`;
    expect(res.json()).toMatchObject({ release: { name, version: '0.2.0', sha256: t.sha256, nodeModules: 'shared', existed: false } });
    expect(readlinkSync(path.join(work, 'releases', name, 'node_modules'))).toBe(realpathSync(path.join(repo, 'node_modules')));
    expect((await put(t)).json()).toMatchObject({ release: { name, existed: true } });
    const view = (await app.inject({ method: 'GET', url: '/v1/upgrade' })).json() as { current: string; running: string; releases: { name: string }[] };
    expect(view).toMatchObject({ current: '0.0.1-seed', running: '0.0.1-seed' });
    expect(view.releases.map((r) => r.name)).toEqual(['0.0.1-seed', name]);
    expect(host.restarts).toBe(0);
  });

  it('refuses a build whose sha256 differs, before unpacking it, and keeps nothing', async () => {
    const t = makeTarball('0.2.0');
    const res = await put(t, 'f'.repeat(64));
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'release_refused', details: { reason: 'checksum', sha256: t.sha256 } });
    expect(readdir(work)).toEqual(['0.0.1-seed', 'current']);
  });

  it('refuses a tarball with entries outside package/, and one that does not start as the version it names', async () => {
    expect((await put(makeTarball('0.2.0', { extra: 'evil' }))).json()).toMatchObject({ code: 'release_refused', details: { reason: 'not_package' } });
    expect((await put(makeTarball('0.2.0', { says: '0.1.9' }))).json()).toMatchObject({ code: 'release_refused', details: { reason: 'does_not_start' } });
    // A link under package/ (npm packs none) could lead a later entry out of the release folder.
    const linked = (await put(makeTarball('0.2.0', { link: '/etc' }))).json() as { code: string; message: string; details: { reason: string } };
    expect(linked).toMatchObject({ code: 'release_refused', details: { reason: 'not_package' } });
    expect(linked.message).toContain('package/linked -> /etc');
    expect(readdir(work)).toEqual(['0.0.1-seed', 'current']);
  });

  it('refuses a body that is not sent as application/octet-stream, and a sha256 that is not 64 hex digits', async () => {
    const t = makeTarball('0.2.0');
    expect((await app.inject({ method: 'PUT', url: `/v1/upgrade/build?sha256=${t.sha256}`, headers: { 'content-type': 'application/json' }, payload: '{}' })).json()).toMatchObject({ code: 'unsupported_media_type' });
    expect((await app.inject({ method: 'PUT', url: '/v1/upgrade/build?sha256=abc', headers: { 'content-type': 'application/octet-stream' }, payload: Buffer.from('x') })).json()).toMatchObject({ code: 'bad_request' });
  });

  it('stops reading a build past the size limit (receiveBuild bytesMax)', async () => {
    const releases = Releases.ofDataDir(work, host.runningRoot);
    const err = await receiveBuild(releases, host.runningRoot, Readable.from([Buffer.alloc(600), Buffer.alloc(600)]), '0'.repeat(64), { nodeBinary: process.execPath, bytesMax: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('payload_too_large');
    expect(readdir(work)).toEqual(['0.0.1-seed', 'current']);
  });
});

describe('POST /v1/upgrade/activate and /rollback', () => {
  it('points current at the release and previous at the old one, then restarts; rollback swaps them back', async () => {
    const t = makeTarball('0.2.0');
    const name = (await put(t)).json<{ release: { name: string } }>().release.name;
    const res = await app.inject({ method: 'POST', url: '/v1/upgrade/activate', payload: { release: name } });
    expect(res.json()).toMatchObject({ current: name, previous: '0.0.1-seed', restarting: true });
    await new Promise((r) => setImmediate(r));
    expect(host.restarts).toBe(1);
    expect(readlinkSync(path.join(work, 'releases', 'current'))).toBe(name);
    expect(readlinkSync(path.join(work, 'releases', 'previous'))).toBe('0.0.1-seed');
    const back = await app.inject({ method: 'POST', url: '/v1/upgrade/rollback' });
    expect(back.json()).toMatchObject({ current: '0.0.1-seed', previous: name, restarting: true });
    await new Promise((r) => setImmediate(r));
    expect(host.restarts).toBe(2);
  });

  it('refuses an unknown release, a rollback with no previous, and a node that does not run from releases/current, changing nothing', async () => {
    expect((await app.inject({ method: 'POST', url: '/v1/upgrade/activate', payload: { release: 'nope' } })).json()).toMatchObject({ code: 'not_found' });
    expect((await app.inject({ method: 'POST', url: '/v1/upgrade/rollback' })).json()).toMatchObject({ code: 'release_refused', details: { reason: 'no_previous' } });
    expect((await app.inject({ method: 'POST', url: '/v1/upgrade/rollback', headers: { 'content-type': 'application/json' }, payload: 'null' })).json()).toMatchObject({ code: 'bad_request' });
    const name = (await put(makeTarball('0.2.0'))).json<{ release: { name: string } }>().release.name;
    const elsewhere = buildApi({ ...s.ctx, metrics: new Registry(), streams: new Set(), upgrade: { ...host, releases: new Releases(path.join(work, 'releases'), repo), runningRoot: repo } });
    expect((await elsewhere.inject({ method: 'POST', url: '/v1/upgrade/activate', payload: { release: name } })).json()).toMatchObject({ code: 'release_refused', details: { reason: 'not_installed' } });
    const { restart: _r, ...noRestart } = host;
    const inert = buildApi({ ...s.ctx, metrics: new Registry(), streams: new Set(), upgrade: noRestart });
    expect((await inert.inject({ method: 'POST', url: '/v1/upgrade/activate', payload: { release: name } })).json()).toMatchObject({ code: 'release_refused', details: { reason: 'not_process' } });
    await elsewhere.close();
    await inert.close();
    expect(readlinkSync(path.join(work, 'releases', 'current'))).toBe('0.0.1-seed');
    expect(existsSync(path.join(work, 'releases', 'previous'))).toBe(false);
    expect(host.restarts).toBe(0);
  });

  it('refuses to activate, or roll back to, a release that cannot apply the cluster feature level, changing nothing', async () => {
    // The cluster level never goes down: an older release would stop at its first newer entry.
    const level = s.ctx.node.featureLevel;
    expect(level).toBe(featureLevelMax);
    const older = (await put(makeTarball('0.0.9', { level: level - 1 }))).json<{ release: { name: string } }>().release.name;
    const unstated = (await put(makeTarball('0.0.8', { level: null }))).json<{ release: { name: string } }>().release.name;
    const view = (await app.inject({ method: 'GET', url: '/v1/upgrade' })).json<{ featureLevel: number; releases: { name: string; featureLevelMax: number | null }[] }>();
    expect(view.featureLevel).toBe(level);
    expect(Object.fromEntries(view.releases.map((r) => [r.name, r.featureLevelMax]))).toEqual({ '0.0.1-seed': level, [older]: level - 1, [unstated]: 5 });
    for (const release of [older, unstated]) {
      const res = await app.inject({ method: 'POST', url: '/v1/upgrade/activate', payload: { release } });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: 'release_refused', details: { reason: 'feature_level', release, clusterFeatureLevel: level } });
    }
    expect(readlinkSync(path.join(work, 'releases', 'current'))).toBe('0.0.1-seed');
    // A previous release received by an older node has no record: it is asked, then refused.
    symlinkSync(older, path.join(work, 'releases', 'previous'));
    rmSync(path.join(work, 'releases', older, 'feature-level.json'));
    const back = await app.inject({ method: 'POST', url: '/v1/upgrade/rollback' });
    expect(back.json()).toMatchObject({ code: 'release_refused', details: { reason: 'feature_level', release: older, featureLevelMax: level - 1 } });
    expect(readlinkSync(path.join(work, 'releases', 'current'))).toBe('0.0.1-seed');
    expect(readlinkSync(path.join(work, 'releases', 'previous'))).toBe(older);
    expect(host.restarts).toBe(0);
  });
});

describe('seedReleases (shoal install)', () => {
  it('copies a built package into releases/<version>-installed, links its node_modules, points current at it, and keeps it when run again', () => {
    const pkg = mkdtempSync(path.join(os.tmpdir(), 'shoal-pkg-'));
    mkdirSync(path.join(pkg, 'bin'));
    mkdirSync(path.join(pkg, 'dist'));
    writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'shoal', version: '0.3.0', dependencies: repoDeps }));
    writeFileSync(path.join(pkg, 'bin', 'shoal.js'), '');
    writeFileSync(path.join(pkg, 'dist', 'shoal.mjs'), 'export {}');
    symlinkSync(path.join(repo, 'node_modules'), path.join(pkg, 'node_modules'));
    const data = mkdtempSync(path.join(os.tmpdir(), 'shoal-data-'));
    const releases = Releases.ofDataDir(data, path.join(data, 'releases', 'current'));
    expect(seedReleases(releases, pkg)).toEqual({ seeded: true, release: '0.3.0-installed', existed: false });
    expect(readlinkSync(path.join(data, 'releases', 'current'))).toBe('0.3.0-installed');
    expect(existsSync(path.join(data, 'releases', 'current', 'dist', 'shoal.mjs'))).toBe(true);
    expect(readlinkSync(path.join(data, 'releases', '0.3.0-installed', 'node_modules'))).toBe(realpathSync(path.join(repo, 'node_modules')));
    expect(releases.view()).toMatchObject({ running: '0.3.0-installed', current: '0.3.0-installed', releases: [{ name: '0.3.0-installed', version: '0.3.0', nodeModules: 'shared' }] });
    expect(seedReleases(releases, pkg)).toEqual({ seeded: true, release: '0.3.0-installed', existed: true });
  });

  it('seeds nothing from a package that was never built (a source checkout)', () => {
    const data = mkdtempSync(path.join(os.tmpdir(), 'shoal-data-'));
    const pkg = mkdtempSync(path.join(os.tmpdir(), 'shoal-pkg-'));
    expect(seedReleases(Releases.ofDataDir(data, pkg), pkg)).toMatchObject({ seeded: false });
    expect(existsSync(path.join(data, 'releases', 'current'))).toBe(false);
  });
});

function readdir(dataDir: string): string[] {
  return execFileSync('ls', ['-A', path.join(dataDir, 'releases')], { encoding: 'utf8' }).split('\n').filter((x) => x !== '').sort();
}

describe('Releases.prune', () => {
  /** Release folders as the receiving side leaves them: a marker, and node_modules of its own or a link to another's. */
  function folder(releases: Array<{ name: string; at: number; sharesWith?: string }>): string {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-prune-')), 'releases');
    for (const r of releases) {
      mkdirSync(path.join(dir, r.name), { recursive: true });
      writeFileSync(path.join(dir, r.name, releaseMarkerFile), JSON.stringify({
        name: r.name, version: r.name, sha256: '0'.repeat(64), receivedAt: new Date(r.at).toISOString(), nodeModules: r.sharesWith === undefined ? 'installed' : 'shared',
      }));
      if (r.sharesWith === undefined) mkdirSync(path.join(dir, r.name, 'node_modules'));
      else symlinkSync(realpathSync(path.join(dir, r.sharesWith, 'node_modules')), path.join(dir, r.name, 'node_modules'));
    }
    return dir;
  }
  const names = (dir: string): string[] => execFileSync('ls', [dir], { encoding: 'utf8' }).split('\n').filter((x) => x !== '').sort();

  it('keeps current, previous, the running one, later arrivals and every release whose node_modules a kept one uses', () => {
    // a: installed; b and c share a's node_modules; d installed; e shares d's; f arrived after e.
    const dir = folder([{ name: 'a', at: 1 }, { name: 'b', at: 2, sharesWith: 'a' }, { name: 'c', at: 3, sharesWith: 'b' }, { name: 'd', at: 4 }, { name: 'e', at: 5, sharesWith: 'd' }, { name: 'f', at: 6, sharesWith: 'e' }]);
    const releases = new Releases(dir, path.join(dir, 'd'));
    releases.setLink('current', 'c');
    releases.setLink('previous', 'b');
    // c shares (through b) a's node_modules, and d runs: nothing can go; e and f came after c.
    expect(releases.prune()).toEqual([]);
    releases.setLink('current', 'e');
    releases.setLink('previous', 'd');
    expect(releases.prune()).toEqual(['a', 'b', 'c']);
    expect(names(dir)).toEqual(['current', 'd', 'e', 'f', 'previous']);
    // What stays still starts: its node_modules resolve.
    expect(existsSync(path.join(dir, 'current', 'node_modules'))).toBe(true);
    expect(existsSync(path.join(dir, 'f', 'node_modules'))).toBe(true);
  });
});
