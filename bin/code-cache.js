// Loading the bundle of `shoal serve` (dist/serve.cjs) with a V8 code cache. Node.js 20 keeps no
// compile cache for ES modules (22's module.enableCompileCache would), and compiling the
// JavaScript a node loads was about a third of its start (docs/operations.md, "Start-up time").
// serve.cjs is one CommonJS script: compiled with vm.Script, it takes the code V8 compiled in an
// earlier run (cachedData) and skips parsing and compiling what that run compiled. The first run
// of a build writes the cache a few seconds after its start (functions compiled while the node
// started are in it), to the file beside the script, atomically (a temporary file renamed). A
// cache is used only for the same script (its size and modification time on the first line)
// and the same Node.js; V8 refuses one made under other V8 flags (then it is written again).
// Nothing fails for want of a cache: where it cannot be written (a read-only package folder),
// the node compiles as before. The script holds no import(): code from a cache could not run one
// (scripts/bundle.mjs requires the packages left outside it). SHOAL_CODE_CACHE=0 loads the ES
// modules instead (dist/shoal.mjs).
import { isAscii } from 'node:buffer';
import { closeSync, existsSync, fstatSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import vm from 'node:vm';

/** The first line of a cache file, with the script's size and modification time after it. */
const magic = 'shoal-code-cache 1';

/** ms after the load that the cache is written, by default: the node has started by then. */
export const writeAfterMsDefault = 5000;

/**
 * The V8 flags `shoal serve` runs with, set before its script is compiled: V8 refuses a cache made
 * under other flags, so they are the same whenever the cache is made or used. `--bytecode-old-age=2`:
 * V8 drops the bytecode of a function that has not run through two full collections (five by
 * default) and compiles it again if it runs later. An idle node has few full collections (the
 * start's and the memory reducer's, after it), and with the default it kept the bytecode of every
 * function it ran only while starting (module set-up, schemas, route registration): about 2 MiB of
 * its heap (docs/operations.md, "The code cache").
 */
export const serveV8Flags = '--bytecode-old-age=2';

/** The cached data of `file` in `cacheFile` if that was written for this script, else undefined. */
function readCache(cacheFile, key) {
  let bytes;
  try {
    bytes = readFileSync(cacheFile);
  } catch {
    return undefined;
  }
  const head = Buffer.from(key, 'latin1');
  return bytes.length > head.length && bytes.subarray(0, head.length).equals(head) ? bytes.subarray(head.length) : null;
}

/**
 * The script's text and its cache key (size and modification time), from one open file: a
 * rebuild between the two reads cannot pair one file's key with another's text. The build
 * writes ASCII only (scripts/bundle.mjs), which reads as Latin-1 without UTF-8's decoding: a few
 * ms of the start for 3 MB; any other text is read as UTF-8.
 */
function readScript(file) {
  const fd = openSync(file, 'r');
  try {
    const st = fstatSync(fd, { bigint: true });
    const bytes = readFileSync(fd);
    return { key: `${magic} ${process.version} ${process.arch} ${st.size} ${st.mtimeNs}\n`, source: bytes.toString(isAscii(bytes) ? 'latin1' : 'utf8') };
  } finally {
    closeSync(fd);
  }
}

/**
 * Runs the CommonJS script `file` in this process, with the code cache in `cacheFile` when there
 * is one for it; returns its exports and what became of the cache: 'used', 'none' (no file),
 * 'stale' (written for another script or Node.js) or 'rejected' (by V8: other flags, or
 * damaged). Unless 'used', the cache is written `writeAfterMs` later (`onWritten` is told
 * where; `onError` of a failure to write, which changes nothing else). `v8Flags` are set before
 * the script is compiled, so the cache is made and used under them.
 */
export function loadWithCodeCache(file, { cacheFile = `${file}.cache`, writeAfterMs = writeAfterMsDefault, v8Flags, onWritten, onError } = {}) {
  // node:v8 only when there are flags: every other command loads this module too.
  if (v8Flags !== undefined) createRequire(import.meta.url)('node:v8').setFlagsFromString(v8Flags);
  const { key, source } = readScript(file);
  const cachedData = readCache(cacheFile, key);
  // Wrapped as Node.js wraps a CommonJS module; the read source is garbage once compiled.
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: file,
    cachedData: cachedData ?? undefined,
  });
  const cache = cachedData === undefined ? 'none' : cachedData === null ? 'stale' : script.cachedDataRejected ? 'rejected' : 'used';
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file));
  if (cache !== 'used') {
    setTimeout(() => {
      const tmp = `${cacheFile}.${process.pid}.tmp`;
      try {
        writeFileSync(tmp, Buffer.concat([Buffer.from(key, 'latin1'), script.createCachedData()]));
        renameSync(tmp, cacheFile);
        onWritten?.(cacheFile);
      } catch (err) {
        rmSync(tmp, { force: true });
        onError?.(err);
      }
    }, writeAfterMs).unref();
  }
  return { exports: module.exports, cache };
}

/**
 * The `main` of a built bundle in `distDir` for the command line `argv`: `shoal serve` from
 * serve.cjs with its code cache, when built and not turned off (SHOAL_CODE_CACHE=0); every other
 * command, and serve without serve.cjs, from the ES modules (shoal.mjs, its chunks loaded as
 * needed).
 */
export async function bundleMain(distDir, argv, env = process.env) {
  const serveScript = path.join(distDir, 'serve.cjs');
  if (argv[0] === 'serve' && env.SHOAL_CODE_CACHE !== '0' && existsSync(serveScript)) return loadWithCodeCache(serveScript, { v8Flags: serveV8Flags }).exports.main;
  return (await import(pathToFileURL(path.join(distDir, 'shoal.mjs')).href)).main;
}
