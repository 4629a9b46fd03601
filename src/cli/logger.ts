// The logger of `shoal serve`, from its flags and config: src/log.ts does the work (pino: JSON
// lines, or human lines for a person).

import { createLogger, logFormats, logLevels, type LogFormat, type LogLevel, type ProcessLogger } from '../log.ts';
import { UsageError } from './args.ts';

export type Level = LogLevel;

export interface LogFlags {
  level: string | undefined;
  format: string | undefined;
  /** --json: JSON lines, unless --log-format says otherwise. */
  json: boolean;
}

/**
 * The format when no flag names one: human lines when a person reads stderr (a terminal, or the
 * `shoal dev` supervisor, which prefixes each line with the node's name), JSON otherwise (a
 * service manager, a log shipper, a pipe).
 */
export function defaultLogFormat(where: { stderrIsTty: boolean; supervised: boolean }): LogFormat {
  return where.stderrIsTty || where.supervised ? 'text' : 'json';
}

/** Level and format from the flags, the config's logLevel and where stderr goes; a bad flag is a UsageError. */
export function logSettings(flags: LogFlags, configLevel: LogLevel, where: { stderrIsTty: boolean; supervised: boolean }): { level: LogLevel; format: LogFormat } {
  const level = flags.level ?? configLevel;
  if (!(logLevels as readonly string[]).includes(level)) throw new UsageError(`--log-level must be one of ${logLevels.join(', ')}, got '${level}'`);
  const format = flags.format ?? (flags.json ? 'json' : defaultLogFormat(where));
  if (!(logFormats as readonly string[]).includes(format)) throw new UsageError(`--log-format must be json or text, got '${format}'`);
  return { level: level as LogLevel, format: format as LogFormat };
}

export async function serveLogger(flags: LogFlags, configLevel: LogLevel, where: { stderrIsTty: boolean; supervised: boolean }): Promise<ProcessLogger> {
  return createLogger(logSettings(flags, configLevel, where));
}
