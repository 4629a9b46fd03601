// Arguments the control plane's commands share: one NAME, a replica count, a duration flag.

import { parseDuration } from '../control/spec/quantity.ts';
import { specLimits } from '../control/spec/limits.ts';
import { UsageError } from './args.ts';

/** The one NAME (or NODE) a subcommand takes. */
export function oneName(positionals: string[], what = 'NAME'): string {
  const [name, ...rest] = positionals;
  if (name === undefined || rest.length > 0) throw new UsageError(`expected one ${what}, got ${positionals.length === 0 ? 'nothing' : `'${positionals.join(' ')}'`}`);
  return name;
}

export function replicasArg(text: string, what = 'REPLICAS'): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > specLimits.replicasMax) throw new UsageError(`${what} must be a whole number from 0 to ${specLimits.replicasMax}, got '${text}'`);
  return n;
}

/** A duration flag (`5m`, `90s`, `1m30s`) in milliseconds; a usage error otherwise. */
export function durationFlag(value: string | undefined, flag: string, fallback: string): number {
  const parsed = parseDuration(value ?? fallback);
  if (!parsed.ok) throw new UsageError(`${flag}: ${parsed.message}`);
  return parsed.value;
}
