// The one way the firewall runs a command (`nft`, `conntrack`, `iptables`): arguments as an
// array (never a shell string), optional stdin, a timeout, and a typed error that says what ran
// and what it printed. A runner is a port, so tests can run the same code inside a network
// namespace (`ip netns exec NS`, commandInNamespace) or record the calls.

import { spawn } from 'node:child_process';

export interface CommandOutput {
  stdout: string;
  stderr: string;
  /** The exit status (0 = success). A non-zero status is returned, not thrown: some tools use 1 for "nothing matched". */
  code: number;
}

export type CommandRunner = (cmd: string, args: readonly string[], input?: string) => Promise<CommandOutput>;

/** How long one firewall command may take; `nft -f` of a large table takes well under a second. */
export const commandTimeoutMsDefault = 10_000;
/** Output kept from one command (a listing of a large table is a few MB at most). */
export const commandOutputBytesMax = 64 * 1024 * 1024;

export class FirewallCommandError extends Error {
  constructor(readonly cmd: string, readonly args: readonly string[], readonly code: number | null, readonly stderr: string, why: string) {
    super(`${cmd} ${args.join(' ')} ${why}${stderr.trim() === '' ? '' : `: ${stderr.trim().split('\n').slice(0, 5).join(' / ')}`}`);
  }
}

/** Runs commands on this host (or, with `prefix`, through a wrapper such as `ip netns exec NS`). */
export function commandRunner(opts: { timeoutMs?: number; prefix?: readonly string[] } = {}): CommandRunner {
  const timeoutMs = opts.timeoutMs ?? commandTimeoutMsDefault;
  const prefix = opts.prefix ?? [];
  return (cmd, args, input) => new Promise((resolve, reject) => {
    const [file, ...rest] = [...prefix, cmd, ...args];
    const child = spawn(file as string, rest, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    const keep = (into: Buffer[]) => (b: Buffer): void => {
      bytes += b.length;
      if (bytes <= commandOutputBytesMax) into.push(b);
      else child.kill('SIGKILL');
    };
    child.stdout?.on('data', keep(out));
    child.stderr?.on('data', keep(err));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new FirewallCommandError(cmd, args, null, '', `could not run (${e.message}); is it installed?`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString();
      if (signal !== null) {
        const why = bytes > commandOutputBytesMax ? `printed more than ${commandOutputBytesMax} bytes` : `did not finish within ${timeoutMs} ms`;
        reject(new FirewallCommandError(cmd, args, null, stderr, why));
        return;
      }
      resolve({ stdout: Buffer.concat(out).toString(), stderr, code: code ?? 1 });
    });
    if (child.stdin !== null) {
      // A command that fails early closes its stdin; its exit status says why, not the EPIPE.
      child.stdin.on('error', () => undefined);
      child.stdin.end(input);
    }
  });
}

/** Throws unless the command exited 0. */
export async function runChecked(run: CommandRunner, cmd: string, args: readonly string[], input?: string): Promise<string> {
  const r = await run(cmd, args, input);
  if (r.code !== 0) throw new FirewallCommandError(cmd, args, r.code, r.stderr, `failed (exit ${r.code})`);
  return r.stdout;
}
