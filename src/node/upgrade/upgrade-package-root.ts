// The folder of the shoal package this process runs from: the first folder up from a module's
// own file that holds shoal's package.json. The depth differs between the sources (src/node/,
// src/cli/) and the bundle (dist/, dist/chunks/), so it is found, not assumed.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folders walked up at most: the deepest module sits a few levels below the root. */
const levelsMax = 6;

export function packageRootOf(moduleUrl: string): string {
  let dir = path.dirname(fileURLToPath(moduleUrl));
  for (let i = 0; i < levelsMax; i++) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        if ((JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown }).name === 'shoal') return dir;
      } catch {
        // Not a package.json we can read: keep walking up.
      }
    }
    dir = path.dirname(dir);
  }
  throw new Error(`no shoal package.json above ${fileURLToPath(moduleUrl)}`);
}

/** The package this very module belongs to. */
export const runningPackageRoot = (): string => packageRootOf(import.meta.url);
