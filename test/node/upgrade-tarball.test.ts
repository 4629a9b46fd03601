// A build's tarball read with node-tar (src/node/upgrade/upgrade-tarball.ts): only files and
// folders under package/ are taken; a link of either kind, a FIFO, an absolute path or `..`
// refuses the whole tarball before anything is written. Tarballs are made by GNU tar, as an
// operator's `npm pack` or a hand-made one would be.

import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkPackageTarball, entryProblem, extractPackageTarball, listTarball, readTarballPackageJson } from '../../src/node/upgrade/upgrade-tarball.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'shoal-tarball-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A package/ folder with package.json and bin/shoal.js, changed by `more`, packed with `tarArgs` as extra tar flags. */
function pack(more: (pkg: string) => string[] = () => [], tarArgs: string[] = []): string {
  const dir = mkdtempSync(path.join(work, 'src-'));
  const pkg = path.join(dir, 'package');
  mkdirSync(path.join(pkg, 'bin'), { recursive: true });
  writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'shoal', version: '0.2.0' }));
  writeFileSync(path.join(pkg, 'bin', 'shoal.js'), 'console.log(1);\n');
  const extra = more(pkg);
  const file = path.join(dir, 'out.tgz');
  execFileSync('tar', ['-czf', file, ...tarArgs, '-C', dir, 'package', ...extra]);
  return file;
}

const refusal = async (p: Promise<unknown>): Promise<{ code: string; message: string; details: { reason: string } }> =>
  (await p.then(() => { throw new Error('not refused'); }, (e: unknown) => e)) as { code: string; message: string; details: { reason: string } };

describe('listTarball', () => {
  it('lists each entry with its type, size and link target', async () => {
    const file = pack((pkg) => {
      symlinkSync('/etc', path.join(pkg, 'soft'));
      linkSync(path.join(pkg, 'package.json'), path.join(pkg, 'hard'));
      return [];
    });
    const entries = await listTarball(file);
    const byPath = new Map(entries.map((e) => [e.path, e]));
    expect(byPath.get('package/')).toMatchObject({ type: 'Directory' });
    expect(byPath.get('package/bin/shoal.js')).toMatchObject({ type: 'File', size: 16 });
    expect(byPath.get('package/soft')).toMatchObject({ type: 'SymbolicLink', linkpath: '/etc' });
    // GNU tar stores the second name of a file as a hard link to the first it packed.
    expect(entries.filter((e) => e.type === 'Link')).toHaveLength(1);
  });

  it('refuses what is not a gzipped tarball, saying so', async () => {
    const junk = path.join(work, 'junk.tgz');
    writeFileSync(junk, 'not a tarball at all'.repeat(100));
    expect(await refusal(listTarball(junk))).toMatchObject({ code: 'release_refused', details: { reason: 'not_package' }, message: expect.stringContaining('is not a readable gzipped tarball') });
  });
});

describe('checkPackageTarball and extractPackageTarball', () => {
  it('unpack files and folders under package/, owned by this process whatever the archive says', async () => {
    const file = pack(() => [], ['--owner=12345', '--group=12345']);
    await checkPackageTarball(file);
    const into = mkdtempSync(path.join(work, 'into-'));
    await extractPackageTarball(file, into);
    expect(readdirSync(path.join(into, 'package')).sort()).toEqual(['bin', 'package.json']);
    expect(readFileSync(path.join(into, 'package', 'bin', 'shoal.js'), 'utf8')).toBe('console.log(1);\n');
    expect(statSync(path.join(into, 'package', 'package.json')).uid).toBe(process.getuid?.());
  });

  it('take a tarball as npm pack makes it', async () => {
    const src = mkdtempSync(path.join(work, 'npm-'));
    mkdirSync(path.join(src, 'bin'));
    writeFileSync(path.join(src, 'package.json'), JSON.stringify({ name: 'shoal', version: '0.3.0', files: ['bin/'] }));
    writeFileSync(path.join(src, 'bin', 'shoal.js'), 'console.log(1);\n');
    const packed = JSON.parse(execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', src], { cwd: src, encoding: 'utf8' })) as { filename: string }[];
    const into = mkdtempSync(path.join(work, 'into-'));
    await extractPackageTarball(path.join(src, packed[0]?.filename ?? ''), into);
    expect(readdirSync(path.join(into, 'package')).sort()).toEqual(['bin', 'package.json']);
  });

  it.each([
    ['a symbolic link', (pkg: string) => { symlinkSync('/etc', path.join(pkg, 'linked')); return []; }, [], 'package/linked -> /etc'],
    ['a hard link', (pkg: string) => { linkSync(path.join(pkg, 'package.json'), path.join(pkg, 'again')); return []; }, [], 'not a file or a folder'],
    ['a FIFO', (pkg: string) => { execFileSync('mkfifo', [path.join(pkg, 'pipe')]); return []; }, [], 'package/pipe, FIFO'],
    ['an entry beside package/', (pkg: string) => { writeFileSync(path.join(pkg, '..', 'evil'), 'x'); return ['evil']; }, [], "'evil', outside package/"],
    ['an absolute path', () => [path.join(work, 'abs-target')], ['-P'], 'outside package/'],
    ['a path with ..', () => ['package/../package/bin/shoal.js'], ['-P'], "'package/../package/bin/shoal.js', outside package/"],
  ] as const)('refuse a tarball with %s, writing nothing', async (_what, more, tarArgs, says) => {
    writeFileSync(path.join(work, 'abs-target'), 'x');
    const file = pack(more, [...tarArgs]);
    const err = await refusal(checkPackageTarball(file));
    expect(err).toMatchObject({ code: 'release_refused', details: { reason: 'not_package' } });
    expect(err.message).toContain(says);
    expect(err.message).toMatch(/; nothing was activated$/);
    const into = mkdtempSync(path.join(work, 'into-'));
    await refusal(extractPackageTarball(file, into));
    expect(readdirSync(into)).toEqual([]);
  });

  it('are what a path check refuses, entry by entry', () => {
    expect(entryProblem({ path: 'package/a/b.js', type: 'File', size: 1 })).toBeUndefined();
    expect(entryProblem({ path: 'package/', type: 'Directory', size: 0 })).toBeUndefined();
    expect(entryProblem({ path: '/package/x', type: 'File', size: 1 })).toContain('outside package/');
    expect(entryProblem({ path: 'package/a/../../x', type: 'File', size: 1 })).toContain('outside package/');
    expect(entryProblem({ path: 'package/dev', type: 'CharacterDevice', size: 0 })).toContain('package/dev, CharacterDevice');
  });
});

describe('readTarballPackageJson', () => {
  it('reads package/package.json without unpacking, and refuses a tarball without one', async () => {
    expect(JSON.parse(await readTarballPackageJson(pack()))).toEqual({ name: 'shoal', version: '0.2.0' });
    const none = path.join(work, 'none.tgz');
    writeFileSync(path.join(work, 'readme'), 'x');
    execFileSync('tar', ['-czf', none, '-C', work, 'readme']);
    const err = await refusal(readTarballPackageJson(none));
    expect(err).toMatchObject({ code: 'release_refused', details: { reason: 'not_package' } });
    expect(err.message).toBe(`${none} holds no package/package.json`);
  });
});
