// The one way shoal runs another program to completion (wg, ip, bridge, nft, conntrack,
// iptables, systemctl, npm, a new build's `shoal version`): arguments as an array, never a shell
// string; a timeout on every call; stdout and stderr captured within a byte limit each; optional
// stdin; an optional environment; and a typed error (CommandError) that says what was run and why
// it failed. What a program prints is handed back as text: parsing it (`wg show dump`, `nft -j`,
// `ip -j`) belongs to the caller's own thin wrapper, which also turns a CommandError into the
// catalog error of its domain.
//
// Each program runs in a process group of its own, so a timeout kills what it started too
// (`sh -c`, npm's children) and not only the first process; a grandchild that left the group and
// kept the pipes open cannot hold a call past `timeoutMs` plus pipesAfterKillMs.
//
// Long-lived processes are not commands and do not come here: the `shoal dev` nodes
// (src/cli/dev-supervisor.ts), the drill's pause helper (src/node/drill/drill-actions.ts) and a
// daemonizing `wireguard-go` (net/wg.ts), whose pipes would stay open for as long as it runs.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { assert } from './assert.ts';

/** Stdout kept by default; past it the program is killed and the call fails (`output_limit`). */
export const stdoutBytesMaxDefault = 4 * 1024 * 1024;
/** Stderr kept by default: its last bytes (the end says why a program failed), the rest dropped. */
export const stderrBytesMaxDefault = 64 * 1024;
/** After a kill, how long the pipes may stay open (held by an escaped grandchild) before the call settles anyway. */
export const pipesAfterKillMs = 1000;
/** Stderr quoted in an error's message (the whole kept tail is on the error). */
const messageStderrCharsMax = 600;

export interface RunOptions {
  /** The program is killed (with what it started) after this long; required, so no call can hang. */
  timeoutMs: number;
  /** Written to stdin, then closed; without it stdin is /dev/null. Secrets go here, never in argv (public in /proc). */
  input?: string | Uint8Array;
  /** The whole environment of the program (default: this process's). */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  stdoutBytesMax?: number;
  stderrBytesMax?: number;
  /** `reject` (default): a non-zero exit is a CommandError; `return`: it is a result (tools that exit 1 for "nothing matched"). */
  nonZeroExit?: 'reject' | 'return';
}

export interface CommandResult {
  stdout: string;
  /** The last stderrBytesMax bytes of stderr. */
  stderr: string;
  /** Stderr bytes dropped from the front to keep within stderrBytesMax. */
  stderrBytesDropped: number;
  exitCode: number;
}

/**
 * Why a command failed. `not_found`: no such program on PATH. `spawn_failed`: it could not be
 * started (permissions, a missing working directory). `exit`: a non-zero exit status. `signal`:
 * killed by a signal it was not sent by us. `timeout`: killed after timeoutMs. `output_limit`:
 * killed for printing more than stdoutBytesMax.
 */
export type CommandFailureReason = 'not_found' | 'spawn_failed' | 'exit' | 'signal' | 'timeout' | 'output_limit';

export interface CommandFailure {
  command: string;
  args: readonly string[];
  reason: CommandFailureReason;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The last bytes of stderr (within stderrBytesMax). */
  stderrTail: string;
  /** What the reason alone does not say: the limit passed, the errno of a failed start. */
  detail?: string;
}

/** A command that could not be run or did not succeed; the message names the command line and the cause. */
export class CommandError extends Error implements CommandFailure {
  readonly command: string;
  readonly args: readonly string[];
  readonly reason: CommandFailureReason;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderrTail: string;
  readonly detail?: string;

  constructor(f: CommandFailure) {
    super(describeFailure(f));
    this.name = 'CommandError';
    this.command = f.command;
    this.args = [...f.args];
    this.reason = f.reason;
    this.exitCode = f.exitCode;
    this.signal = f.signal;
    this.stderrTail = f.stderrTail;
    if (f.detail !== undefined) this.detail = f.detail;
  }

  get timedOut(): boolean {
    return this.reason === 'timeout';
  }
}

export function isCommandError(err: unknown): err is CommandError {
  return err instanceof CommandError;
}

/** `command args...` as one line for a person, each argument quoted when it needs to be. */
export function commandLine(command: string, args: readonly string[]): string {
  return [command, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

function describeFailure(f: CommandFailure): string {
  const line = commandLine(f.command, f.args);
  const lines = f.stderrTail.trim().split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const quoted = lines.slice(-5).join(' / ').slice(-messageStderrCharsMax);
  const stderr = quoted === '' ? '' : `: ${quoted}`;
  switch (f.reason) {
    case 'not_found': return `${f.command} is not installed (not found on PATH)`;
    case 'spawn_failed': return `${line} could not be started: ${f.detail ?? 'unknown cause'}`;
    case 'exit': return `${line} exited with code ${f.exitCode ?? '?'}${stderr}`;
    case 'signal': return `${line} was killed by ${f.signal ?? 'a signal'}${stderr}`;
    case 'timeout': return `${line} did not finish within ${f.detail ?? '?'} and was killed${stderr}`;
    case 'output_limit': return `${line} printed more than ${f.detail ?? '?'} on stdout and was killed`;
  }
}

/**
 * Runs `command` with `args` and resolves with what it printed once it exits 0 (or any status,
 * with nonZeroExit 'return'); rejects with a CommandError otherwise.
 */
export function runCommand(command: string, args: readonly string[], opts: RunOptions): Promise<CommandResult> {
  assert(command !== '', 'runCommand: an empty command');
  assert(Number.isFinite(opts.timeoutMs) && opts.timeoutMs > 0, `runCommand ${command}: timeoutMs must be positive, not ${opts.timeoutMs}`);
  const stdoutBytesMax = opts.stdoutBytesMax ?? stdoutBytesMaxDefault;
  const stderrBytesMax = opts.stderrBytesMax ?? stderrBytesMaxDefault;
  assert(stdoutBytesMax > 0 && stderrBytesMax > 0, `runCommand ${command}: output limits must be positive`);
  return new Promise((resolve, reject) => {
    startCommand(command, [...args], { ...opts, stdoutBytesMax, stderrBytesMax }, resolve, reject);
  });
}

type Limited = RunOptions & { stdoutBytesMax: number; stderrBytesMax: number };

function startCommand(command: string, args: string[], opts: Limited, resolve: (r: CommandResult) => void, reject: (e: CommandError) => void): void {
  const stdout = new Capture(opts.stdoutBytesMax, 'head');
  const stderr = new Capture(opts.stderrBytesMax, 'tail');
  const failure = (reason: CommandFailureReason, more: Partial<CommandFailure> = {}): CommandError =>
    new CommandError({ command, args, reason, exitCode: null, signal: null, stderrTail: stderr.text(), ...more });
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      cwd: opts.cwd, env: opts.env ?? process.env, detached: true,
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
  } catch (err) {
    // spawn throws at once only for arguments Node refuses (a NUL byte in one, say).
    reject(failure('spawn_failed', { detail: (err as Error).message }));
    return;
  }
  let killedFor: CommandError | null = null;
  let settled = false;
  const timers: NodeJS.Timeout[] = [];
  const settle = (outcome: CommandResult | CommandError): void => {
    if (settled) return;
    settled = true;
    for (const t of timers) clearTimeout(t);
    if (outcome instanceof CommandError) reject(outcome);
    else resolve(outcome);
  };
  const kill = (why: CommandError): void => {
    if (killedFor !== null || settled) return;
    killedFor = why;
    killGroup(child);
    // Settles even if an escaped grandchild keeps the pipes open.
    timers.push(setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      settle(why);
    }, pipesAfterKillMs));
  };
  timers.push(setTimeout(() => kill(failure('timeout', { detail: `${opts.timeoutMs} ms` })), opts.timeoutMs));
  child.stdout?.on('data', (b: Buffer) => {
    if (!stdout.add(b)) kill(failure('output_limit', { detail: `${opts.stdoutBytesMax} bytes (stdoutBytesMax)` }));
  });
  child.stderr?.on('data', (b: Buffer) => stderr.add(b));
  child.on('error', (e: NodeJS.ErrnoException) => {
    // 'error' also reports a failed kill of a running child: only a start that failed settles here.
    if (child.pid !== undefined) return;
    settle(startFailure(command, args, opts.cwd, e, failure));
  });
  child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
    if (child.pid === undefined) return;
    if (killedFor !== null) settle(killedFor);
    else if (signal !== null) settle(failure('signal', { signal }));
    else if (code !== 0 && opts.nonZeroExit !== 'return') settle(failure('exit', { exitCode: code }));
    else settle({ stdout: stdout.text(), stderr: stderr.text(), stderrBytesDropped: stderr.dropped, exitCode: code ?? 0 });
  });
  if (child.stdin !== null) {
    // A program that exits early closes its stdin: its exit status says why, not the EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input);
  }
}

function startFailure(command: string, args: string[], cwd: string | undefined, e: NodeJS.ErrnoException, failure: (reason: CommandFailureReason, more?: Partial<CommandFailure>) => CommandError): CommandError {
  // Node says ENOENT for a missing working directory too.
  if (cwd !== undefined && !existsSync(cwd)) return failure('spawn_failed', { detail: `the working directory ${cwd} does not exist` });
  if (e.code === 'ENOENT') return failure('not_found', { detail: e.message });
  return failure('spawn_failed', { detail: `${e.code ?? 'error'}: ${e.message}` });
}

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // The group is gone already, or was never made: the child alone.
    child.kill('SIGKILL');
  }
}

/** Output kept within `bytesMax`: the first bytes (`head`, refusing more) or the last (`tail`, dropping the front). */
class Capture {
  private chunks: Buffer[] = [];
  private bytes = 0;
  dropped = 0;

  constructor(private readonly bytesMax: number, private readonly keep: 'head' | 'tail') {}

  /** Keeps `b`; false when a head capture is full (nothing more is kept). */
  add(b: Buffer): boolean {
    if (this.keep === 'head') {
      if (this.bytes + b.length > this.bytesMax) return false;
      this.chunks.push(b);
      this.bytes += b.length;
      return true;
    }
    this.chunks.push(b);
    this.bytes += b.length;
    while (this.bytes > this.bytesMax) {
      const first = this.chunks[0] as Buffer;
      const over = this.bytes - this.bytesMax;
      if (first.length <= over) {
        this.chunks.shift();
        this.bytes -= first.length;
        this.dropped += first.length;
      } else {
        this.chunks[0] = first.subarray(over);
        this.bytes -= over;
        this.dropped += over;
      }
    }
    return true;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}
