// Builds the console once per test process into a temporary folder, as `npm run build` does into
// dist/console/, so a test serves the sources as they are now and not a stale dist/.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleConsole } from '../../scripts/bundle.mjs';

let built: Promise<string> | undefined;

/** The folder holding index.html, app.js and app.css. */
export function builtConsole(): Promise<string> {
  built ??= (async () => {
    const out = mkdtempSync(path.join(os.tmpdir(), 'shoal-console-'));
    await bundleConsole(out);
    return path.join(out, 'console');
  })();
  return built;
}
