// shoal install / shoal uninstall: a node as a systemd service (docs/operations.md, "Running as
// a service"). The unit is rendered by systemd-unit.ts; this file checks the node, writes or
// removes the unit under a root (/ by default, a temporary one in tests), and asks systemctl to
// enable and start it when systemd runs this machine.

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CommandError, runCommand } from '../base/run-command.ts';
import { ShoalError } from '../errors.ts';
import { loadConfig } from '../server/config.ts';
import { isInitialized, loadIdentity } from '../node/identity.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { renderUnit, unitName } from './systemd-unit.ts';
import { allocatorOf, allocators, findJemalloc, jemallocConf, nodeEnvironment, smallMachineNodeOptions, type Allocator } from './node-environment.ts';
import { packageRootOf } from '../node/upgrade/upgrade-package-root.ts';
import { Releases } from '../node/upgrade/upgrade-releases.ts';
import { seedReleases, type SeedResult } from '../node/upgrade/upgrade-seed.ts';

// Found, not assumed: this module sits at another depth in the sources than in the bundle.
const packageRoot = packageRootOf(import.meta.url);
/** A transfer (3 election timeouts at most), the API drain, and the rest of the stop. */
const stopMarginSeconds = 15;
/**
 * How long one systemctl call may take: it waits for the unit's start or stop job, and a stop
 * waits up to the unit's stop timeout (the API drain plus stopMarginSeconds).
 */
const systemctlTimeoutMs = 5 * 60_000;

export const installHelp = `Usage: shoal install --data DIR [--root DIR] [--node-options OPTS] [--allocator A] [--no-start] [--force] [--json]

Installs the node whose data directory is DIR as a systemd service, shoal-<name>.service: it
starts at boot, restarts after a crash but not after the exit codes a restart cannot cure (2, 4,
5, 6, 7: docs/operations.md, "Exit codes"), and stops gracefully (SIGTERM: a leader hands
leadership over and the API answers what it holds). Then it enables and starts the unit, when
systemd runs this machine; otherwise it says how.

The installed package is copied into DIR/releases/<version>-installed (node_modules linked to the
package's), DIR/releases/current points at it, and the unit starts DIR/releases/current/bin/shoal.js,
so 'shoal upgrade' can swap builds (docs/operations.md, "Rolling upgrade"). A source checkout
with no built dist/ is run in place instead, and cannot be upgraded that way.

Options:
  --data DIR           the node's data directory, made by 'shoal init' (required)
  --root DIR           install under DIR instead of / (an image being built, a test); enables
                       the unit there with 'systemctl --root' and starts nothing
  --node-options OPTS  NODE_OPTIONS for the node (default: ${smallMachineNodeOptions} on a machine with two
                       cores or fewer, else none; '' for none)
  --allocator A        the node's memory allocator: auto (default: jemalloc when
                       libjemalloc.so.2 is installed, else the C library's), jemalloc (refused
                       when it is not installed: 'apt-get install libjemalloc2'), system.
                       jemalloc runs with LD_PRELOAD and
                       MALLOC_CONF=${jemallocConf}:
                       it gives back the memory a burst of writes leaves
                       (docs/operations.md, "The memory allocator")
  --no-start           write and enable the unit, do not start it
  --force              replace a unit of that name that differs
  --json               print {unit, file, enabled, started, release, allocator} as JSON
  -h, --help           show this help

Needs root, unless --root is given. 'shoal uninstall --data DIR' undoes it.
Exit codes: 0 installed (or already the same), 1 failed, 2 usage error.`;

export const uninstallHelp = `Usage: shoal uninstall --data DIR [--root DIR] [--json]

Stops and disables the node's systemd service (shoal-<name>.service) and removes its unit file.
The data directory is left as it is: remove the node from the cluster first if it is leaving
for good ('shoal cluster remove NAME').

Options:
  --data DIR   the node's data directory (required)
  --root DIR   uninstall from under DIR instead of /
  --json       print {unit, file, removed} as JSON
  -h, --help   show this help

Needs root, unless --root is given.
Exit codes: 0 removed (or was not installed), 1 failed, 2 usage error.`;

interface Target {
  unit: string;
  file: string;
  root: string;
  /** Whether systemd runs this machine and we act on it (not under --root). */
  live: boolean;
}

/** The node of `dataDir` and where its unit goes. */
function target(dataDir: string, rootFlag: string | undefined): { t: Target; name: string; id: string; dir: string } {
  const dir = path.resolve(dataDir);
  if (!isInitialized(dir)) throw new UsageError(`--data ${dataDir}: not a node's data directory (no node.json); make one with 'shoal init'`);
  const { name, id } = loadIdentity(dir);
  const root = rootFlag === undefined ? '/' : path.resolve(rootFlag);
  if (rootFlag === undefined && process.getuid?.() !== 0) {
    throw new UsageError('installing a systemd service needs root: run it with sudo, or give --root DIR to write the files under DIR');
  }
  const unit = unitName(name);
  const live = rootFlag === undefined && existsSync('/run/systemd/system');
  return { t: { unit, file: path.join(root, 'etc/systemd/system', unit), root, live }, name, id, dir };
}

async function systemctl(t: Target, args: string[]): Promise<void> {
  const rootArgs = t.live ? [] : [`--root=${t.root}`];
  try {
    await runCommand('systemctl', [...rootArgs, ...args], { timeoutMs: systemctlTimeoutMs });
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    throw new ShoalError('service_manager_failed', err.message, { command: 'systemctl', args: [...rootArgs, ...args], reason: err.reason });
  }
}

export async function installCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    data: { type: 'string' }, root: { type: 'string' }, 'node-options': { type: 'string' }, allocator: { type: 'string', default: 'auto' },
    'no-start': { type: 'boolean', default: false }, force: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, installHelp);
  if (values.help) { console.log(installHelp); return exitCodes.ok; }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.data === undefined) throw new UsageError('--data DIR is required');
  const allocator = values.allocator as Allocator;
  if (!allocators.includes(allocator)) throw new UsageError(`--allocator ${values.allocator}: expected one of ${allocators.join(', ')}`);
  const environment = nodeEnvironment({ allocator, nodeOptions: values['node-options'], cpus: os.cpus().length, jemalloc: findJemalloc() });
  const { t, name, id, dir } = target(values.data, values.root);
  const configFile = path.join(dir, 'shoal.yaml');
  // The config must be one `shoal serve` accepts, or the unit would only fail at boot.
  loadConfig(configFile);
  const releases = Releases.ofDataDir(dir, packageRoot);
  // The unit goes through releases/current when the package can be kept there (seeded below,
  // once every check has passed), else it runs the package in place.
  const packaged = releases.link('current') !== null || existsSync(path.join(packageRoot, 'dist', 'shoal.mjs'));
  const runFrom = packaged ? path.join(releases.dir, 'current') : packageRoot;
  const unit = renderUnit({
    nodeName: name, nodeId: id, dataDir: dir, configFile, nodeBinary: process.execPath,
    shoalEntry: path.join(runFrom, 'bin', 'shoal.js'), docsFile: path.join(runFrom, 'docs', 'operations.md'),
    environment,
    stopTimeoutSeconds: Math.ceil(loadConfig(configFile).limits.apiDrainMs / 1000) + stopMarginSeconds,
  });
  if (existsSync(t.file) && readFileSync(t.file, 'utf8') !== unit && !values.force) {
    throw new UsageError(`${t.file} exists and differs from the unit this would write; give --force to replace it, or 'shoal uninstall --data ${values.data}' first`);
  }
  const seed: SeedResult = packaged ? seedReleases(releases, packageRoot) : { seeded: false, why: `${packageRoot} has no built dist/shoal.mjs (a source checkout): the unit runs it in place, and 'shoal upgrade' cannot swap it` };
  mkdirSync(path.dirname(t.file), { recursive: true });
  writeFileSync(t.file, unit, { mode: 0o644 });
  if (t.live) await systemctl(t, ['daemon-reload']);
  await systemctl(t, ['enable', t.unit]);
  const started = t.live && !values['no-start'];
  if (started) await systemctl(t, ['restart', t.unit]);
  const release = seed.seeded ? seed.release : null;
  if (values.json) console.log(JSON.stringify({ unit: t.unit, file: t.file, enabled: true, started, release, allocator: allocatorOf(environment) }));
  else {
    if (allocator === 'auto' && allocatorOf(environment) === 'system') console.log("the node runs on the C library's malloc: install jemalloc ('apt-get install libjemalloc2') and run this again with --force, for a node that gives back the memory a burst of writes leaves");
    console.log(seed.seeded ? `${seed.existed ? 'kept' : 'made'} ${path.join(releases.dir, seed.release)}; ${path.join(releases.dir, 'current')} points at it` : `no releases folder: ${seed.why}`);
    console.log(`wrote ${t.file} and enabled ${t.unit}`);
    if (started) console.log(`started ${t.unit}: follow it with journalctl -u ${t.unit} -f`);
    else if (values.root === undefined && !values['no-start']) console.log(`systemd does not run this machine (no /run/systemd/system): start the node with 'shoal serve --config ${configFile}'`);
  }
  return exitCodes.ok;
}

export async function uninstallCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    data: { type: 'string' }, root: { type: 'string' },
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, uninstallHelp);
  if (values.help) { console.log(uninstallHelp); return exitCodes.ok; }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.data === undefined) throw new UsageError('--data DIR is required');
  const { t } = target(values.data, values.root);
  const removed = existsSync(t.file);
  if (removed) {
    // Stops gracefully (SIGTERM) before the file goes, so systemd still knows how to stop it.
    await systemctl(t, t.live ? ['disable', '--now', t.unit] : ['disable', t.unit]);
    rmSync(t.file);
    if (t.live) await systemctl(t, ['daemon-reload']);
  }
  if (values.json) console.log(JSON.stringify({ unit: t.unit, file: t.file, removed }));
  else console.log(removed ? `stopped, disabled and removed ${t.unit}` : `${t.unit} is not installed (no ${t.file}): nothing to do`);
  return exitCodes.ok;
}
