// The environment shoal starts a node with (src/cli/node-environment.ts): NODE_OPTIONS by the
// machine's cores, jemalloc by what is installed, and a clear refusal when jemalloc is asked for
// and missing.

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.ts';
import { allocatorEnvironment, allocatorInUse, allocatorLine, findJemalloc, jemallocConf, nodeEnvironment, smallMachineNodeOptions } from '../../src/cli/node-environment.ts';

describe('findJemalloc', () => {
  it("looks in the architecture's multiarch folder first, then the generic ones", () => {
    const seen: string[] = [];
    expect(findJemalloc('arm64', (p) => { seen.push(p); return false; })).toBeUndefined();
    expect(seen[0]).toBe('/usr/lib/aarch64-linux-gnu/libjemalloc.so.2');
    expect(seen).toContain('/usr/lib/libjemalloc.so.2');
    expect(seen.some((p) => p.includes('x86_64'))).toBe(false);
    expect(findJemalloc('x64', (p) => p === '/usr/local/lib/libjemalloc.so.2')).toBe('/usr/local/lib/libjemalloc.so.2');
    expect(findJemalloc('arm', (p) => p.startsWith('/usr/lib/arm-linux-gnueabihf/'))).toBe('/usr/lib/arm-linux-gnueabihf/libjemalloc.so.2');
  });
});

describe('nodeEnvironment', () => {
  const lib = '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2';
  it('sets one V8 helper thread on two cores or fewer, none above, and what the caller gives otherwise', () => {
    expect(nodeEnvironment({ allocator: 'system', cpus: 2, jemalloc: lib })).toEqual({ NODE_OPTIONS: smallMachineNodeOptions });
    expect(nodeEnvironment({ allocator: 'system', cpus: 4, jemalloc: lib })).toEqual({});
    expect(nodeEnvironment({ allocator: 'system', cpus: 2, jemalloc: lib, nodeOptions: '' })).toEqual({});
    expect(nodeEnvironment({ allocator: 'system', cpus: 8, jemalloc: lib, nodeOptions: '--max-old-space-size=200' })).toEqual({ NODE_OPTIONS: '--max-old-space-size=200' });
  });

  it('preloads jemalloc when found (auto) or asked, and refuses to when asked and missing', () => {
    expect(nodeEnvironment({ allocator: 'auto', cpus: 4, jemalloc: lib })).toEqual({ LD_PRELOAD: lib, MALLOC_CONF: jemallocConf });
    expect(nodeEnvironment({ allocator: 'jemalloc', cpus: 4, jemalloc: lib })).toEqual({ LD_PRELOAD: lib, MALLOC_CONF: jemallocConf });
    expect(nodeEnvironment({ allocator: 'auto', cpus: 4, jemalloc: undefined })).toEqual({});
    expect(() => nodeEnvironment({ allocator: 'jemalloc', cpus: 4, jemalloc: undefined })).toThrow(UsageError);
    expect(() => nodeEnvironment({ allocator: 'jemalloc', cpus: 4, jemalloc: undefined })).toThrow(/apt-get install libjemalloc2/);
    // The allocator's part alone (shoal dev's nodes), and beside NODE_OPTIONS.
    expect(allocatorEnvironment('auto', lib)).toEqual({ LD_PRELOAD: lib, MALLOC_CONF: jemallocConf });
    expect(allocatorEnvironment('system', lib)).toEqual({});
    expect(allocatorEnvironment('auto', undefined)).toEqual({});
    expect(() => allocatorEnvironment('jemalloc', undefined)).toThrow(UsageError);
    expect(nodeEnvironment({ allocator: 'auto', cpus: 2, jemalloc: lib })).toEqual({ NODE_OPTIONS: smallMachineNodeOptions, LD_PRELOAD: lib, MALLOC_CONF: jemallocConf });
  });

  it('gives a Node.js process that runs on jemalloc with these settings (.ci/run installs libjemalloc2)', () => {
    const found = findJemalloc();
    expect(found, 'libjemalloc.so.2 is installed on this machine').toBeDefined();
    const env = { ...process.env, ...nodeEnvironment({ allocator: 'auto', cpus: 4, jemalloc: found }) };
    // The process reads its own mappings and jemalloc's settings back (a wrong MALLOC_CONF key is
    // reported by jemalloc on standard error).
    const r = spawnSync(process.execPath, ['-e', "process.stdout.write(require('fs').readFileSync('/proc/self/maps', 'utf8'))"], { env, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('libjemalloc.so.2');
    const bad = spawnSync(process.execPath, ['-e', '0'], { env: { ...env, MALLOC_CONF: 'narenas:2,no_such_option:1' }, encoding: 'utf8' });
    expect(bad.stderr).toContain('no_such_option');
  });
});

describe('allocatorInUse', () => {
  it('tells jemalloc by its mapping, the C library otherwise, and nothing without /proc', () => {
    const line = (file: string): string => `7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 ${file}`;
    expect(allocatorInUse(() => [line('/usr/bin/node'), line('/usr/lib/x86_64-linux-gnu/libjemalloc.so.2')].join('\n'))).toBe('jemalloc');
    expect(allocatorInUse(() => [line('/usr/bin/node'), line('/usr/lib/x86_64-linux-gnu/libc.so.6')].join('\n'))).toBe('system');
    expect(allocatorInUse(() => { throw new Error('ENOENT'); })).toBeUndefined();
    // This test process runs on the C library's malloc (vitest's workers are not preloaded).
    expect(allocatorInUse()).toBe(process.env.LD_PRELOAD?.includes('jemalloc') ? 'jemalloc' : 'system');
    expect(allocatorLine(undefined)).toBeUndefined();
    expect(allocatorLine('system')).toContain('apt-get install libjemalloc2');
    expect(allocatorLine('jemalloc')).toMatch(/^memory allocator: jemalloc/);
  });
});
