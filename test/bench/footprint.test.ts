// The footprint levers of issue 45 and the counting of bench/footprint.ts: what a serving node
// loads at start (the bundle's static imports), and how the benchmark maps loaded files to
// packages and sums a heap snapshot.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundle, type BundleMetafile } from '../../scripts/bundle.mjs';
import { summariseHeapSnapshot } from '../../bench/lib/heap-summary.ts';
import { breakdown, groupOfSource } from '../../bench/lib/load-breakdown.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The sources of every output file loaded with the output holding `input` (its static imports, transitively). */
function loadedWith(meta: BundleMetafile, input: string): string[] {
  const start = Object.keys(meta.outputs).find((o) => meta.outputs[o]?.inputs[input] !== undefined);
  if (start === undefined) throw new Error(`no output holds ${input}`);
  const seen = new Set([start]);
  const queue = [start];
  for (let o = queue.shift(); o !== undefined; o = queue.shift()) {
    for (const i of meta.outputs[o]?.imports ?? []) {
      if (i.kind === 'import-statement' && meta.outputs[i.path] !== undefined && !seen.has(i.path)) {
        seen.add(i.path);
        queue.push(i.path);
      }
    }
  }
  return [...seen].flatMap((o) => Object.entries(meta.outputs[o]?.inputs ?? {}).filter(([, v]) => v.bytesInOutput > 0).map(([k]) => k));
}

/** The packages outside the bundle that the outputs loaded with `input` import statically. */
function staticExternalsWith(meta: BundleMetafile, input: string): string[] {
  const start = Object.keys(meta.outputs).find((o) => meta.outputs[o]?.inputs[input] !== undefined);
  if (start === undefined) throw new Error(`no output holds ${input}`);
  const seen = new Set([start]);
  const externals = new Set<string>();
  const queue = [start];
  for (let o = queue.shift(); o !== undefined; o = queue.shift()) {
    for (const i of meta.outputs[o]?.imports ?? []) {
      if (i.kind !== 'import-statement') continue;
      if (i.external === true) externals.add(i.path);
      else if (meta.outputs[i.path] !== undefined && !seen.has(i.path)) {
        seen.add(i.path);
        queue.push(i.path);
      }
    }
  }
  return [...externals];
}

describe('what the bundle loads at start', () => {
  let dir = '';
  let meta: BundleMetafile;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-footprint-bundle-'));
    meta = await bundle(dir, { metafile: true });
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serve loads no BuildKit code (gRPC, protobufjs), no X.509 library and no tar', () => {
    const serve = loadedWith(meta, 'src/cli/serve.ts');
    expect(serve.some((f) => f.includes('src/server/server.ts'))).toBe(true);
    expect(serve.some((f) => f.includes('node_modules/dockerode/lib/docker.js'))).toBe(true);
    for (const heavy of ['node_modules/@grpc/grpc-js/', 'node_modules/protobufjs/', 'node_modules/@peculiar/x509/', 'node_modules/tar/', 'src/security/certificates.ts']) {
      expect(serve.filter((f) => f.includes(heavy))).toEqual([]);
    }
  });

  it('serve loads no JSON-schema compiler (Ajv, fast-json-stringify), no undici and no ssh2 at start', () => {
    const serve = loadedWith(meta, 'src/cli/serve.ts');
    expect(serve.some((f) => f.includes('node_modules/fastify/fastify.js'))).toBe(true);
    for (const heavy of ['node_modules/ajv/', 'node_modules/ajv-formats/', 'node_modules/@fastify/ajv-compiler/', 'node_modules/fast-uri/', 'node_modules/fast-json-stringify/index.js', 'node_modules/undici/']) {
      expect(serve.filter((f) => f.includes(heavy))).toEqual([]);
    }
    // ssh2 stays outside the bundle: no output of serve's start imports it statically.
    expect(staticExternalsWith(meta, 'src/cli/serve.ts')).not.toContain('ssh2');
  });

  it('serve loads pino-pretty only for human lines; the OpenAPI document, the compose compiler and the receiver of upgrade builds only when asked for them', () => {
    const serve = loadedWith(meta, 'src/cli/serve.ts');
    expect(serve.some((f) => f.includes('node_modules/pino/'))).toBe(true);
    expect(serve.some((f) => f.endsWith('src/api/stack-routes.ts'))).toBe(true);
    const deferred = ['node_modules/pino-pretty/index.js', 'src/api/openapi.ts', 'src/resources/compose/compile.ts', 'src/resources/compose/load.ts', 'src/node/upgrade/upgrade-receive.ts'];
    expect(serve.filter((f) => deferred.some((d) => f.endsWith(d)))).toEqual([]);
    // All are in the bundle, in chunks of their own.
    const bundled = Object.values(meta.outputs).flatMap((o) => Object.keys(o.inputs));
    for (const d of deferred) expect(bundled.some((f) => f.endsWith(d))).toBe(true);
  });

  it("zod's messages in English only: no other locale is bundled", () => {
    const bundled = Object.values(meta.outputs).flatMap((o) => Object.keys(o.inputs)).filter((f) => f.includes('node_modules/zod/v4/locales/'));
    expect(bundled.filter((f) => !/[\\/](en|index)\.js$/.test(f))).toEqual([]);
    expect(bundled.some((f) => f.endsWith('locales/en.js'))).toBe(true);
  });

  it('the command line (shoal --version, and what every command loads first) loads no undici', () => {
    expect(loadedWith(meta, 'src/cli/main.ts').filter((f) => f.includes('node_modules/undici/'))).toEqual([]);
  });

  it('serve.cjs, the one script serve runs from, holds none of the packages serve uses later and no import()', () => {
    const out = Object.keys(meta.outputs).find((o) => o.endsWith('serve.cjs'));
    expect(out).toBeDefined();
    const inputs = Object.keys(meta.outputs[out ?? '']?.inputs ?? {});
    expect(inputs).toContain('src/cli/serve.ts');
    // The rest of the command line is not in it.
    expect(inputs.filter((f) => /src\/cli\/(status|upgrade|drill|dev|init)\.ts$/.test(f))).toEqual([]);
    const later = ['@peculiar/', 'asn1js', '/tar/', '/undici/', '@grpc/', 'protobufjs', 'pino-pretty', 'ssh2', 'node_modules/ajv', 'fast-json-stringify/index.js'];
    expect(inputs.filter((f) => f.includes('node_modules/') && later.some((p) => f.includes(p)))).toEqual([]);
    // A script compiled from a code cache cannot run an import() (bin/code-cache.js).
    expect(readFileSync(path.resolve(out ?? ''), 'utf8')).not.toMatch(/\bimport\(/);
  });

  it('docker-modem requires ssh2 only when it dials over SSH', () => {
    const out = Object.keys(meta.outputs).find((o) => meta.outputs[o]?.inputs[Object.keys(meta.outputs[o]?.inputs ?? {}).find((k) => k.endsWith('docker-modem/lib/ssh.js')) ?? ''] !== undefined);
    expect(out).toBeDefined();
    const text = readFileSync(path.resolve(out ?? ''), 'utf8');
    // The bundle is written without whitespace: `new(__require("ssh2")).Client`.
    expect(text).toMatch(/new ?\(__require\("ssh2"\)\)\.Client\b/);
    expect(text).not.toMatch(/Client ?= ?__require\("ssh2"\)/);
  });
});

describe('the bundle run', () => {
  // Inside the repository, so the bundle finds the packages left outside it (node_modules).
  let dir = '';
  beforeAll(async () => {
    mkdirSync(path.join(root, 'bench', '.builds'), { recursive: true });
    dir = mkdtempSync(path.join(root, 'bench', '.builds', 'test-footprint-'));
    await bundle(dir);
    writeFileSync(path.join(dir, 'run.mjs'), "import { main } from './shoal.mjs';\nprocess.exitCode = await main(process.argv.slice(2));\n");
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("says what is wrong with a config in zod's English messages, as the sources do", () => {
    const config = path.join(dir, 'bad.yaml');
    writeFileSync(config, 'dataDir: .\napi: {listen: 5}\npeer: {listen: "127.0.0.1:1"}\n');
    const res = spawnSync(process.execPath, [path.join(dir, 'run.mjs'), 'serve', '--config', config], { encoding: 'utf8' });
    expect(res.stderr).toContain('api.listen: Invalid input: expected string, received number');
    expect(res.status).toBe(2);
  });

  it('runs serve from serve.cjs with a code cache as from the modules: the same message and exit code', () => {
    const config = path.join(dir, 'bad.yaml');
    writeFileSync(config, 'dataDir: .\napi: {listen: 5}\npeer: {listen: "127.0.0.1:1"}\n');
    const loader = JSON.stringify(path.join(root, 'bin', 'code-cache.js'));
    const serveCjs = JSON.stringify(path.join(dir, 'serve.cjs'));
    // The first load writes the cache (at once here), the second runs serve from it.
    const write = `import { loadWithCodeCache } from ${loader};\nloadWithCodeCache(${serveCjs}, { writeAfterMs: 0, onWritten: () => console.log('written') });\nsetTimeout(() => {}, 200);`;
    expect(spawnSync(process.execPath, ['--input-type=module', '-e', write], { encoding: 'utf8' }).stdout).toContain('written');
    const run = `import { loadWithCodeCache } from ${loader};\nconst r = loadWithCodeCache(${serveCjs});\nconsole.log(r.cache);\nprocess.exitCode = await r.exports.main(['serve', '--config', ${JSON.stringify(config)}]);`;
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', run], { encoding: 'utf8' });
    expect(res.stdout.trim()).toBe('used');
    expect(res.stderr).toContain('api.listen: Invalid input: expected string, received number');
    expect(res.status).toBe(2);
  });

  it("loading serve's code loads no node:http2 (fastify's, for HTTP/2 servers shoal does not make)", () => {
    const code = `import { loadWithCodeCache } from ${JSON.stringify(path.join(root, 'bin', 'code-cache.js'))};
loadWithCodeCache(${JSON.stringify(path.join(dir, 'serve.cjs'))}, { writeAfterMs: 1e9 });
console.log(JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13))));`;
    const loaded = JSON.parse(spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' }).stdout) as string[];
    expect(loaded).toContain('tls');
    expect(loaded).not.toContain('http2');
  });

  it('loads undici on the first request (the CLI here): an unreachable node is reported as such', () => {
    const res = spawnSync(process.execPath, [path.join(dir, 'run.mjs'), 'status', '--addr', '127.0.0.1:1'], { encoding: 'utf8', env: { ...process.env, SHOAL_CONFIG: dir } });
    expect(res.stderr).toContain('cannot reach 127.0.0.1:1');
    expect(res.status).toBe(3);
  });
});

describe('groupOfSource', () => {
  it('names the npm package, scoped or not, and the src/ folder', () => {
    expect(groupOfSource('../../main/node_modules/undici/lib/core/util.js')).toBe('npm undici');
    expect(groupOfSource('node_modules/@grpc/grpc-js/build/src/index.js')).toBe('npm @grpc/grpc-js');
    expect(groupOfSource('node_modules/a/node_modules/b/x.js')).toBe('npm b');
    expect(groupOfSource('src/api/app.ts')).toBe('src/api');
    expect(groupOfSource('src/errors.ts')).toBe('src (top)');
    expect(groupOfSource('fsm/log.ts')).toBe('fsm');
  });
});

describe('breakdown', () => {
  it('counts the sources of the loaded outputs only, builtins and files outside the bundle apart', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-footprint-loads-'));
    try {
      const meta = {
        outputs: {
          'b/shoal.mjs': { bytes: 100, inputs: { 'src/cli/main.ts': { bytesInOutput: 60 }, 'node_modules/zod/index.js': { bytesInOutput: 40 } } },
          'b/chunks/serve.mjs': { bytes: 50, inputs: { 'src/cli/serve.ts': { bytesInOutput: 30 }, 'src/cli/args.ts': { bytesInOutput: 20 } } },
          'b/chunks/upgrade.mjs': { bytes: 70, inputs: { 'src/cli/upgrade.ts': { bytesInOutput: 70 } } },
          'b/shoal.mjs.map': { bytes: 999, inputs: {} },
        },
      };
      const loads = path.join(dir, 'loads');
      const url = (f: string): string => pathToFileURL(path.join(dir, f)).href;
      writeFileSync(loads, [`${url('b/shoal.mjs')}\t100`, `${url('b/chunks/serve.mjs')}\t50`, `${url('b/shoal.mjs')}\t100`, 'node:fs\t0', `${url('nm/classic-level/index.js')}\t9`, ''].join('\n'));
      const b = breakdown(loads, meta, dir);
      expect(b).toMatchObject({ outputsLoaded: 2, outputsTotal: 3, bundleBytesLoaded: 150, bundleBytesTotal: 220, builtins: 1, external: { files: 1, bytes: 9 } });
      expect(b.groups).toEqual([{ what: 'src/cli', files: 3, bytes: 110 }, { what: 'npm zod', files: 1, bytes: 40 }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('summariseHeapSnapshot', () => {
  it('sums self sizes by constructor for objects and by kind otherwise, largest first', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-footprint-heap-'));
    try {
      const types = ['hidden', 'array', 'string', 'object', 'code', 'closure', 'regexp', 'number', 'native', 'synthetic', 'concatenated string'];
      const strings = ['', 'Foo', 'abc', 'Bar'];
      // type, name, id, self_size, edge_count
      const node = (type: string, name: number, size: number): number[] => [types.indexOf(type), name, 1, size, 0];
      const snap = {
        snapshot: { meta: { node_fields: ['type', 'name', 'id', 'self_size', 'edge_count'], node_types: [types] } },
        nodes: [...node('object', 1, 10), ...node('object', 1, 20), ...node('string', 2, 100), ...node('concatenated string', 2, 5), ...node('object', 3, 7), ...node('code', 0, 50)],
        strings,
      };
      const file = path.join(dir, 'x.heapsnapshot');
      writeFileSync(file, JSON.stringify(snap));
      const s = summariseHeapSnapshot(file);
      expect(s.totalBytes).toBe(192);
      expect(s.nodes).toBe(6);
      expect(s.groups).toEqual([
        { what: '(strings)', count: 2, bytes: 105 }, { what: '(code)', count: 1, bytes: 50 }, { what: 'Foo', count: 2, bytes: 30 }, { what: 'Bar', count: 1, bytes: 7 },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
