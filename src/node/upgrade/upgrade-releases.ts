// The releases folder of a node (docs/operations.md, "Rolling upgrade"):
//
//   <data>/releases/<version>-<sha8>/   an unpacked, checked package: bin/, dist/, docs/,
//                                       package.json, node_modules, and release.json (below)
//   <data>/releases/current -> <name>   what the service manager starts (the unit's ExecStart
//                                       goes through current/bin/shoal.js)
//   <data>/releases/previous -> <name>  what `shoal upgrade --rollback` goes back to
//   <data>/releases/.incoming-*/        an upload being received; removed when done or refused
//
// The links are relative, so the folder can move. Each is replaced atomically: a new link under a
// temporary name, then rename(2) over the old one; a crash in between leaves the old link.

import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../../errors.ts';

export const releasesDirName = 'releases';
export const releaseMarkerFile = 'release.json';
/**
 * The highest cluster feature level a release can apply, beside its marker: a file of its own,
 * since the marker's schema is strict in every release (an older one would refuse a new key and
 * no longer offer the release). Written when the release is received (its `version --json`
 * says the level) and by the release itself when it runs.
 */
export const releaseLevelFile = 'feature-level.json';
/**
 * The level taken for a release whose `version --json` does not say one: releases said it from
 * level 6 on, so one that does not is of level 5 at most.
 */
export const unstatedFeatureLevelMax = 5;
const levelSchema = z.strictObject({ featureLevelMax: z.number().int().positive() });

export const releaseMarkerSchema = z.strictObject({
  name: z.string(),
  version: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  receivedAt: z.string(),
  /** shared: node_modules links to the release that received it (same dependencies); installed: npm install ran. */
  nodeModules: z.enum(['shared', 'installed']),
});
export type ReleaseMarker = z.infer<typeof releaseMarkerSchema>;

export interface ReleasesView {
  dir: string;
  /** The release this process runs, or null when it does not run from the releases folder. */
  running: string | null;
  current: string | null;
  previous: string | null;
  /** Each release's marker, and the feature level it can apply where recorded (null: not yet). */
  releases: (ReleaseMarker & { featureLevelMax: number | null })[];
}

/** A release's name: its version and the start of its tarball's sha256, e.g. 0.1.1-3fa2b9c0. */
export function releaseName(version: string, sha256: string): string {
  return `${version}-${sha256.slice(0, 8)}`;
}

const nameOk = (name: string): boolean => /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$/.test(name) && name !== 'current' && name !== 'previous';

export class Releases {
  /** `runningRoot`: the package folder this process runs from (upgrade-package-root.ts). */
  constructor(readonly dir: string, private readonly runningRoot: string) {}

  static ofDataDir(dataDir: string, runningRoot: string): Releases {
    return new Releases(path.join(dataDir, releasesDirName), runningRoot);
  }

  ensureDir(): void {
    mkdirSync(this.dir, { recursive: true });
  }

  /** The checked release `name`, or undefined (not there, or never finished checking). */
  marker(name: string): ReleaseMarker | undefined {
    if (!nameOk(name)) return undefined;
    const file = path.join(this.dir, name, releaseMarkerFile);
    if (!existsSync(file)) return undefined;
    const parsed = releaseMarkerSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  }

  /** The feature level release `name` can apply, as recorded beside it; undefined when not recorded. */
  levelOf(name: string): number | undefined {
    if (!nameOk(name)) return undefined;
    try {
      const parsed = levelSchema.safeParse(JSON.parse(readFileSync(path.join(this.dir, name, releaseLevelFile), 'utf8')));
      return parsed.success ? parsed.data.featureLevelMax : undefined;
    } catch {
      return undefined;
    }
  }

  recordLevel(name: string, featureLevelMax: number): void {
    if (!nameOk(name) || !existsSync(path.join(this.dir, name))) return;
    if (this.levelOf(name) === featureLevelMax) return;
    const file = path.join(this.dir, name, releaseLevelFile);
    writeFileSync(`${file}.tmp`, `${JSON.stringify({ featureLevelMax })}\n`);
    renameSync(`${file}.tmp`, file);
  }

  link(which: 'current' | 'previous'): string | null {
    try {
      return path.basename(readlinkSync(path.join(this.dir, which)));
    } catch {
      return null;
    }
  }

  /** The release whose folder this process runs from (both sides resolved), or null. */
  running(): string | null {
    let root: string;
    try {
      root = realpathSync(this.runningRoot);
    } catch {
      return null;
    }
    if (path.dirname(root) !== safeRealpath(this.dir)) return null;
    return path.basename(root);
  }

  view(): ReleasesView {
    const names = existsSync(this.dir) ? readdirSync(this.dir).filter((n) => nameOk(n)).sort() : [];
    const releases = names.map((n) => this.marker(n)).filter((m): m is ReleaseMarker => m !== undefined)
      .map((m) => ({ ...m, featureLevelMax: this.levelOf(m.name) ?? null }));
    return { dir: this.dir, running: this.running(), current: this.link('current'), previous: this.link('previous'), releases };
  }

  /** Points `which` at release `name`, atomically. */
  setLink(which: 'current' | 'previous', name: string): void {
    const tmp = path.join(this.dir, `.${which}.tmp-${process.pid}`);
    rmSync(tmp, { force: true });
    symlinkSync(name, tmp);
    renameSync(tmp, path.join(this.dir, which));
  }

  /**
   * Makes `name` current and the old current previous. Refused unless `name` is a checked
   * release and this node runs from the releases folder (else its service manager would not start
   * what `current` names). Answers the old current, or null.
   */
  activate(name: string): string | null {
    if (this.marker(name) === undefined) {
      throw new ShoalError('not_found', `no checked release '${name}' in ${this.dir}; send it first (PUT /v1/upgrade/build)`, { release: name });
    }
    this.requireRunningFromReleases();
    const old = this.link('current');
    if (old !== null && old !== name) this.setLink('previous', old);
    this.setLink('current', name);
    return old;
  }

  /** Swaps current and previous; answers the release now current. */
  rollback(): string {
    const prev = this.link('previous');
    if (prev === null || this.marker(prev) === undefined) {
      throw new ShoalError('release_refused', `there is no previous release to go back to in ${this.dir}`, { reason: 'no_previous' });
    }
    this.requireRunningFromReleases();
    const cur = this.link('current');
    this.setLink('current', prev);
    if (cur !== null) this.setLink('previous', cur);
    return prev;
  }

  /**
   * Removes the releases nothing needs any more, and answers their names: kept are current,
   * previous, the one this process runs, any received after current (sent for a next upgrade),
   * and the release whose node_modules a kept one shares (a received release links the running
   * one's, so removing that would break it). Called once a release is activated, so a node keeps
   * about three builds whatever the number of upgrades.
   */
  prune(): string[] {
    const v = this.view();
    const currentAt = v.releases.find((r) => r.name === v.current)?.receivedAt ?? '';
    const keep = new Set([v.current, v.previous, v.running].filter((n): n is string => n !== null));
    for (const r of v.releases) if (r.receivedAt > currentAt) keep.add(r.name);
    // Sharing is followed to its end: a link may point at a release that itself links another.
    for (let grew = true; grew;) {
      grew = false;
      for (const name of [...keep]) {
        const owner = this.nodeModulesOwner(name);
        if (owner !== null && !keep.has(owner)) {
          keep.add(owner);
          grew = true;
        }
      }
    }
    const removed = v.releases.map((r) => r.name).filter((n) => !keep.has(n));
    for (const name of removed) rmSync(path.join(this.dir, name), { recursive: true, force: true });
    return removed;
  }

  /** The release of this folder whose node_modules release `name` uses, or null (its own, or one outside the folder). */
  private nodeModulesOwner(name: string): string | null {
    const real = safeRealpath(path.join(this.dir, name, 'node_modules'));
    const dir = safeRealpath(this.dir);
    if (real === null || dir === null || path.dirname(path.dirname(real)) !== dir) return null;
    const owner = path.basename(path.dirname(real));
    return owner === name ? null : owner;
  }

  private requireRunningFromReleases(): void {
    if (this.running() !== null) return;
    throw new ShoalError('release_refused', `this node does not run from ${path.join(this.dir, 'current')} (it runs from ${this.runningRoot}), so its service manager would not start a new build there; install the node with 'shoal install' (docs/operations.md, "Rolling upgrade")`, { reason: 'not_installed' });
  }
}

function safeRealpath(p: string): string | null {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
}
