// The one way shoal runs a network tool (`wg`, `ip`, `wireguard-go`): arguments as an array (never
// a shell string), an optional stdin, a timeout, and a typed error that names the command and
// carries its stderr. Output is returned as bytes-turned-text for a strict parser (`ip -j`,
// `wg show dump`); nothing here interprets it.

import { spawn } from 'node:child_process';
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

export const runTool: ToolRunner = (cmd, args, opts = {}) => new Promise((resolve, reject) => {
  const timeoutMs = opts.timeoutMs ?? toolTimeoutMsDefault;
  const shown = [cmd, ...args].join(' ');
  const child = spawn(cmd, [...args], { stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  let outBytes = 0;
  let err = '';
  let failure: string | null = null;
  const timer = setTimeout(() => {
    failure = `did not finish within ${timeoutMs} ms`;
    child.kill('SIGKILL');
  }, timeoutMs);
  child.stdout?.on('data', (b: Buffer) => {
    outBytes += b.length;
    if (outBytes > toolOutputBytesMax && failure === null) {
      failure = `printed more than ${toolOutputBytesMax} bytes`;
      child.kill('SIGKILL');
    }
    out.push(b);
  });
  child.stderr?.on('data', (b: Buffer) => { if (err.length < 4096) err += b.toString(); });
  child.once('error', (e) => {
    clearTimeout(timer);
    const missing = (e as NodeJS.ErrnoException).code === 'ENOENT';
    reject(new ShoalError('net_tool_failed', missing ? `${cmd} is not installed (or not on PATH)` : `${shown}: ${e.message}`, { cmd, missing }));
  });
  child.once('close', (code, signal) => {
    clearTimeout(timer);
    if (failure === null && code === 0) {
      resolve(Buffer.concat(out).toString('utf8'));
      return;
    }
    const why = failure ?? `exited with ${code ?? signal}`;
    reject(new ShoalError('net_tool_failed', `${shown} ${why}${err.trim() !== '' ? `: ${err.trim()}` : ''}`, { cmd, code, stderr: err.trim() }));
  });
  if (child.stdin) {
    // A tool that fails early closes its stdin: its exit status says why, not the EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input);
  }
});
