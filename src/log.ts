// The one logger of the process. Every part logs through `Logger` (the node driver, the transport,
// storage, the API, the CLI's serve command); the process creates one with `createLogger`, backed
// by pino: one JSON object per line on stderr (journald, Loki and `jq` read it as it is), or
// human lines (pino-pretty) on a terminal. pino-pretty and what it needs (130 KiB of source) load
// only for human lines: a node under a service manager writes JSON and never loads them (issue 45).
//
// Every line carries the node's name and id, and its current Raft term and role (a pino mixin
// reads them when the line is written, so a line says what the node believed at that moment).
// A line written while an API request is handled carries the request's id (`reqId`), when debug
// lines are on: the writes' correlation lines (docs/monitoring.md, "Following one write") need it.

import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type DestinationStream, type Logger as Pino } from 'pino';

export const logLevels = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof logLevels)[number];
export const logFormats = ['json', 'text'] as const;
export type LogFormat = (typeof logFormats)[number];

/** Structured fields of one line (JSON keys next to `msg`). */
export type LogFields = Record<string, string | number | boolean | null>;

/**
 * What every part of the process logs through. The message is what an operator reads (and acts
 * on: say what happened and what to do); `fields` are for machines (a proposal id, a peer).
 * The raft core and storage take a narrower port (src/raft/types.ts Logger: debug, info, warn),
 * which this one satisfies.
 */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Whether lines of `level` are written. Lines that cost something to build (one per write) are written only when this says so. */
  isLevelEnabled?(level: LogLevel): boolean;
}

/** A logger that writes nothing (tests, and parts started without one). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {}, isLevelEnabled: () => false };

/** What the mixin reads on every line once the node is known. */
export interface NodeLogContext {
  readonly name: string;
  readonly id: string;
  /** The node's current term and role, read when a line is written. */
  state(): { term: number; role: string };
}

/** The process's logger: a Logger, plus naming the node once its identity is loaded. */
export interface ProcessLogger extends Logger {
  /** From now on every line carries the node's name, id, term and role. */
  bindNode(node: NodeLogContext): void;
  /** The pino logger underneath, for libraries that take one. */
  readonly pino: Pino;
}

export interface LoggerOptions {
  level: LogLevel;
  format: LogFormat;
  /** Where lines go (in either format); default: file descriptor 2 (stderr), written synchronously. */
  destination?: DestinationStream;
  /** Colours in text format; default: when stderr is a terminal. */
  colorize?: boolean;
}

/**
 * The id of the API request being handled, for the lines written while it is (debug only: the
 * API enters it only when debug lines are on, so the async context costs nothing otherwise).
 */
export const requestContext = new AsyncLocalStorage<{ reqId: string }>();

/** Runs `fn` (the rest of a request's handling) with `reqId` on every line it logs. */
export function withRequestId(reqId: string, fn: () => void): void {
  requestContext.run({ reqId }, fn);
}

export async function createLogger(opts: LoggerOptions): Promise<ProcessLogger> {
  let node: NodeLogContext | undefined;
  const instance = pino({
    level: opts.level,
    timestamp: pino.stdTimeFunctions.isoTime,
    // Level names, not numbers: operators grep for "level":"warn".
    formatters: { level: (label) => ({ level: label }) },
    mixin: () => {
      const req = requestContext.getStore();
      const state = node?.state();
      return {
        ...(state !== undefined ? { term: state.term, role: state.role } : {}),
        ...(req !== undefined ? { reqId: req.reqId } : {}),
      };
    },
  }, opts.format === 'text' ? await textDestination(opts.colorize ?? process.stderr.isTTY, opts.destination ?? 2) : opts.destination ?? pino.destination({ dest: 2, sync: true }));
  const at = (level: LogLevel) => (msg: string, fields?: LogFields): void => {
    if (fields === undefined) instance[level](msg);
    else instance[level](fields, msg);
  };
  return {
    debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'),
    isLevelEnabled: (level) => instance.isLevelEnabled(level),
    bindNode: (ctx) => {
      node = ctx;
      instance.setBindings({ node: ctx.name, nodeId: ctx.id });
    },
    pino: instance,
  };
}

/**
 * Human lines, as pino-pretty writes them: "[12:34:56.789] INFO: n1 leader t5: message", then
 * any other fields as JSON. Synchronous, so no line is lost when the process exits.
 */
async function textDestination(colorize: boolean, destination: DestinationStream | number): Promise<DestinationStream> {
  const { default: prettyFactory } = await import('pino-pretty');
  return prettyFactory({
    destination, sync: true, colorize, singleLine: true, translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,node,nodeId,term,role',
    messageFormat: '{if node}{node} {end}{if role}{role} t{term}: {end}{msg}',
  });
}
