// The commands an upgrade runs on a node (npm, the new build's `shoal version`), through the one
// command runner (src/base/run-command.ts: arguments as an array, a timeout, bounded output), with
// a failure turned into `release_refused` that names the command, carries the end of its stderr
// and the step's reason, and says that nothing was activated.

import { CommandError, runCommand } from '../../base/run-command.ts';
import { ShoalError } from '../../errors.ts';

export interface ReleaseCommandOptions {
  cwd?: string;
  timeoutMs: number;
  env?: NodeJS.ProcessEnv;
  /** The reason put in details when the command fails. */
  reason: string;
}

/** Runs `cmd args`; resolves with its stdout, or rejects with `release_refused` saying what failed. */
export async function runReleaseCommand(cmd: string, args: readonly string[], opts: ReleaseCommandOptions): Promise<string> {
  try {
    return (await runCommand(cmd, args, { cwd: opts.cwd, timeoutMs: opts.timeoutMs, env: opts.env })).stdout;
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    const what = err.reason === 'not_found' ? `${cmd} is not installed on this node` : err.message;
    throw new ShoalError('release_refused', `${what}; nothing was activated`, { reason: opts.reason, command: cmd, failure: err.reason });
  }
}
