#!/usr/bin/env node
// The `shoal` command. Runs dist/shoal.mjs, the bundle that `npm ci` builds (`npm run build`),
// when it is newer than every TypeScript source it was built from; otherwise the sources
// themselves through tsx, so an edited tree runs as edited with no build step. The bundle spares
// each process the tsx loader: about 35 MiB of memory and part of a second of start-up.
// SHOAL_FROM_SOURCE=1 always runs the sources. `shoal serve` runs from dist/serve.cjs, loaded
// with a V8 code cache (bin/code-cache.js), unless SHOAL_CODE_CACHE=0.
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { URL, fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bundle = path.join(root, 'dist', 'shoal.mjs');
/** The folders the bundle is built from (every import of src/cli/main.ts lies in them). */
const sourceDirs = ['src', 'fsm', 'transport', 'net'];

function newestTs(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestTs(p));
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function bundleIsFresh() {
  if (process.env.SHOAL_FROM_SOURCE === '1' || !existsSync(bundle)) return false;
  const built = statSync(bundle).mtimeMs;
  // An installed package (npm pack) ships the bundle and no sources: the bundle is all there is.
  return sourceDirs.every((d) => !existsSync(path.join(root, d)) || newestTs(path.join(root, d)) <= built);
}

let main;
if (bundleIsFresh()) {
  // serve from dist/serve.cjs with its code cache (bin/code-cache.js), the rest from the modules.
  const { bundleMain } = await import('./code-cache.js');
  main = await bundleMain(path.dirname(bundle), process.argv.slice(2));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(process.argv.slice(2));
