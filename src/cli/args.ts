// Argument parsing shared by the commands: node's parseArgs, strict, with a usage error that
// names the bad flag and points at --help.

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
} as const;

/** The exit codes a service manager must not restart on (a restart cannot cure them). */
export const noRestartExitCodes = [exitCodes.usage, exitCodes.corrupt, exitCodes.removed, exitCodes.upgradeRequired, exitCodes.storageFormat] as const;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type Options = NonNullable<ParseArgsConfig['options']>;

export function parse<O extends Options>(argv: string[], options: O, command: string): ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: true }>> {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\nRun 'shoal ${command} --help' for usage.`);
  }
}

export function intFlag(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0 || n > 65535) throw new UsageError(`--${name} must be a port-sized positive integer, got '${value}'`);
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
    case 'address_in_use': return exitCodes.addressInUse;
    case 'join_failed': return exitCodes.joinFailed;
    default: return retryable ? exitCodes.unavailable : exitCodes.failed;
  }
}
