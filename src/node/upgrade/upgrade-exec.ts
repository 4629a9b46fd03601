// The one wrapper for the commands an upgrade runs on a node (tar, npm, the new build's `shoal
// version`): arguments as an array, never a shell string; a timeout; a typed error that names the
// command and carries the end of its output.

import { execFile } from 'node:child_process';
import { ShoalError } from '../../errors.ts';

/** Output kept from a failed command for the error message. */
const outputTailChars = 2000;
/** Output a command may print before it is stopped (tar's listing of a package is the largest). */
const outputBytesMax = 16 * 1024 * 1024;

export interface RunOptions {
  cwd?: string;
  timeoutMs: number;
  env?: NodeJS.ProcessEnv;
  /** The reason put in details when the command fails. */
  reason: string;
}

/** Runs `cmd args`; resolves with its stdout, or rejects with `release_refused` saying what failed. */
export function runCommand(cmd: string, args: readonly string[], opts: RunOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, [...args], { cwd: opts.cwd, timeout: opts.timeoutMs, env: opts.env ?? process.env, maxBuffer: outputBytesMax, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err === null) {
        resolve(stdout);
        return;
      }
      const e = err as NodeJS.ErrnoException & { killed?: boolean };
      const why = e.code === 'ENOENT' ? `${cmd} is not installed on this node`
        : e.killed === true ? `no answer within ${opts.timeoutMs / 1000} s` : (`${stderr}`.trim().slice(-outputTailChars) || e.message);
      reject(new ShoalError('release_refused', `${cmd} ${args.join(' ')} failed: ${why}; nothing was activated`, { reason: opts.reason }));
    });
  });
}
