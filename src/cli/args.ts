// Argument parsing shared by the commands: node's parseArgs, strict, with a usage error that
// names the bad flag and points at --help.

import { parseArgs, type ParseArgsConfig } from 'node:util';

/** Exit codes; scripts may rely on them. */
export const exitCodes = {
  ok: 0,
  failed: 1,
  usage: 2,
  unavailable: 3,
  corrupt: 4,
} as const;

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
