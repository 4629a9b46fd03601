// The first release of a node's releases folder, made by `shoal install` from the package it
// runs (docs/operations.md, "Rolling upgrade"): the package's files are copied into
// <data>/releases/<version>-installed/ with node_modules linked to the package's own, and
// releases/current points at it, so the unit's ExecStart (through releases/current) runs it and
// `shoal upgrade` can later swap it. A package that was never built (a source checkout with no
// dist/shoal.mjs) cannot be copied on its own: it gets no releases folder.

import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { featureLevelMax } from '../../base/feature-level.ts';
import { releaseMarkerFile, Releases, type ReleaseMarker } from './upgrade-releases.ts';

/** What `npm pack` puts in the package (package.json "files", and package.json itself). */
const packageEntries = ['bin', 'dist', 'docs', 'package.json', 'README.md'];

export type SeedResult =
  | { seeded: true; release: string; existed: boolean }
  | { seeded: false; why: string };

/** Seeds `releases` from `packageRoot` unless releases/current already names a release. */
export function seedReleases(releases: Releases, packageRoot: string, now = new Date()): SeedResult {
  const current = releases.link('current');
  if (current !== null && releases.marker(current) !== undefined) return { seeded: true, release: current, existed: true };
  const bundle = path.join(packageRoot, 'dist', 'shoal.mjs');
  if (!existsSync(bundle)) return { seeded: false, why: `${packageRoot} has no built dist/shoal.mjs (a source checkout): install from a package ('npm pack', then 'npm install -g') to upgrade with 'shoal upgrade'` };
  const version = (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
  const name = `${version}-installed`;
  const dir = path.join(releases.dir, name);
  releases.ensureDir();
  const tmp = path.join(releases.dir, `.seed-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  for (const e of packageEntries) {
    if (existsSync(path.join(packageRoot, e))) cpSync(path.join(packageRoot, e), path.join(tmp, e), { recursive: true });
  }
  symlinkSync(realpathSync(path.join(packageRoot, 'node_modules')), path.join(tmp, 'node_modules'));
  // No tarball: the sum is the bundle's, to tell two installed builds of one version apart.
  const marker: ReleaseMarker = { name, version, sha256: createHash('sha256').update(readFileSync(bundle)).digest('hex'), receivedAt: now.toISOString(), nodeModules: 'shared' };
  writeFileSync(path.join(tmp, releaseMarkerFile), `${JSON.stringify(marker, null, 2)}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  releases.setLink('current', name);
  releases.recordLevel(name, featureLevelMax);
  return { seeded: true, release: name, existed: false };
}
