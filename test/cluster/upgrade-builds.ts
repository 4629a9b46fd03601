// The two builds of the rolling-upgrade test, as `npm pack` tarballs: a pinned earlier release
// built from git (the commit that added the receiving side of upgrades, so the old nodes can take
// a build), and the working tree with its version bumped in a copy, so the versions differ. Both
// link the checkout's node_modules and build their dist/ with scripts/bundle.mjs, as `npm pack`
// would (its `prepare`), then pack without running scripts again.

import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
/** What the working tree's bundle and package are made of. */
const treeEntries = ['bin', 'src', 'fsm', 'transport', 'net', 'scripts', 'docs', 'README.md', 'package.json', 'tsconfig.json'];

function git(args: string[]): string {
  return execFileSync('git', ['-C', repoRoot, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 * 1024 * 1024 });
}

/** Fetches `sha` when this clone lacks it (a shallow clone, or one without the branch). */
function ensureCommit(sha: string): void {
  try {
    git(['cat-file', '-e', `${sha}^{commit}`]);
    return;
  } catch {
    // Not here: fetch it below.
  }
  try {
    git(['fetch', 'origin', sha]);
  } catch {
    git(['fetch', '--unshallow', 'origin']);
  }
}

/** Builds dist/ in `dir` and packs it; answers the tarball's path. */
function bundleAndPack(dir: string, out: string): string {
  symlinkSync(realpathSync(path.join(repoRoot, 'node_modules')), path.join(dir, 'node_modules'));
  execFileSync(process.execPath, ['scripts/bundle.mjs', 'dist'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const packed = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const [first] = JSON.parse(packed) as { filename: string }[];
  if (first === undefined) throw new Error(`npm pack in ${dir} printed no file: ${packed}`);
  return path.join(out, first.filename);
}

/** The release at commit `sha`, from git, packed. */
export function buildRelease(sha: string, work: string): string {
  ensureCommit(sha);
  const dir = path.join(work, `release-${sha.slice(0, 8)}`);
  mkdirSync(dir, { recursive: true });
  const archive = path.join(work, `${sha.slice(0, 8)}.tar`);
  git(['archive', '--format=tar', '-o', archive, sha]);
  execFileSync('tar', ['-xf', archive, '-C', dir]);
  return bundleAndPack(dir, work);
}

/** The working tree, with package.json's version set to `version`, packed. */
export function buildWorkingTree(version: string, work: string): string {
  const dir = path.join(work, 'working-tree');
  mkdirSync(dir, { recursive: true });
  for (const e of treeEntries) cpSync(path.join(repoRoot, e), path.join(dir, e), { recursive: true });
  const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify({ ...pkg, version }, null, 2)}\n`);
  return bundleAndPack(dir, work);
}
