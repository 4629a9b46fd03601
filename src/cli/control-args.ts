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

/** A replica count (0 to the spec's limit); the usage error names `what` and the rule it breaks. */
export function replicasArg(text: string, what = 'replicas'): number {
  return countArg(text, what, specLimits.replicasMax);
}

/** A whole number from 0 to `max`; the usage error names `what` and the rule it breaks (`replicas must be at least 0, got '-3'`). */
export function countArg(text: string, what: string, max: number): number {
  const n = Number(text.trim());
  const got = `, got '${text}'`;
  if (text.trim() === '' || Number.isNaN(n)) throw new UsageError(`${what} must be a whole number from 0 to ${max}${got}`);
  if (n < 0) throw new UsageError(`${what} must be at least 0${got}`);
  if (n > max) throw new UsageError(`${what} must be at most ${max}${got}`);
  if (!/^\d+$/.test(text.trim())) throw new UsageError(`${what} must be a whole number${got}`);
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
  if (text.startsWith('-')) throw new UsageError(`${flag} must be a duration of 0 or more (such as 90s or 5m), got '${text}'`);
  const days = /^(\d+)d(.*)$/.exec(text);
  const parsed = days === null ? parseDuration(text) : days[2] === '' ? { ok: true as const, value: 0 } : parseDuration(days[2] ?? '');
  if (!parsed.ok) throw new UsageError(`${flag}: ${parsed.message.replace('(units ms, s, m, h)', '(units d, h, m, s, ms)')}`);
  return (days === null ? 0 : Number(days[1]) * dayMs) + parsed.value;
}
