// `npm pack` of the project installs and runs on a machine with only Node.js: the package holds
// the built bundle (nothing builds at install), the command lands on PATH, and an installed node
// founds a one-node cluster, takes a write and stops gracefully. The install fetches the
// dependencies from the npm registry, as any install does.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import pkg from '../../package.json' with { type: 'json' };
import { freePort } from '../../bench/lib/proc.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(path.join(os.tmpdir(), 'shoal-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('the npm package', { timeout: 240_000 }, () => {
  it('installs from its tarball with the command on PATH, and runs a node', async () => {
    execFileSync('npm', ['pack', '--pack-destination', work, '--silent'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
    if (tarball === undefined) throw new Error('npm pack wrote no tarball');
    const listing = execFileSync('tar', ['tzf', path.join(work, tarball)], { encoding: 'utf8' }).split('\n');
    expect(listing).toContain('package/dist/shoal.mjs');
    expect(listing).toContain('package/bin/shoal.js');
    // serve's one script and its loader, never a code cache a node of this checkout wrote beside it.
    expect(listing).toContain('package/dist/serve.cjs');
    expect(listing).toContain('package/bin/code-cache.js');
    expect(listing.filter((f) => /\.(cache|tmp)$/.test(f))).toEqual([]);
    expect(listing.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);

    const prefix = path.join(work, 'prefix');
    execFileSync('npm', ['install', '-g', '--prefix', prefix, path.join(work, tarball), '--no-audit', '--no-fund'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const env = { ...process.env, PATH: `${path.join(prefix, 'bin')}:${process.env.PATH ?? ''}`, SHOAL_FROM_SOURCE: '' };
    const run = (...args: string[]): string => execFileSync('shoal', args, { env, encoding: 'utf8', cwd: work });
    expect(run('--version')).toContain(`shoal ${pkg.version}`);

    const dir = path.join(work, 'n1');
    const identity = JSON.parse(run('init', '--data', dir, '--name', 'n1', '--json', '--no-start')) as { id: string };
    const api = `127.0.0.1:${await freePort()}`;
    const peer = `127.0.0.1:${await freePort()}`;
    writeFileSync(path.join(dir, 'shoal.yaml'), stringify({
      dataDir: '.', api: { listen: api }, peer: { listen: peer }, runtime: { kind: 'none' },
      bootstrap: [{ id: identity.id, name: 'n1', apiAddress: api, peerAddress: peer }],
    }));
    const node = spawn('shoal', ['serve', '--config', path.join(dir, 'shoal.yaml')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let logs = '';
    node.stdout.on('data', (b: Buffer) => { logs += b.toString(); });
    node.stderr.on('data', (b: Buffer) => { logs += b.toString(); });
    const exited = new Promise<number | null>((r) => node.once('exit', (code) => r(code)));
    try {
      // Over HTTPS with the admin credential init wrote to $SHOAL_CONFIG: the bundle's TLS client.
      let written = false;
      for (let i = 0; i < 60 && !written; i++) {
        await sleep(200);
        try {
          run('doc', 'put', 't', 'a', '--data', JSON.stringify({ v: 1 }), '--addr', api);
          written = true;
        } catch {
          // not up yet
        }
      }
      expect(written).toBe(true);
      // Run from the bundle, not through the TypeScript loader (which the package does not need).
      expect(run('doc', 'get', 't', 'a', '--addr', api)).toContain('"v": 1');
    } finally {
      node.kill('SIGTERM');
    }
    const code = await exited;
    if (code !== 0) console.log(logs);
    expect(code).toBe(0);
  });
});
