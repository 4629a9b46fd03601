// Receives a build for an upgrade (PUT /v1/upgrade/build): the bytes of an `npm pack` tarball
// stream to disk while their sha256 is computed; only a tarball whose sum matches the one the
// sender named is checked and unpacked (upgrade-tarball.ts: files and folders under package/
// only). Then it is made runnable and started once (`shoal version`) before it
// is kept as a release (upgrade-releases.ts). Any failure removes what was received.
//
// node_modules: the package holds no dependencies (native ones, LevelDB's binding among them,
// stay out of the bundle). When the new package.json asks for exactly the dependencies the running
// release has, the new release links to the running release's node_modules (the usual case, and
// it needs no registry); otherwise `npm install --omit=dev` runs in the new release (it needs the
// npm registry, or npm's cache, from this node).

import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable } from 'node:stream';
import { z } from 'zod';
import { ShoalError } from '../../errors.ts';
import { runReleaseCommand } from './upgrade-exec.ts';
import { extractPackageTarball } from './upgrade-tarball.ts';
import { releaseMarkerFile, releaseName, unstatedFeatureLevelMax, type ReleaseMarker, type Releases } from './upgrade-releases.ts';

/** The largest tarball taken (a shoal package is a few MiB; this leaves room without filling a disk). */
export const upgradeTarballBytesMax = 200 * 1024 * 1024;
const npmInstallTimeoutMs = 10 * 60_000;
const versionCheckTimeoutMs = 30_000;

const packageJsonSchema = z.object({
  name: z.literal('shoal'),
  version: z.string().min(1).max(64),
  dependencies: z.record(z.string(), z.string()).default({}),
}).loose();

export interface ReceiveOptions {
  /** The node binary the new release is checked with (this process's). */
  nodeBinary: string;
  bytesMax?: number;
}

export interface Received extends ReleaseMarker {
  /** True when this exact build was already here (nothing was written). */
  existed: boolean;
}

/** Writes `body` to `file`, hashing as it goes; refuses past `bytesMax`. Answers the hex sha256. */
async function streamToFile(body: Readable, file: string, bytesMax: number): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > bytesMax) {
        done(new ShoalError('payload_too_large', `the build is larger than ${bytesMax} bytes (upgradeTarballBytesMax); nothing was kept`, { limit: 'upgradeTarballBytesMax', max: bytesMax }));
        return;
      }
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(body, count, createWriteStream(file, { mode: 0o600 }));
  return { sha256: hash.digest('hex'), bytes };
}

function readPackageJson(dir: string): z.infer<typeof packageJsonSchema> {
  const file = path.join(dir, 'package.json');
  const parsed = existsSync(file) ? packageJsonSchema.safeParse(JSON.parse(readFileSync(file, 'utf8'))) : undefined;
  if (parsed?.success !== true) throw new ShoalError('release_refused', 'the tarball is not a shoal package (no package.json named shoal); nothing was activated', { reason: 'not_package' });
  return parsed.data;
}

const sameDeps = (a: Record<string, string>, b: Record<string, string>): boolean =>
  JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/** Links the running release's node_modules when the dependencies are the same, else installs them. */
async function provideNodeModules(pkgDir: string, deps: Record<string, string>, runningRoot: string): Promise<ReleaseMarker['nodeModules']> {
  const running = path.join(runningRoot, 'node_modules');
  let runningDeps: Record<string, string> | undefined;
  try {
    runningDeps = readPackageJson(runningRoot).dependencies;
  } catch {
    runningDeps = undefined;
  }
  if (runningDeps !== undefined && sameDeps(deps, runningDeps) && existsSync(running)) {
    symlinkSync(realpathSync(running), path.join(pkgDir, 'node_modules'));
    return 'shared';
  }
  // --ignore-scripts: the package's own `prepare` would try to build from sources it does not
  // ship; the native dependencies load prebuilt binaries their packages carry.
  await runReleaseCommand('npm', ['install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: pkgDir, timeoutMs: npmInstallTimeoutMs, reason: 'npm_install' });
  return 'installed';
}

const versionAnswer = z.object({ version: z.string(), featureLevelMax: z.number().int().positive().optional() }).loose();

/** What the build in `pkgDir` says of itself (`shoal version --json`). */
async function askVersion(pkgDir: string, nodeBinary: string): Promise<z.infer<typeof versionAnswer> | undefined> {
  const env = { ...process.env };
  delete env.SHOAL_FROM_SOURCE;
  const out = await runReleaseCommand(nodeBinary, [path.join(pkgDir, 'bin', 'shoal.js'), 'version', '--json'], { timeoutMs: versionCheckTimeoutMs, env, reason: 'does_not_start' });
  let raw: unknown;
  try {
    raw = JSON.parse(out.trim().split('\n').pop() ?? '{}');
  } catch {
    return undefined;
  }
  const said = versionAnswer.safeParse(raw);
  return said.success ? said.data : undefined;
}

/**
 * The new build must start and say it is the version its package.json names. Answers the
 * feature level it can apply (unstatedFeatureLevelMax when it does not say).
 */
async function checkStarts(pkgDir: string, version: string, nodeBinary: string): Promise<number> {
  const said = await askVersion(pkgDir, nodeBinary);
  if (said?.version !== version) {
    throw new ShoalError('release_refused', `the new build started but says it is ${said?.version ?? 'nothing readable'}, not ${version}; nothing was activated`, { reason: 'does_not_start' });
  }
  return said.featureLevelMax ?? unstatedFeatureLevelMax;
}

/**
 * The feature level release `name` can apply: as recorded beside it, or else asked of the
 * release itself and recorded (a release received by an older node has no record).
 */
export async function releaseLevel(releases: Releases, name: string, nodeBinary: string): Promise<number> {
  const known = releases.levelOf(name);
  if (known !== undefined) return known;
  const said = await askVersion(path.join(releases.dir, name), nodeBinary);
  if (said === undefined) throw new ShoalError('release_refused', `release ${name} does not start or says nothing readable; nothing was changed`, { reason: 'does_not_start', release: name });
  const level = said.featureLevelMax ?? unstatedFeatureLevelMax;
  releases.recordLevel(name, level);
  return level;
}

/**
 * Refuses to make release `name` current when the cluster runs at a feature level it cannot
 * apply: it would stop (upgrade_required) at the first entry of that level, which the cluster
 * writes from then on. The level never goes down (src/base/feature-level.ts).
 */
export async function refuseBelowLevel(releases: Releases, name: string, clusterLevel: number, nodeBinary: string): Promise<void> {
  const level = await releaseLevel(releases, name, nodeBinary);
  if (level >= clusterLevel) return;
  throw new ShoalError('release_refused', `release ${name} applies feature levels up to ${level}, but the cluster runs at level ${clusterLevel} (raised once every member ran a newer release; it never goes down): it would stop at the first entry it cannot apply. Nothing was changed; to run an older release, restore a snapshot taken before the upgrade onto it (docs/operations.md, "Rolling upgrade")`, { reason: 'feature_level', release: name, featureLevelMax: level, clusterFeatureLevel: clusterLevel });
}

/**
 * Receives `body`, a tarball whose sha256 the sender says is `sha256`, into a new release.
 * Answers its marker; the same build sent again is answered from what is there.
 */
export async function receiveBuild(releases: Releases, runningRoot: string, body: Readable, sha256: string, opts: ReceiveOptions): Promise<Received> {
  releases.ensureDir();
  const incoming = mkdtempSync(path.join(releases.dir, '.incoming-'));
  try {
    const tarball = path.join(incoming, 'package.tgz');
    const got = await streamToFile(body, tarball, opts.bytesMax ?? upgradeTarballBytesMax);
    if (got.sha256 !== sha256) {
      throw new ShoalError('release_refused', `the build's sha256 is ${got.sha256}, not ${sha256} as sent: it was damaged on the way or is another file; nothing was unpacked`, { reason: 'checksum', sha256: got.sha256, bytes: got.bytes });
    }
    await extractPackageTarball(tarball, incoming);
    const pkgDir = path.join(incoming, 'package');
    const pkg = readPackageJson(pkgDir);
    const name = releaseName(pkg.version, sha256);
    const existing = releases.marker(name);
    if (existing !== undefined) return { ...existing, existed: true };
    const nodeModules = await provideNodeModules(pkgDir, pkg.dependencies, runningRoot);
    const level = await checkStarts(pkgDir, pkg.version, opts.nodeBinary);
    const marker: ReleaseMarker = { name, version: pkg.version, sha256, receivedAt: new Date().toISOString(), nodeModules };
    // The marker goes in last: a release without one was never finished and is not offered.
    writeFileSync(path.join(pkgDir, releaseMarkerFile), `${JSON.stringify(marker, null, 2)}\n`);
    rmSync(path.join(releases.dir, name), { recursive: true, force: true });
    renameSync(pkgDir, path.join(releases.dir, name));
    releases.recordLevel(name, level);
    return { ...marker, existed: false };
  } finally {
    rmSync(incoming, { recursive: true, force: true });
  }
}
