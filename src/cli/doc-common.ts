// Pieces the doc subcommands share: the answer shape of a document, the common flags, and
// small flag checks.

import { z } from 'zod';
import { exitCodes, UsageError } from './args.ts';

export const docAnswerSchema = z.object({
  collection: z.string(), id: z.string(), rev: z.number().int(), createRev: z.number().int(), doc: z.record(z.string(), z.unknown()),
}).loose();

export const commonFlags = {
  addr: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
} as const;

export function revFlag(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new UsageError(`${flag} must be a revision number (e.g. 42), got '${value}'`);
  return n;
}

export function help(text: string): number {
  console.log(text);
  return exitCodes.ok;
}
