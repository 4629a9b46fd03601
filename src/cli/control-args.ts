// Arguments the control plane's commands share: one NAME, a replica count, a duration flag.

import { parseDuration } from '../resources/spec/quantity.ts';
import { specLimits } from '../resources/spec/limits.ts';
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

const dayMs = 86_400_000;

/**
 * A duration flag (`5m`, `90s`, `1m30s`, and on the command line whole days first: `30d`,
 * `7d12h`) in milliseconds; a usage error otherwise. Specs take no days: their durations are
 * timeouts and periods, never weeks.
 */
export function durationFlag(value: string | undefined, flag: string, fallback: string): number {
  const text = (value ?? fallback).trim();
  const days = /^(\d+)d(.*)$/.exec(text);
  const parsed = days === null ? parseDuration(text) : days[2] === '' ? { ok: true as const, value: 0 } : parseDuration(days[2] ?? '');
  if (!parsed.ok) throw new UsageError(`${flag}: ${parsed.message.replace('(units ms, s, m, h)', '(units d, h, m, s, ms)')}`);
  return (days === null ? 0 : Number(days[1]) * dayMs) + parsed.value;
}
