// The shoal command as a user runs it: help on every command, meaningful exit codes, and a
// clear refusal to start on damaged data.

import { formatKey } from '../../src/storage/keys.ts';
import { seal } from '../../src/storage/sealed.ts';
import { KeyFile } from '../../src/storage/key-file.ts';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync, appendFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DiskStorage, storagePaths } from '../../src/storage/index.ts';
import { freePort } from '../../bench/lib/proc.ts';

const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
const run = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, ...args], { timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
};

describe('shoal CLI', () => {
  it('has --help on every command', async () => {
    for (const cmd of ['init', 'serve', 'dev', 'status', 'version']) {
      const r = await run(cmd, '--help');
      expect(r.code, cmd).toBe(0);
      expect(r.stdout).toContain(`Usage: shoal ${cmd}`);
      expect(r.stdout).toContain('Exit codes');
    }
    const top = await run('--help');
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('Commands:');
  });

  it('exits 2 with a pointer to --help on unknown commands and flags', async () => {
    expect((await run('frobnicate')).code).toBe(2);
    const r = await run('status', '--bogus');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("shoal status --help");
  });

  it('exits 3 when status cannot reach a node', async () => {
    const r = await run('status', '--addr', `127.0.0.1:${await freePort()}`);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot reach');
  });

  it('init creates an identity and refuses to initialize the same directory twice', async () => {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-cli-')), 'n1');
    const first = await run('init', '--data', dir, '--name', 'n1', '--json', '--no-start');
    expect(first.code).toBe(0);
    const identity = JSON.parse(first.stdout) as { id: string; clusterId: string };
    expect(identity.id).toMatch(/^[0-9a-f]{16}$/);
    const second = await run('init', '--data', dir, '--name', 'n1');
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('already initialized');
  });

  it('serve refuses an invalid config with exit 2 and every problem listed', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-cli-'));
    writeFileSync(path.join(dir, 'bad.yaml'), 'dataDir: .\napi: {listen: nowhere}\nextra: 1\n');
    const r = await run('serve', '--config', path.join(dir, 'bad.yaml'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('api.listen');
    expect(r.stderr).toContain('extra');
  });

  it('serve refuses to start on a damaged snapshot, exits 4, and names the file and the recovery', async () => {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-cli-')), 'n1');
    expect((await run('init', '--data', dir, '--name', 'n1', '--no-start', '--api', `127.0.0.1:${await freePort()}`, '--peer', `127.0.0.1:${await freePort()}`)).code).toBe(0);
    const storage = await DiskStorage.open(dir);
    await storage.save({ entries: [], hardState: { term: 1, vote: '', commit: 1 }, snapshot: {
      meta: { index: 1, term: 1, confState: { voters: ['x'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false } },
      data: new Uint8Array([1, 2, 3]),
    } });
    await storage.close();
    const snapDir = path.join(dir, 'snapshots');
    const [file] = readdirSync(snapDir);
    if (!file) throw new Error('no snapshot file');
    appendFileSync(path.join(snapDir, file), 'garbage');
    const r = await run('serve', '--config', path.join(dir, 'shoal.yaml'));
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(file);
    expect(r.stderr).toMatch(/what to do|recovery|restore/i);
  });

  it('serve refuses a data directory of an unknown storage format with exit 7 (storage_format) and says what to do', async () => {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-cli-')), 'n1');
    expect((await run('init', '--data', dir, '--name', 'n1', '--no-start', '--api', `127.0.0.1:${await freePort()}`, '--peer', `127.0.0.1:${await freePort()}`)).code).toBe(0);
    const keys = await KeyFile.load(storagePaths(dir));
    await keys.put([[formatKey, seal({ format: 99 })]]);
    const r = await run('serve', '--config', path.join(dir, 'shoal.yaml'));
    expect(r.code).toBe(7);
    expect(r.stderr).toMatch(/storage format 99 .* is not supported .* Run the shoal version that wrote it/);
    expect(r.stderr).not.toContain('unexpected error');
  });
});
