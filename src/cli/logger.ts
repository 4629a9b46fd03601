// Log lines for the node process: one line each on stderr, "time level message", or with
// `json` one object per line: {time, level, msg}.

import type { Logger } from '../node/raft-node.ts';

const levels = { debug: 10, info: 20, warn: 30, error: 40 } as const;
export type Level = keyof typeof levels;

export function consoleLogger(min: Level, prefix = '', json = false): Logger {
  const at = (level: Level) => (msg: string): void => {
    if (levels[level] < levels[min]) return;
    const time = new Date().toISOString();
    process.stderr.write(json ? `${JSON.stringify({ time, level, msg: `${prefix}${msg}` })}\n` : `${time} ${level.padEnd(5)} ${prefix}${msg}\n`);
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
