// The entry of dist/serve.cjs: `shoal serve` alone, which bin/shoal.js loads with a V8 code
// cache (bin/code-cache.js; docs/operations.md, "Start-up time"). The same command as
// `main(['serve', ...])` of main.ts, without the rest of the command line in its source.

import { wantsJson } from './args.ts';
import { runCliCommand } from './command.ts';
import { serveCommand, serveHelp } from './serve.ts';

/** Runs `shoal serve` with `argv` as given to the command (its first word 'serve'). */
export async function main(argv: string[]): Promise<number> {
  if (argv[0] !== 'serve') throw new Error(`dist/serve.cjs runs 'shoal serve' only, not ${JSON.stringify(argv[0])}: bin/shoal.js loads it for that command alone`);
  return runCliCommand('serve', argv.slice(1), wantsJson(argv), async () => ({ run: serveCommand, help: serveHelp }));
}
