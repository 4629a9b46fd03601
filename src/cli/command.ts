// A command of the command line, and running one: its credential flags taken, its failure mapped
// to an exit code (runCliCommand; not ../base/run-command.ts, which runs other programs).
// Shared by the whole command line (main.ts) and the serve entry (serve-main.ts).

import { reportError } from './report.ts';
import { takeCredentialFlags, useCredentialFlags } from './credential-flag.ts';

export type Run = (argv: string[]) => Promise<number>;

/** A loaded command: what runs it, and its help (whose usage line a usage error repeats). */
export interface Command {
  run: Run;
  help: string;
}

/** Loads and runs the command `name` with its arguments `rest`; a failure is reported and mapped to its exit code. */
export async function runCliCommand(name: string, rest: string[], json: boolean, load: () => Promise<Command>): Promise<number> {
  let loaded: Command | undefined;
  try {
    useCredentialFlags(takeCredentialFlags(rest));
    loaded = await load();
    return await loaded.run(rest);
  } catch (err) {
    return reportError(name, err, json, loaded?.help);
  }
}
