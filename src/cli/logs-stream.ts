// `shoal task logs` and `shoal service logs`: one GET of the logs route with format=json, read as
// NDJSON and printed as it arrives. A task's stdout lines go to stdout and its stderr lines to
// stderr (as `docker logs` does); a service's lines carry their task's prefix. With --json each
// object is printed as the node sent it, one per line. A follow runs until the containers stop
// or Ctrl-C (exit 0).

import { z } from 'zod';
import { errorCatalog, type ErrorCode } from '../errors.ts';
import { exitCodes } from './args.ts';
import { apiErrorFrom, CliFailure, requestTimeoutMsDefault, send } from './client.ts';
import { countArg, durationFlag } from './control-args.ts';
import { commonFlags } from './doc-common.ts';
import { untilInterrupted } from './watch-stream.ts';

export const logsFlags = {
  ...commonFlags,
  follow: { type: 'boolean', short: 'f', default: false },
  tail: { type: 'string' },
  since: { type: 'string' },
} as const;

export const logsFlagsHelp = `  -f, --follow       keep printing new lines until the container stops (or Ctrl-C)
  --tail N           start with the last N lines (0: only new ones); default all
  --since DURATION   only lines written in the last DURATION (30s, 10m, 2h)`;

export const logsPaths = {
  task: (id: string): string => `/v1/tasks/${encodeURIComponent(id)}/logs`,
  service: (name: string): string => `/v1/services/${encodeURIComponent(name)}/logs`,
};

/** The most lines --tail may ask for (the API's bound, logs-routes.ts). */
const tailLinesMax = 100_000;
/** One NDJSON line from the node; a log line is cut at 64 KiB, so this is generous. */
const lineBytesMax = 1 << 20;

const lineSchema = z.object({
  at: z.number(), stream: z.enum(['stdout', 'stderr']), text: z.string(),
  task: z.string().optional(), slot: z.union([z.number(), z.string()]).optional(), node: z.string().optional(),
}).loose();
const errorLineSchema = z.object({
  error: z.object({ code: z.string(), message: z.string() }).loose(),
  task: z.string().optional(), slot: z.union([z.number(), z.string()]).optional(), node: z.string().optional(),
}).loose();

export interface LogsRequest {
  addr: string;
  path: string;
  follow: boolean;
  tailLines: number | undefined;
  sinceMs: number | undefined;
  json: boolean;
  /** The command, for messages (`task logs`). */
  command: string;
  /** A service's name: its lines are prefixed `<service>.<slot>.<task>@<node> | `. */
  service?: string;
}

export function tailFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  return countArg(value, '--tail', tailLinesMax);
}

/** --since as a wall-clock ms: now minus the duration. */
export function sinceFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  return Math.max(0, Date.now() - durationFlag(value, '--since', '0s'));
}

/** Prints the lines as they come; resolves with the exit code once the answer ends or Ctrl-C. */
export async function printLogs(r: LogsRequest): Promise<number> {
  const stop = untilInterrupted();
  const ctrl = new AbortController();
  const onStop = (): void => ctrl.abort();
  stop.signal.addEventListener('abort', onStop, { once: true });
  // No answer (headers) in time is a failure; once it streams, a follow may stay quiet for hours.
  const timer = setTimeout(() => ctrl.abort(new DOMException('no answer in time', 'TimeoutError')), requestTimeoutMsDefault);
  try {
    let res: Response;
    try {
      res = await send(r.addr, r.path, {
        method: 'GET', headers: { accept: 'application/x-ndjson' }, signal: ctrl.signal,
        query: { format: 'json', follow: r.follow ? 'true' : undefined, tail: r.tailLines, since: r.sinceMs },
      });
    } catch (err) {
      if (stop.signal.aborted) return exitCodes.ok;
      throw err;
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok) throw await apiErrorFrom(res, r.addr);
    if (res.body === null) return exitCodes.ok;
    return await printBody(res.body, r, () => stop.signal.aborted);
  } finally {
    stop.signal.removeEventListener('abort', onStop);
    stop.dispose();
    ctrl.abort();
  }
}

async function printBody(body: ReadableStream<Uint8Array>, r: LogsRequest, stopped: () => boolean): Promise<number> {
  const decoder = new TextDecoder();
  let buf = '';
  let code: number = exitCodes.ok;
  try {
    for await (const chunk of body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() !== '') code = Math.max(code, printLine(line, r));
      }
      if (buf.length > lineBytesMax) throw new CliFailure(`${r.addr} sent a line longer than ${lineBytesMax} bytes; is it a shoal node?`, exitCodes.failed, 'bad_answer');
    }
  } catch (err) {
    if (stopped()) return code;
    if (err instanceof CliFailure) throw err;
    throw new CliFailure(`the log stream from ${r.addr} broke: ${err instanceof Error ? err.message : String(err)}; run the command again`, exitCodes.unavailable, 'unreachable');
  }
  return code;
}

/** Prints one object; returns the exit code it calls for (0 for a line, 1 or 3 for an error). */
function printLine(text: string, r: LogsRequest): number {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CliFailure(`${r.addr} sent something that is not a log line (${text.slice(0, 100)}); is it a shoal node?`, exitCodes.failed, 'bad_answer');
  }
  const line = lineSchema.safeParse(value);
  if (line.success) {
    // console writes to pipes and files synchronously on Linux: a slow reader slows the stream down.
    if (r.json) console.log(text);
    else if (line.data.stream === 'stderr') console.error(`${prefix(r, line.data)}${line.data.text}`);
    else console.log(`${prefix(r, line.data)}${line.data.text}`);
    return exitCodes.ok;
  }
  const failed = errorLineSchema.safeParse(value);
  if (!failed.success) throw new CliFailure(`${r.addr} sent an object that is neither a log line nor an error: ${text.slice(0, 100)}`, exitCodes.failed, 'bad_answer');
  const e = failed.data.error;
  if (r.json) console.log(text);
  else console.error(`shoal ${r.command}: ${prefix(r, failed.data)}${e.code}: ${e.message}`);
  const status = Object.hasOwn(errorCatalog, e.code) ? errorCatalog[e.code as ErrorCode].status : 500;
  return status === 503 || status === 504 ? exitCodes.unavailable : exitCodes.failed;
}

function prefix(r: LogsRequest, l: { task?: string | undefined; slot?: number | string | undefined; node?: string | undefined }): string {
  if (r.service === undefined || l.task === undefined) return '';
  return `${r.service}.${String(l.slot ?? '?')}.${l.task.slice(0, 12)}@${l.node ?? '?'} | `;
}
