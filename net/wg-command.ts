// How shoal's network agents run a network tool (`wg`, `ip`, `bridge`, `systemd-run`): through the
// one command runner (src/base/run-command.ts: argv arrays, a timeout, bounded output), with its
// failure turned into `net_tool_failed` naming the command and carrying its stderr. The answer is
// the tool's stdout, for a strict parser (`ip -j`, `wg show dump`); nothing here interprets it.
// A ToolRunner is a port, so tests can record or answer the calls.

import { CommandError, runCommand } from '../src/base/run-command.ts';
import { ShoalError } from '../src/errors.ts';

/** A tool call that takes longer is killed and fails with net_tool_failed. */
export const toolTimeoutMsDefault = 10_000;

/** Stdout beyond this many bytes fails the call: no tool we run prints this much. */
export const toolOutputBytesMax = 4 << 20;

export interface ToolOptions {
  /** Written to the tool's stdin (then closed). Secrets go here, never in argv (argv is public in /proc). */
  input?: string;
  timeoutMs?: number;
}

/** Runs a tool by name; resolves its stdout; rejects with ShoalError('net_tool_failed'). */
export type ToolRunner = (cmd: string, args: readonly string[], opts?: ToolOptions) => Promise<string>;

export const runTool: ToolRunner = async (cmd, args, opts = {}) => {
  try {
    const r = await runCommand(cmd, args, { timeoutMs: opts.timeoutMs ?? toolTimeoutMsDefault, input: opts.input, stdoutBytesMax: toolOutputBytesMax });
    return r.stdout;
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    const missing = err.reason === 'not_found';
    throw new ShoalError('net_tool_failed', missing ? `${cmd} is not installed (or not on PATH)` : err.message, {
      cmd, missing, reason: err.reason, code: err.exitCode, stderr: err.stderrTail.trim(),
    });
  }
};
