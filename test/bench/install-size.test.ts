// The install-size bench's own parts (bench/install-size.ts): the packages of a node_modules
// folder (scoped ones as @scope/name) and their size on disk, as du counts it.

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildOnly, diskBytes, packagesIn } from '../../bench/install-size.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-install-size-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench:install', () => {
  it('lists the packages of a node_modules folder, scoped ones by scope, leaving out dot folders', () => {
    const nm = path.join(dir, 'node_modules');
    for (const p of ['zod', '@esbuild/linux-x64', '@types/node', '.bin']) mkdirSync(path.join(nm, p), { recursive: true });
    expect(packagesIn(nm)).toEqual(['@esbuild/linux-x64', '@types/node', 'zod']);
    expect(packagesIn(path.join(dir, 'absent'))).toEqual([]);
    expect(packagesIn(nm).filter((n) => buildOnly.some((b) => n === b || n.startsWith(`${b}/`)))).toEqual(['@esbuild/linux-x64']);
  });

  it('counts the blocks of files under a folder and does not follow a symlink', () => {
    const d = path.join(dir, 'sized');
    mkdirSync(d);
    writeFileSync(path.join(d, 'a'), Buffer.alloc(64 * 1024, 1));
    const alone = diskBytes(d);
    expect(alone).toBeGreaterThanOrEqual(64 * 1024);
    symlinkSync('/usr', path.join(d, 'link'));
    expect(diskBytes(d)).toBeLessThan(alone + 64 * 1024);
  });
});
