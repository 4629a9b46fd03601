#!/usr/bin/env node
// Bundles the shoal command (src/cli/main.ts) into one folder of ES modules, and the web console
// (src/console/) into its console/ folder: what `npm run build` writes to dist/, and
// `npm run bench:ab -- --build NAME` to bench/.builds/NAME.
//
//   node scripts/bundle.mjs OUTDIR
//
// The npm packages are bundled in as well, except the native ones (LevelDB's binding, the
// optional accelerators of msgpackr and ws, and ssh2, dockerode's SSH transport, whose optional
// native parts esbuild cannot bundle), which stay in node_modules. Loading the packages
// from node_modules one file at a time made up a third of a node's start-up (importing the serve
// command: 360-470 ms with them external, 270-370 ms bundled; API answering 0.47-0.51 s after
// the process started, against 0.66-0.69 s). Bundled CommonJS code calls require() for Node's
// own modules, so every chunk starts by defining it.
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Requires of Docker's client library that a node does not need to serve, deferred to their first
 * use (issue 45, bench/RESULTS.md "Footprint"): docker-modem loads ssh2 (whose poly1305 module
 * holds 16 MiB of memory from its load on) for Docker hosts reached over SSH, and dockerode loads
 * @grpc/grpc-js for BuildKit sessions of `buildImage` and protobufjs to decode BuildKit's
 * progress; shoal talks to a local socket and builds no image through dockerode. Each edit must find its text: a new version of a
 * library fails the build here rather than silently loading them again.
 */
const deferredRequires = [
  {
    file: /[\\/]docker-modem[\\/]lib[\\/]ssh\.js$/,
    edits: [["var Client = require('ssh2').Client,\n", 'var '], ['new Client()', "new (require('ssh2').Client)()"]],
  },
  {
    file: /[\\/]dockerode[\\/]lib[\\/]docker\.js$/,
    // import(), not require(): esbuild puts what it loads in a chunk of its own, not loaded at all.
    edits: [
      ["withSession = require('./session'),", 'withSession = function (docker, auth, handler) { import(\'./session.js\').then((m) => (m.default ?? m)(docker, auth, handler), (err) => handler(err)); },'],
      // followProgress returns nothing (buildkit.js: @returns {void}); shoal calls the modem's.
      ["  var buildkit = require('./buildkit');\n  return buildkit.followProgress(stream, onFinished, onProgress);",
        "  import('./buildkit.js').then((b) => (b.default ?? b).followProgress(stream, onFinished, onProgress), (err) => onFinished(err));"],
    ],
  },
  {
    // node:http2 (7 ms and 1.1 MiB of a process to load) for fastify's `http2: true`, which
    // shoal's API never sets: loaded by the first HTTP/2 server made.
    file: /[\\/]fastify[\\/]lib[\\/]server\.js$/,
    edits: [["const http2 = require('node:http2')\n", "const http2 = { createSecureServer: (...args) => require('node:http2').createSecureServer(...args), createServer: (...args) => require('node:http2').createServer(...args) }\n"]],
  },
  {
    // semver (its 40-odd regular expressions built at load) checks the fastify version a plugin
    // of fastify-plugin declares; shoal registers none: loaded by the first such check.
    file: /[\\/]fastify[\\/]lib[\\/]plugin-utils\.js$/,
    edits: [["const semver = require('semver')\n", "const semver = { gt: (...args) => require('semver').gt(...args), coerce: (...args) => require('semver').coerce(...args), satisfies: (...args) => require('semver').satisfies(...args) }\n"]],
  },
  {
    // The OpenTelemetry API (43 KiB, its validators' regular expressions built at load) for the
    // process CPU metric's exemplars, which shoal does not enable: loaded by the first exemplar.
    file: /[\\/]prom-client[\\/]lib[\\/]metrics[\\/]processCpuTotal\.js$/,
    edits: [["const OtelApi = require('@opentelemetry/api');\n", "const OtelApi = { get trace() { return require('@opentelemetry/api').trace; }, get context() { return require('@opentelemetry/api').context; } };\n"]],
  },
  {
    // fastify's JSON-schema compilers (Ajv, ajv-formats, fast-uri, fast-json-stringify: 1.3 MiB of
    // source): src/api/app.ts gives fastify its own (src/api/no-json-schema.ts), so these requires
    // never run; left out of the bundle, they fail loudly should that ever change.
    file: /[\\/]fastify[\\/]lib[\\/]schema-controller\.js$/,
    edits: [
      ["require('@fastify/ajv-compiler')", "(() => { throw new Error('shoal bundle: fastify\\'s Ajv compiler is left out; pass schemaController (src/api/no-json-schema.ts)'); })()"],
      ["require('@fastify/fast-json-stringify-compiler')", "(() => { throw new Error('shoal bundle: fastify\\'s fast-json-stringify compiler is left out; pass schemaController (src/api/no-json-schema.ts)'); })()"],
    ],
  },
];

/**
 * zod's error messages in every language it ships (358 KiB of its 734 in the bundle, all loaded
 * at start by `import { z } from 'zod'`): shoal speaks English only and never calls
 * `z.config(z.locales.xx())`, so `z.locales` holds `en` alone in the bundle (issue 45). A
 * locale asked for by name is then undefined, and calling it fails at once.
 */
const zodEnglishOnly = { file: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/, contents: 'export { default as en } from "./en.js";\n' };

const deferRequires = {
  name: 'shoal-defer-requires',
  setup(b) {
    b.onLoad({ filter: zodEnglishOnly.file }, (args) => {
      const original = readFileSync(args.path, 'utf8');
      if (!original.includes('export { default as en } from "./en.js";')) throw new Error(`scripts/bundle.mjs: ${args.path} no longer exports en from ./en.js; review zodEnglishOnly`);
      return { contents: zodEnglishOnly.contents, loader: 'js' };
    });
    for (const { file, edits } of deferredRequires) {
      b.onLoad({ filter: file }, (args) => {
        let contents = readFileSync(args.path, 'utf8');
        for (const [from, to] of edits) {
          if (!contents.includes(from)) throw new Error(`scripts/bundle.mjs: ${args.path} no longer holds ${JSON.stringify(from)}; review deferredRequires`);
          contents = contents.replace(from, to);
        }
        return { contents, loader: 'js' };
      });
    }
  },
};

/**
 * `metafile`: also return esbuild's metafile (which sources went into which output file).
 * `entry` and `entryName`: another entry point bundled the same way (a benchmark measuring the
 * libraries as a node loads them: bench/heartbeat-floor.ts); by default the CLI, as shoal.mjs.
 */
const defaultEntry = path.join(root, 'src/cli/main.ts');

export async function bundle(outdir, { metafile = false, entry = defaultEntry, entryName = 'shoal' } = {}) {
  rmSync(outdir, { recursive: true, force: true });
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Whitespace and comments out, names kept (issue 45, bench/RESULTS.md "Footprint"): a node
    // holds the source of every module it loaded as a string in its heap, 28 % smaller so, and
    // parsed that much faster. Comments were also what put non-ASCII characters in the output
    // (esbuild escapes them in strings): one such character makes V8 hold a whole file as UTF-16,
    // twice its size, and decode it on the slow path. Licence comments go to a .LEGAL.txt beside
    // each file; `asciiOnly` below fails the build should anything else bring one back. A stack
    // trace then points into long lines of the bundle with the functions' own names; to read one
    // against the sources, run them (SHOAL_FROM_SOURCE=1, bin/shoal.js).
    minifyWhitespace: true,
    legalComments: 'external',
    external: ['msgpackr-extract', 'bufferutil', 'utf-8-validate', 'ssh2'],
    banner: { js: "import { createRequire as __shoalRequire } from 'node:module'; const require = __shoalRequire(import.meta.url);" },
    outdir,
    entryNames: entryName,
    chunkNames: 'chunks/[name]-[hash]',
    outExtension: { '.js': '.mjs' },
    logLevel: 'warning',
    metafile,
    plugins: [deferRequires],
  });
  if (entry === defaultEntry) {
    const serve = await bundleServe(outdir, metafile);
    if (result.metafile !== undefined && serve !== undefined) Object.assign(result.metafile.outputs, serve.outputs);
  }
  asciiOnly(outdir);
  return result.metafile;
}

/**
 * The npm packages that `shoal serve` loads only on first use (X.509 for certificates, tar for
 * upgrades and the test image, undici for the HTTP client, BuildKit's gRPC and protobufjs,
 * pino-pretty for human lines), left out of serve.cjs and required from node_modules (they are
 * the package's dependencies, or theirs) when first used: serve.cjs is one file, and every byte
 * of it stays in a node's heap as the source of the script.
 */
const serveExternals = ['@peculiar/x509', 'reflect-metadata', 'tar', 'undici', '@grpc/grpc-js', '@grpc/proto-loader', 'protobufjs', 'pino-pretty'];

/**
 * The packages left outside serve.cjs are required, also where the sources import() them: a
 * script compiled from a code cache has no way to import() (V8 does not keep the callback that
 * Node.js would need with the cached code), and each of them has a CommonJS build.
 */
const requireOutside = {
  name: 'shoal-require-outside',
  setup(b) {
    const names = ['ssh2', ...serveExternals];
    const filter = new RegExp(`^(${names.map((n) => n.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})$`);
    b.onResolve({ filter }, (args) => (args.kind === 'dynamic-import' ? { path: args.path, namespace: 'shoal-require' } : { path: args.path, external: true }));
    b.onLoad({ filter: /.*/, namespace: 'shoal-require' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});\n`, loader: 'js', resolveDir: root }));
  },
};

/**
 * OUTDIR/serve.cjs: `shoal serve` alone (src/cli/serve-main.ts) as one CommonJS script, which
 * bin/shoal.js loads with a V8 code cache (bin/code-cache.js). Node.js 20 keeps no compile cache
 * for ES modules (22's module.enableCompileCache would), and compiling the JavaScript a node
 * loads was a third of its start (docs/operations.md, "Start-up time"). Bundled as the ES
 * modules are (same edits, whitespace out, ASCII only); `import.meta.url` is the script's URL.
 */
async function bundleServe(outdir, metafile) {
  const result = await build({
    entryPoints: [path.join(root, 'src/cli/serve-main.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    minifyWhitespace: true,
    legalComments: 'external',
    external: ['msgpackr-extract', 'bufferutil', 'utf-8-validate'],
    define: { 'import.meta.url': '__shoalScriptUrl' },
    banner: { js: "var __shoalScriptUrl = require('node:url').pathToFileURL(__filename).href;" },
    outfile: path.join(outdir, 'serve.cjs'),
    logLevel: 'warning',
    metafile,
    plugins: [deferRequires, requireOutside],
  });
  return result.metafile;
}

/**
 * OUTDIR/run.mjs: runs the build in OUTDIR as bin/shoal.js runs dist/ (bin/code-cache.js
 * `bundleMain`: serve from serve.cjs with its code cache when built, the rest from the modules),
 * for benchmarks that start nodes of a build (bench/ab.ts, bench/footprint.ts).
 */
export function writeRunner(outdir) {
  const loader = JSON.stringify(path.join(root, 'bin', 'code-cache.js'));
  writeFileSync(path.join(outdir, 'run.mjs'), `import { bundleMain } from ${loader};\nconst argv = process.argv.slice(2);\nprocess.exitCode = await (await bundleMain(${JSON.stringify(outdir)}, argv))(argv);\n`);
}

/** Fails the build when an output module holds a non-ASCII byte (see minifyWhitespace above). */
function asciiOnly(outdir) {
  const files = readdirSync(outdir, { recursive: true }).filter((f) => f.endsWith('.mjs') || f.endsWith('.cjs'));
  for (const f of files) {
    const bytes = readFileSync(path.join(outdir, f));
    const at = bytes.findIndex((b) => b > 0x7f);
    if (at >= 0) {
      const around = bytes.subarray(Math.max(0, at - 60), at + 20).toString('utf8');
      throw new Error(`scripts/bundle.mjs: ${f} holds a non-ASCII character at byte ${at} (...${around}...); V8 would keep the whole file as UTF-16: escape it or move it out of the output`);
    }
  }
}

/**
 * The web console (src/console/) for the browser: OUTDIR/console/ holds index.html, app.js and
 * app.css, which the node serves at /ui (src/api/console-routes.ts). Preact and htm are bundled
 * in; nothing is fetched at run time.
 */
export async function bundleConsole(outdir) {
  const dir = path.join(outdir, 'console');
  mkdirSync(dir, { recursive: true });
  await build({
    entryPoints: [path.join(root, 'src/console/main.ts')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: ['chrome109', 'firefox115', 'safari16'],
    minify: true,
    sourcemap: false,
    outfile: path.join(dir, 'app.js'),
    logLevel: 'warning',
  });
  copyFileSync(path.join(root, 'src/console/index.html'), path.join(dir, 'index.html'));
  copyFileSync(path.join(root, 'src/console/app.css'), path.join(dir, 'app.css'));
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outdir = process.argv[2];
  if (outdir === undefined || process.argv.length > 3) {
    console.error('usage: node scripts/bundle.mjs OUTDIR');
    process.exit(2);
  }
  await bundle(path.resolve(outdir));
  await bundleConsole(path.resolve(outdir));
}
