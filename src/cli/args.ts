// Argument parsing shared by the commands: node's parseArgs, strict, with usage errors said our
// way (what is wrong, then the command's usage line) instead of parseArgs' own wording.

import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { ErrorCode } from '../errors.ts';

/**
 * Exit codes; scripts and the systemd unit rely on them (docs/operations.md, "Exit codes").
 * `shoal serve` exits with 1 for a crash (restart it) and with one of 2, 4-7 for causes that a
 * restart cannot cure (RestartPreventExitStatus); 8 and 9 may clear up by themselves.
 */
export const exitCodes = {
  ok: 0,
  failed: 1,
  usage: 2,
  unavailable: 3,
  corrupt: 4,
  removed: 5,
  upgradeRequired: 6,
  storageFormat: 7,
  addressInUse: 8,
  joinFailed: 9,
  /** The node asked to be restarted (a drill's `kill`): every service manager starts it again. */
  restartRequested: 10,
} as const;

/** The exit codes a service manager must not restart on (a restart cannot cure them). */
export const noRestartExitCodes = [exitCodes.usage, exitCodes.corrupt, exitCodes.removed, exitCodes.upgradeRequired, exitCodes.storageFormat] as const;

/**
 * The command line itself is wrong; nothing was done. `usage` is the command's usage line: set
 * by `parse`, else filled in by whoever runs the command and knows its help text.
 */
export class UsageError extends Error {
  constructor(message: string, public usage?: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The usage line(s) of a help text: from its start to the first blank line. */
export function usageOf(help: string): string {
  const end = help.indexOf('\n\n');
  return end < 0 ? help : help.slice(0, end);
}

/** Whether the command line asks for JSON output (so failures are JSON too, usage errors included). */
export function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--json');
}

export type Options = NonNullable<ParseArgsConfig['options']>;

type Parsed<O extends Options> = ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: true }>>;

/** `-3`, `-1.5`, `-.5`, `-5s`: a minus before a digit (a negative count or duration). */
const negativeNumber = /^-\.?\d/;

/**
 * Parses `argv`; a bad flag is a UsageError carrying the usage line of `help`. A negative number
 * (`-3`, `-1.5`, `-5s`) is never an option (no option is a digit): it is read as an argument, or as the
 * value of the option before it, so the command's own check says what is wrong with it
 * ("replicas must be at least 0") instead of parseArgs' "unknown option -3".
 */
export function parse<O extends Options>(argv: string[], options: O, help: string): Parsed<O> {
  const negatives = new Map<string, string>();
  const end = argv.indexOf('--');
  const args = argv.map((a, i) => {
    if ((end >= 0 && i > end) || !negativeNumber.test(a)) return a;
    const stand = `\u0000${negatives.size}`;
    negatives.set(stand, a);
    return stand;
  });
  let parsed: Parsed<O>;
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(parseArgsMessage(err as Error & { code?: string }, Object.keys(options)), usageOf(help));
  }
  if (negatives.size === 0) return parsed;
  const back = (v: unknown): unknown => (typeof v === 'string' ? negatives.get(v) ?? v : Array.isArray(v) ? v.map(back) : v);
  const values = parsed.values as Record<string, unknown>;
  for (const k of Object.keys(values)) values[k] = back(values[k]);
  parsed.positionals.splice(0, parsed.positionals.length, ...parsed.positionals.map((p) => negatives.get(p) ?? p));
  return parsed;
}

/** parseArgs' message, reworded: "unknown option --foo", "option --addr needs a value", ... */
export function parseArgsMessage(err: Error & { code?: string }, known: string[]): string {
  const name = /'(-[^' ]+)/.exec(err.message)?.[1] ?? '';
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const guess = closest(name.replace(/^-+/, ''), known);
    return `unknown option ${name}${guess !== undefined ? ` (did you mean --${guess}?)` : ''}`;
  }
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    if (err.message.includes('does not take an argument')) return `option ${name} takes no value`;
    if (err.message.includes('ambiguous')) return `option ${name} needs a value; to give one that starts with '-', write ${name}=VALUE`;
    return `option ${name} needs a value`;
  }
  return err.message.charAt(0).toLowerCase() + err.message.slice(1);
}

/**
 * The known name nearest to a mistyped one, for "did you mean": options, commands, contexts. At
 * most 2 edits away, and fewer than the typed name's length (`up` is not a typo of `rm`).
 */
export function closest(typed: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(typed, k);
    if (d < bestDistance && d < typed.length) {
      best = k;
      bestDistance = d;
    }
  }
  return typed.length > 1 ? best : undefined;
}

/** " (did you mean X?)" for the nearest of `known`, or nothing. */
export function didYouMean(typed: string, known: readonly string[]): string {
  const guess = closest(typed, known);
  return guess === undefined ? '' : ` (did you mean ${guess}?)`;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

export function intFlag(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(n) || n <= 0 || n > 65535) throw new UsageError(`--${name} must be a port-sized positive integer, got '${value}'`);
  return n;
}

/** The exit code of a command that failed with a catalog error (docs/operations.md, "Exit codes"). */
export function exitCodeOfError(code: ErrorCode, retryable: boolean): number {
  switch (code) {
    case 'storage_corrupt': return exitCodes.corrupt;
    case 'storage_format': return exitCodes.storageFormat;
    case 'config_invalid': return exitCodes.usage;
    case 'removed': return exitCodes.removed;
    case 'upgrade_required': return exitCodes.upgradeRequired;
    case 'address_in_use':
    case 'data_dir_locked': return exitCodes.addressInUse;
    case 'join_failed': return exitCodes.joinFailed;
    default: return retryable ? exitCodes.unavailable : exitCodes.failed;
  }
}
