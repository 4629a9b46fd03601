// bin/code-cache.js: `shoal serve` loaded from one CommonJS script with a V8 code cache, written
// by the first run, used by the next, and never trusted for another script or Node.js; and which
// bundle file bin/shoal.js runs each command from. Each load runs in a child process, as a node does.

import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const loader = fileURLToPath(new URL('../../bin/code-cache.js', import.meta.url));
const { serveV8Flags } = (await import(loader)) as { serveV8Flags: string };

/** A script with enough code that V8 caches something, and a result that shows it ran. */
const script = (n: number): string => `exports.sum = function sum(xs) { let s = 0; for (const x of xs) s += x; return s + ${n}; };\nexports.answer = exports.sum([1, 2, 3]);\n`;

/** Loads `file` in a child process (writing the cache at once); its cache state, result and what it wrote. */
function load(file: string, cacheFile = `${file}.cache`, flags: string[] = [], v8Flags?: string): { cache: string; answer: number; written: string; error: string } {
  const code = `import { loadWithCodeCache } from ${JSON.stringify(loader)};
let written = '', error = '';
const r = loadWithCodeCache(${JSON.stringify(file)}, { cacheFile: ${JSON.stringify(cacheFile)}, writeAfterMs: 0, ${v8Flags !== undefined ? `v8Flags: ${JSON.stringify(v8Flags)}, ` : ''}onWritten: (f) => { written = f; }, onError: (e) => { error = e.code ?? String(e); } });
setTimeout(() => console.log(JSON.stringify({ cache: r.cache, answer: r.exports.answer, written, error })), 50);`;
  const res = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', code], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`load failed (${res.status}): ${res.stderr}`);
  return JSON.parse(res.stdout) as { cache: string; answer: number; written: string; error: string };
}

describe('loadWithCodeCache', () => {
  let dir = '';
  let file = '';
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-code-cache-'));
    file = path.join(dir, 'serve.cjs');
    writeFileSync(file, script(10));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes the cache on the first run and uses it on the next', () => {
    const first = load(file);
    expect(first).toMatchObject({ cache: 'none', answer: 16, written: `${file}.cache`, error: '' });
    const bytes = readFileSync(`${file}.cache`);
    expect(bytes.subarray(0, bytes.indexOf(10)).toString('latin1')).toBe(`shoal-code-cache 1 ${process.version} ${process.arch} ${readFileSync(file).length} ${statSync(file, { bigint: true }).mtimeNs}`);
    // Used: not written again.
    expect(load(file)).toMatchObject({ cache: 'used', answer: 16, written: '' });
  });

  it('does not trust a cache written for another script: a changed script is compiled and the cache written again', () => {
    load(file);
    writeFileSync(file, script(20));
    expect(load(file)).toMatchObject({ cache: 'stale', answer: 26, written: `${file}.cache` });
    expect(load(file)).toMatchObject({ cache: 'used', answer: 26 });
    // The same bytes written again (a rebuild): a new modification time, a stale cache.
    const later = new Date(Date.now() + 5000);
    utimesSync(file, later, later);
    expect(load(file)).toMatchObject({ cache: 'stale', answer: 26 });
  });

  it('runs the script when V8 refuses the cache (damaged, or made under other flags) and writes a good one', () => {
    load(file);
    const bytes = readFileSync(`${file}.cache`);
    const head = bytes.indexOf(10) + 1;
    writeFileSync(`${file}.cache`, Buffer.concat([bytes.subarray(0, head), Buffer.alloc(bytes.length - head, 0x5a)]));
    expect(load(file)).toMatchObject({ cache: 'rejected', answer: 16, written: `${file}.cache` });
    expect(load(file)).toMatchObject({ cache: 'used', answer: 16 });
    expect(load(file, `${file}.cache`, ['--no-lazy'])).toMatchObject({ cache: 'rejected', answer: 16 });
  });

  it("sets serve's V8 flags before compiling: the cache it writes under them is used under them, and refused by a process without them", () => {
    expect(load(file, undefined, [], serveV8Flags).cache).toBe('none');
    expect(load(file, undefined, [], serveV8Flags)).toMatchObject({ cache: 'used', answer: 16 });
    // The flags were in force when the cache was made: V8 refuses it to a process without them.
    expect(load(file).cache).toBe('rejected');
    // That process wrote one of its own, which serve's flags refuse in turn, and write theirs again.
    expect(load(file, undefined, [], serveV8Flags).cache).toBe('rejected');
    expect(load(file, undefined, [], serveV8Flags)).toMatchObject({ cache: 'used', answer: 16 });
  });

  it('reads a script holding non-ASCII text as UTF-8 (the build writes ASCII only, read as Latin-1)', () => {
    writeFileSync(file, "exports.answer = 'caf\u00e9 \u2713'.length;\n");
    expect(load(file)).toMatchObject({ cache: 'none', answer: 6 });
    expect(load(file)).toMatchObject({ cache: 'used', answer: 6 });
  });

  it('runs as before where the cache cannot be written, and leaves no temporary file', () => {
    if (process.getuid?.() === 0) {
      // root writes anywhere: a folder that does not exist stands for a read-only one.
      const r = load(file, path.join(dir, 'missing', 'serve.cjs.cache'));
      expect(r).toMatchObject({ cache: 'none', answer: 16, written: '', error: 'ENOENT' });
    } else {
      chmodSync(dir, 0o555);
      try {
        expect(load(file)).toMatchObject({ cache: 'none', answer: 16, written: '', error: 'EACCES' });
      } finally {
        chmodSync(dir, 0o755);
      }
    }
    expect(spawnSync('ls', [dir], { encoding: 'utf8' }).stdout.trim().split('\n')).toEqual(['serve.cjs']);
  });
});

describe('bundleMain: which bundle file runs a command', () => {
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-bundle-main-'));
    writeFileSync(path.join(dir, 'shoal.mjs'), "export const main = async () => 'modules';\n");
    writeFileSync(path.join(dir, 'serve.cjs'), "exports.main = async () => 'serve.cjs';\n");
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const run = (argv: string[], env: Record<string, string> = {}): string => {
    const code = `import { bundleMain } from ${JSON.stringify(loader)};
console.log(await (await bundleMain(${JSON.stringify(dir)}, ${JSON.stringify(argv)}, ${JSON.stringify(env)}))(${JSON.stringify(argv)}));`;
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`bundleMain failed (${res.status}): ${res.stderr}`);
    return res.stdout.trim();
  };

  it('runs serve from serve.cjs and every other command from the modules', () => {
    expect(run(['serve', '--config', 'x.yaml'])).toBe('serve.cjs');
    expect(run(['status'])).toBe('modules');
    expect(run(['--version'])).toBe('modules');
    expect(run(['--json', 'serve'])).toBe('modules');
  });

  it("compiles serve under serve's V8 flags, and nothing else: a cache made without them is refused to serve only", () => {
    // A probe script and its code cache, made in a process given `flags`: a cache is used only
    // under the V8 flags it was made under, so the probe shows the flags a command compiles under.
    const probe = path.join(dir, 'probe.js');
    writeFileSync(probe, script(1));
    const probeCache = (flags: string[]): void => {
      const made = spawnSync(process.execPath, [...flags, '-e', `const vm = require('node:vm'), fs = require('node:fs');
fs.writeFileSync(${JSON.stringify(`${probe}.cache`)}, new vm.Script(fs.readFileSync(${JSON.stringify(probe)}, 'utf8'), { filename: 'probe.js' }).createCachedData());`], { encoding: 'utf8' });
      if (made.status !== 0) throw new Error(`probe cache: ${made.stderr}`);
    };
    const check = `new vm.Script(fs.readFileSync(${JSON.stringify(probe)}, 'utf8'), { filename: 'probe.js', cachedData: fs.readFileSync(${JSON.stringify(`${probe}.cache`)}) }).cachedDataRejected ? 'rejected' : 'used'`;
    writeFileSync(path.join(dir, 'serve.cjs'), `const vm = require('node:vm'), fs = require('node:fs');\nexports.main = async () => ${check};\n`);
    writeFileSync(path.join(dir, 'shoal.mjs'), `import vm from 'node:vm';\nimport fs from 'node:fs';\nexport const main = async () => ${check};\n`);
    probeCache([]);
    expect(run(['serve'])).toBe('rejected');
    expect(run(['status'])).toBe('used');
    probeCache([serveV8Flags]);
    expect(run(['serve'])).toBe('used');
    expect(run(['status'])).toBe('rejected');
  });

  it('runs serve from the modules with SHOAL_CODE_CACHE=0, or when serve.cjs was not built', () => {
    expect(run(['serve'], { SHOAL_CODE_CACHE: '0' })).toBe('modules');
    rmSync(path.join(dir, 'serve.cjs'));
    expect(run(['serve'])).toBe('modules');
  });
});
