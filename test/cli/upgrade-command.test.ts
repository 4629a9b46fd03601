// `shoal upgrade` refusals that need no cluster: a file that is not a shoal build is refused
// before any node is asked (the address here answers nothing), and the flags that do not go
// together are usage errors.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inProcess } from './in-process.ts';

const nowhere = ['--addr', '127.0.0.1:1'];

describe('shoal upgrade', () => {
  it('refuses a file that is not an npm package, and a package that is not shoal, without asking a node', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-upgrade-cli-'));
    writeFileSync(path.join(dir, 'junk.tgz'), 'not a tarball');
    const junk = await inProcess('upgrade', '--to', path.join(dir, 'junk.tgz'), ...nowhere);
    expect(junk.code).toBe(1);
    expect(junk.stderr).toContain('is not an npm package tarball');
    mkdirSync(path.join(dir, 'package'));
    writeFileSync(path.join(dir, 'package', 'package.json'), JSON.stringify({ name: 'other', version: '1.0.0' }));
    execFileSync('tar', ['-czf', path.join(dir, 'other.tgz'), '-C', dir, 'package']);
    const other = await inProcess('upgrade', '--to', path.join(dir, 'other.tgz'), '--json', ...nowhere);
    expect(other.code).toBe(1);
    expect(other.stdout).toBe('');
    expect(other.stderr).toContain('is not a shoal package');
  });

  it('takes --to or --rollback, not both, and --resume only with --to', async () => {
    expect((await inProcess('upgrade', '--rollback', '--to', 'x.tgz', ...nowhere)).code).toBe(2);
    const resume = await inProcess('upgrade', '--rollback', '--resume', ...nowhere);
    expect(resume.code).toBe(2);
    expect(resume.stderr).toContain('--resume goes with --to');
    const missing = await inProcess('upgrade', '--to', '/nonexistent/shoal.tgz', ...nowhere);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
  });
});
