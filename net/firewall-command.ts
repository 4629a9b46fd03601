// How the firewall runs a command (`nft`, `conntrack`, `iptables`): through the one command
// runner (src/base/run-command.ts: argv arrays, optional stdin, a timeout, bounded output, a
// CommandError that says what ran and what it printed). A non-zero exit is an answer here, not
// an error: some tools use 1 for "nothing matched". A CommandRunner is a port, so tests can run
// the same code inside a network namespace (`ip netns exec NS`) or record the calls.

import { CommandError, runCommand } from '../src/base/run-command.ts';

export interface CommandOutput {
  stdout: string;
  stderr: string;
  /** The exit status (0 = success). A non-zero status is returned, not thrown. */
  code: number;
}

export type CommandRunner = (cmd: string, args: readonly string[], input?: string) => Promise<CommandOutput>;

/** How long one firewall command may take; `nft -f` of a large table takes well under a second. */
export const commandTimeoutMsDefault = 10_000;
/** Stdout kept from one command (a listing of a large table or of conntrack is a few MB at most). */
export const commandOutputBytesMax = 64 * 1024 * 1024;

/** Runs commands on this host (or, with `prefix`, through a wrapper such as `ip netns exec NS`). */
export function commandRunner(opts: { timeoutMs?: number; prefix?: readonly string[] } = {}): CommandRunner {
  const timeoutMs = opts.timeoutMs ?? commandTimeoutMsDefault;
  const [file, ...prefixArgs] = [...(opts.prefix ?? [])];
  return async (cmd, args, input) => {
    const r = file === undefined
      ? await runCommand(cmd, args, { timeoutMs, input, stdoutBytesMax: commandOutputBytesMax, nonZeroExit: 'return' })
      : await runCommand(file, [...prefixArgs, cmd, ...args], { timeoutMs, input, stdoutBytesMax: commandOutputBytesMax, nonZeroExit: 'return' });
    return { stdout: r.stdout, stderr: r.stderr, code: r.exitCode };
  };
}

/** Throws a CommandError unless the command exited 0. */
export async function runChecked(run: CommandRunner, cmd: string, args: readonly string[], input?: string): Promise<string> {
  const r = await run(cmd, args, input);
  if (r.code !== 0) throw new CommandError({ command: cmd, args, reason: 'exit', exitCode: r.code, signal: null, stderrTail: r.stderr });
  return r.stdout;
}
