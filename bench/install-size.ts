// The installed package's size (issue 45: fit for a Raspberry Pi). Packs the working tree as a
// release is packed (`npm pack`: the bundle in dist/, bin/, docs/, the README), installs the
// tarball into an empty prefix as a user would (`npm install --omit=dev`: the registry or npm's
// cache), and measures what lands on disk: the whole prefix, the package itself, and each
// dependency with what it pulls in. It then checks that nothing only the build or the tests need
// (esbuild, tsx, TypeScript and its tooling, vitest, eslint) was installed.
//
//   npm run bench:install -- [--write]
//
// --write replaces the "install-size" section of bench/RESULTS.md. About a minute (the pack
// bundles the tree; the install reads npm's cache when it can).

import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { writeNamedSection } from './lib/report.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Packages only a build, a test or an editor needs: none may be installed for a user. */
export const buildOnly = ['esbuild', 'tsx', 'typescript', 'vitest', 'eslint', '@esbuild', 'typescript-eslint', 'puppeteer-core', 'fast-check'];

const help = `usage: npm run bench:install -- [--write]

Packs the working tree (npm pack), installs the tarball into an empty prefix with
npm install --omit=dev, and prints the size on disk: the prefix, the package, each dependency
(with what it pulls in); fails when a build-only package (${buildOnly.join(', ')}) was installed.

Options:
  --write       write the "install-size" section of bench/RESULTS.md
  -h, --help    show this help`;

/** Bytes on disk under `p` (allocated blocks, as du counts them; symlinks not followed). */
export function diskBytes(p: string): number {
  const st = lstatSync(p);
  if (!st.isDirectory()) return st.blocks * 512;
  let total = st.blocks * 512;
  for (const e of readdirSync(p)) total += diskBytes(path.join(p, e));
  return total;
}

function run(cmd: string, args: string[], cwd: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status}: ${r.stderr.trim().slice(-2000)}`);
  return r.stdout;
}

/** The top-level packages of a node_modules folder (a scope's packages as @scope/name). */
export function packagesIn(nodeModules: string): string[] {
  if (!existsSync(nodeModules)) return [];
  const out: string[] = [];
  for (const e of readdirSync(nodeModules)) {
    if (e.startsWith('.')) continue;
    if (e.startsWith('@')) for (const s of readdirSync(path.join(nodeModules, e))) out.push(`${e}/${s}`);
    else out.push(e);
  }
  return out.sort();
}

const mib = (b: number): string => (b / 1024 / 1024).toFixed(1);

function main(): void {
  const { values } = parseArgs({ options: { write: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } });
  if (values.help) {
    console.log(help);
    return;
  }
  const work = mkdtempSync(path.join(os.tmpdir(), 'shoal-install-'));
  try {
    const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], root)) as { filename: string; size: number; unpackedSize: number; entryCount: number }[];
    const p = packed[0];
    if (p === undefined) throw new Error('npm pack wrote no tarball');
    const tarball = path.join(work, p.filename);
    const prefix = path.join(work, 'prefix');
    const started = performance.now();
    run('npm', ['install', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline', '--prefix', prefix, tarball], work);
    const installMs = performance.now() - started;
    const nm = path.join(prefix, 'node_modules');
    const pkgs = packagesIn(nm);
    const sizes = pkgs.map((name) => ({ name, bytes: diskBytes(path.join(nm, name)) })).sort((a, b) => b.bytes - a.bytes);
    const total = diskBytes(prefix);
    const own = sizes.find((s) => s.name === 'shoal')?.bytes ?? 0;
    const offending = pkgs.filter((n) => buildOnly.some((b) => n === b || n.startsWith(`${b}/`)));
    const nativeBuilds = pkgs.filter((n) => existsSync(path.join(nm, n, 'binding.gyp')) || existsSync(path.join(nm, n, 'prebuilds')));
    const lines = [
      '## The installed size (issue 45)',
      '',
      `Command: \`npm run bench:install -- --write\` (bench/install-size.ts), ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${os.cpus().length} cores, Node ${process.version}, npm ${run('npm', ['--version'], root).trim()}.`,
      `\`npm pack\` of the working tree, then \`npm install --omit=dev\` of the tarball into an empty prefix (what a user installs; npm's cache when it has the packages).`,
      '',
      '| what | size |',
      '|---|---:|',
      `| the tarball (\`npm pack\`, ${p.entryCount} files) | ${mib(p.size)} MiB |`,
      `| the package unpacked (the bundle, bin/, docs/, README) | ${mib(p.unpackedSize)} MiB (${mib(own)} MiB on disk) |`,
      `| installed, everything under the prefix (${pkgs.length} packages) | ${mib(total)} MiB |`,
      `| install time (npm's cache warm) | ${(installMs / 1000).toFixed(1)} s |`,
      '',
      `Largest installed packages (MiB on disk): ${sizes.slice(0, 12).map((s) => `${s.name} ${mib(s.bytes)}`).join(', ')}.`,
      `Packages with a native part (a binding.gyp or prebuilds: built or loaded per architecture): ${nativeBuilds.length > 0 ? nativeBuilds.join(', ') : 'none'}.`,
      `Build-only packages installed (${buildOnly.join(', ')}): ${offending.length > 0 ? offending.join(', ') : 'none'}.`,
    ];
    const text = lines.join('\n');
    console.log(text);
    if (values.write) writeNamedSection('install-size', text);
    if (offending.length > 0) {
      console.error(`bench:install: a user's install holds build-only packages: ${offending.join(', ')} (move them to devDependencies)`);
      process.exitCode = 1;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) main();
