// shoal install / uninstall against a temporary root (these machines do not run systemd as PID
// 1): the unit systemd's own checker accepts without a warning, restarts that follow the exit-code
// table, the enable symlink systemctl makes, and refusals that write nothing.

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { noRestartExitCodes } from '../../src/cli/args.ts';
import { findJemalloc, jemallocConf } from '../../src/cli/node-environment.ts';
import { renderUnit } from '../../src/cli/systemd-unit.ts';
import { initNode } from '../../src/node/identity.ts';
import { inProcess } from './in-process.ts';


async function nodeDir(name = 'n1'): Promise<{ dir: string; root: string }> {
  const base = mkdtempSync(path.join(os.tmpdir(), 'shoal-install-'));
  const dir = path.join(base, name);
  await initNode({ dataDir: dir, name });
  writeFileSync(path.join(dir, 'shoal.yaml'), 'dataDir: .\napi:\n  listen: 127.0.0.1:7100\npeer:\n  listen: 127.0.0.1:7200\n');
  return { dir, root: path.join(base, 'root') };
}

describe('shoal install', () => {
  it('writes a unit that systemd-analyze verifies without a warning, and enables it under the root', async () => {
    const { dir, root } = await nodeDir();
    const r = await inProcess('install', '--data', dir, '--root', root, '--json');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const answer = JSON.parse(r.stdout) as { unit: string; file: string; enabled: boolean; started: boolean };
    expect(answer).toMatchObject({ unit: 'shoal-n1.service', enabled: true, started: false });
    const unit = readFileSync(answer.file, 'utf8');
    expect(unit).toContain(`ExecStart=${process.execPath} `);
    // A built package is kept in the node's releases folder and run through releases/current
    // (what shoal upgrade swaps); a source checkout with no dist/ is run in place.
    const built = existsSync(fileURLToPath(new URL('../../dist/shoal.mjs', import.meta.url)));
    expect(unit).toContain(built ? `${path.join(dir, 'releases', 'current', 'bin', 'shoal.js')} serve` : `${fileURLToPath(new URL('../../bin/shoal.js', import.meta.url))} serve`);
    expect((answer as { release?: string | null }).release ?? null).toBe(built ? `${(JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { version: string }).version}-installed` : null);
    expect(unit).toContain(`serve --config ${path.join(dir, 'shoal.yaml')}`);
    expect(unit).toContain(`RestartPreventExitStatus=${noRestartExitCodes.join(' ')}`);
    expect(unit).toContain('Restart=on-failure');
    expect(unit).toContain('KillSignal=SIGTERM');
    // 10 s of API drain (limits.apiDrainMs) + 15 s for the transfer and the rest.
    expect(unit).toContain('TimeoutStopSec=25s');
    if (os.cpus().length <= 2) expect(unit).toContain('Environment=NODE_OPTIONS=--v8-pool-size=1');
    // The allocator: jemalloc when this machine has it (.ci/run installs libjemalloc2), else none.
    const jemalloc = findJemalloc();
    expect((answer as { allocator?: string }).allocator).toBe(jemalloc === undefined ? 'system' : 'jemalloc');
    if (jemalloc === undefined) expect(unit).not.toContain('LD_PRELOAD');
    else expect(unit).toContain(`Environment=LD_PRELOAD=${jemalloc}\nEnvironment=MALLOC_CONF=${jemallocConf}\n`);
    const verify = spawnSync('systemd-analyze', ['verify', answer.file], { encoding: 'utf8' });
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
    const link = path.join(root, 'etc/systemd/system/multi-user.target.wants/shoal-n1.service');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    // The same again is a no-op; a different unit needs --force.
    expect((await inProcess('install', '--data', dir, '--root', root)).code).toBe(0);
    const changed = await inProcess('install', '--data', dir, '--root', root, '--node-options=--max-old-space-size=200');
    expect(changed.code).toBe(2);
    expect(changed.stderr).toContain('give --force to replace it');
    expect(readFileSync(answer.file, 'utf8')).toBe(unit);
    expect((await inProcess('install', '--data', dir, '--root', root, '--node-options', '', '--force')).code).toBe(0);
    expect(readFileSync(answer.file, 'utf8')).not.toContain('NODE_OPTIONS');
    expect((await inProcess('install', '--data', dir, '--root', root, '--allocator', 'system', '--force')).code).toBe(0);
    expect(readFileSync(answer.file, 'utf8')).not.toContain('LD_PRELOAD');
    const badAllocator = await inProcess('install', '--data', dir, '--root', root, '--allocator', 'tcmalloc', '--force');
    expect(badAllocator.code).toBe(2);
    expect(badAllocator.stderr).toContain('--allocator tcmalloc: expected one of auto, jemalloc, system');
    expect(readFileSync(answer.file, 'utf8')).not.toContain('LD_PRELOAD');

    const gone = await inProcess('uninstall', '--data', dir, '--root', root, '--json');
    expect(gone.code).toBe(0);
    expect(JSON.parse(gone.stdout)).toMatchObject({ removed: true });
    expect(existsSync(answer.file)).toBe(false);
    expect(existsSync(link)).toBe(false);
    expect(JSON.parse((await inProcess('uninstall', '--data', dir, '--root', root, '--json')).stdout)).toMatchObject({ removed: false });
  });

  it('refuses a directory that is not a node, and a config serve would refuse, writing nothing', async () => {
    const { dir, root } = await nodeDir();
    const empty = mkdtempSync(path.join(os.tmpdir(), 'shoal-install-empty-'));
    const notNode = await inProcess('install', '--data', empty, '--root', root);
    expect(notNode.code).toBe(2);
    expect(notNode.stderr).toContain("not a node's data directory");
    writeFileSync(path.join(dir, 'shoal.yaml'), 'dataDir: .\napi:\n  listen: 127.0.0.1:99999\n');
    const bad = await inProcess('install', '--data', dir, '--root', root);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('api.listen');
    expect(existsSync(path.join(root, 'etc/systemd/system/shoal-n1.service'))).toBe(false);
    expect((await inProcess('install', '--root', root)).stderr).toContain('--data DIR is required');
  });

  it('quotes paths with spaces so systemd reads them as one word', () => {
    const unit = renderUnit({
      nodeName: 'n1', nodeId: 'abc', dataDir: '/srv/my data', configFile: '/srv/my data/shoal.yaml', nodeBinary: process.execPath,
      shoalEntry: '/opt/shoal/bin/shoal.js', environment: { NODE_OPTIONS: '--v8-pool-size=1 --max-old-space-size=200' }, stopTimeoutSeconds: 25, docsFile: '/opt/shoal/docs/operations.md',
    });
    expect(unit).toContain(`ExecStart=${process.execPath} /opt/shoal/bin/shoal.js serve --config "/srv/my data/shoal.yaml"`);
    expect(unit).toContain('WorkingDirectory=/srv/my data');
    expect(unit).toContain('Environment="NODE_OPTIONS=--v8-pool-size=1 --max-old-space-size=200"');
    const odd = renderUnit({
      nodeName: 'n1', nodeId: 'abc', dataDir: '/srv/100%', configFile: '/srv/100%/a$b.yaml', nodeBinary: process.execPath,
      shoalEntry: '/opt/shoal/bin/shoal.js', environment: {}, stopTimeoutSeconds: 25, docsFile: '/opt/shoal/docs/operations.md',
    });
    expect(odd).toContain('--config /srv/100%%/a$$b.yaml');
    expect(odd).toContain('WorkingDirectory=/srv/100%%');
    // systemd itself splits it the same way.
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-unit-')), 'shoal-n1.service');
    writeFileSync(file, unit);
    const out = execFileSync('systemd-analyze', ['verify', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(out).toBe('');
  });
});
