// How a command's failure reaches the user: one line (or a few) on stderr, or, under --json,
// one JSON object {error: {code, message, ...}, exitCode} on stderr, whatever the failure was:
// a usage error, an API error, a catalog error thrown locally, or a bug.

import { isShoalError } from '../errors.ts';
import { exitCodeOfError, exitCodes, usageOf, UsageError } from './args.ts';
import { isClientFailure, reportFailure } from './client.ts';

/** Prints `err` as the failure of `shoal <command>` and returns the exit code. */
export function reportError(command: string, err: unknown, json: boolean, help?: string): number {
  if (err instanceof UsageError) return reportUsage(command, err, json, help);
  if (isClientFailure(err)) return reportFailure(command, err, json);
  if (isShoalError(err)) {
    const code = exitCodeOfError(err.code, err.retryable);
    print(command, json, code, { code: err.code, message: err.message, ...(err.details !== undefined ? { details: err.details } : {}) });
    return code;
  }
  const e = err as Error & { name?: string; file?: string; recovery?: string };
  if (e?.name === 'StorageCorruptionError') {
    const text = `${e.message}${e.file ? `\n  file: ${e.file}` : ''}${e.recovery ? `\n  what to do: ${e.recovery}` : ''}`;
    print(command, json, exitCodes.corrupt, { code: 'storage_corrupt', message: e.message, file: e.file, recovery: e.recovery }, text);
    return exitCodes.corrupt;
  }
  if (e?.name === 'StorageFormatError') {
    print(command, json, exitCodes.storageFormat, { code: 'storage_format', message: e.message });
    return exitCodes.storageFormat;
  }
  print(command, json, exitCodes.failed, { code: 'internal', message: e?.message ?? String(err) }, `unexpected error: ${e?.stack ?? String(err)}`);
  return exitCodes.failed;
}

/** "shoal doc get: unknown option --foo", the usage line, and where the options are listed. */
function reportUsage(command: string, err: UsageError, json: boolean, help: string | undefined): number {
  const usage = err.usage ?? (help !== undefined ? usageOf(help) : undefined);
  const who = command === '' ? 'shoal' : `shoal ${command}`;
  if (json) {
    const hint = `run '${who} --help' for the options`;
    console.error(JSON.stringify({ error: { code: 'usage', message: err.message, ...(usage !== undefined ? { usage } : {}), hint }, exitCode: exitCodes.usage }));
  } else {
    console.error([`${who}: ${err.message}`, ...(usage !== undefined ? [usage] : []), `Run '${who} --help' for the options.`].join('\n'));
  }
  return exitCodes.usage;
}

function print(command: string, json: boolean, exitCode: number, error: { code: string; message: string } & Record<string, unknown>, text = error.message): void {
  if (json) console.error(JSON.stringify({ error, exitCode }));
  else console.error(`${command === '' ? 'shoal' : `shoal ${command}`}: ${text}`);
}
