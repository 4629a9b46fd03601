// GET /v1/tasks/{id}/logs and GET /v1/services/{name}/logs: a task's container log, or a
// service's running tasks' logs merged, from whichever node runs them (log-source.ts), streamed.
//
// Answers: `text/plain` lines as the container wrote them (a service's prefixed with
// `<service>.<slot>.<task>@<node> | `), or with ?format=json NDJSON, one object per line:
// {at, stream, text} (a service's with task, slot and node too); a failure after the first line
// is a last object {error: {code, message}}. `follow=true` keeps the answer open for new lines
// until the container stops or the client goes away; `tail=N` starts with the last N lines;
// `since=<wall-clock ms>` drops older ones. Every stream a request opens takes one slot of
// `logStreamsMax` (503 overloaded past it); a follow holds its slots until it ends.
//
// Lines are written as the reader takes them: a slow client slows the runtime's stream down
// (backpressure) instead of piling lines up in this node.

import type { ServerResponse } from 'node:http';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { z } from 'zod';
import { tasksOf, type ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { LogLine, LogOptions, LogReader } from '../executor/runtime.ts';
import type { ApiContext, ApiPluginOptions } from './context.ts';
import { serviceParams, taskParams } from './control-schemas.ts';
import { readLocal, taskItem, type TaskItem } from './control-views.ts';
import { openLocalTaskLog, openTaskItemLog } from './log-source.ts';
import { validate } from './validate.ts';
import { forwardedHeader } from './write-path.ts';

/** The most lines `tail` may ask for. */
export const logTailLinesMax = 100_000;
/** Short task ids in a service's prefixes: Docker's convention. */
const shortIdLength = 12;

export const logsQuery = z.object({
  /** Keep the answer open for new lines until the container stops (or the client goes away). */
  follow: z.enum(['true', 'false']).optional(),
  /** Start with the last N lines (0: only new ones); all when absent. */
  tail: z.coerce.number().int().min(0).max(logTailLinesMax).optional(),
  /** Only lines stamped at or after this wall-clock time, in ms since the Unix epoch. */
  since: z.coerce.number().int().min(0).max(8_640_000_000_000_000).optional(),
  /** text (the default): the lines as written; json: NDJSON objects with the stream and the time. */
  format: z.enum(['text', 'json']).optional(),
}).strict();

type Format = 'text' | 'json';

/** One stream of a response: a task's reader (or why it could not open), and how its lines are labelled. */
interface Source {
  /** null for a task's own route (its lines are unlabelled). */
  label: { task: string; slot: number | string; node: string; prefix: string } | null;
  reader: LogReader | null;
  failure: ShoalError | null;
  release: () => void;
}

function logOptions(q: z.infer<typeof logsQuery>): LogOptions {
  return { follow: q.follow === 'true', tailLines: q.tail ?? null, sinceMs: q.since ?? null };
}

export const logsRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx, bounds }) => {
  app.get('/v1/tasks/:id/logs', { config: { role: 'reader' } }, async (req, reply) => {
    // Roles arrive with the security issue: any authenticated principal, `reader` included, may
    // read logs. The role check goes here, before anything is looked up or opened.
    const v = validate({ params: [taskParams, req.params], query: [logsQuery, req.query] });
    const opts = logOptions(v.query);
    // Throws overloaded (503) before anything is opened; released when the stream ends.
    const release = bounds.logs.acquire(req.ip);
    let reader: LogReader;
    try {
      if (req.headers[forwardedHeader] !== undefined) {
        reader = await openLocalTaskLog(ctx, v.params.id, opts);
      } else {
        const state = readLocal(ctx);
        reader = await openTaskItemLog(ctx, state, knownTask(state, v.params.id), opts);
      }
    } catch (err) {
      release();
      throw err;
    }
    await serveLines(ctx, reply, v.query.format ?? 'text', [{ label: null, reader, failure: null, release }]);
  });

  app.get('/v1/services/:name/logs', { config: { role: 'reader' } }, async (req, reply) => {
    // The role check (security issue) goes here too: a `reader` may read a service's logs.
    const v = validate({ params: [serviceParams, req.params], query: [logsQuery, req.query] });
    const opts = logOptions(v.query);
    const state = readLocal(ctx);
    if (!state.services.has(v.params.name)) throw new ShoalError('not_found', `no service ${v.params.name}; list them with: shoal service ls`, { service: v.params.name });
    const items = tasksOf(state, v.params.name).map((t) => taskItem(state, t)).filter((i) => i.desired === 'running' && i.nodeId !== null);
    const releases: (() => void)[] = [];
    try {
      while (releases.length < items.length) releases.push(bounds.logs.acquire(req.ip));
    } catch (err) {
      for (const r of releases) r();
      throw err;
    }
    const sources = await Promise.all(items.map((item, i) => openServiceTask(ctx, state, item, opts, releases[i] ?? (() => undefined))));
    await serveLines(ctx, reply, v.query.format ?? 'text', sources);
  });
};

function knownTask(state: ControlState, id: string): TaskItem {
  const t = state.tasks.get(id);
  if (t === undefined) throw new ShoalError('not_found', `no task ${id}; list them with: shoal task ls`, { task: id });
  return taskItem(state, t);
}

async function openServiceTask(ctx: ApiContext, state: ControlState, item: TaskItem, opts: LogOptions, release: () => void): Promise<Source> {
  const node = item.nodeName ?? item.nodeId ?? '?';
  const label = { task: item.id, slot: item.slot, node, prefix: `${item.service}.${String(item.slot)}.${item.id.slice(0, shortIdLength)}@${node}` };
  try {
    return { label, reader: await openTaskItemLog(ctx, state, item, opts), failure: null, release };
  } catch (err) {
    release();
    return { label, reader: null, failure: asShoalError(ctx, err), release };
  }
}

/** A catalogued error as is; anything else is a bug, logged here and told as `internal`. */
function asShoalError(ctx: ApiContext, err: unknown): ShoalError {
  if (err instanceof ShoalError) return err;
  ctx.node.log.error(`log stream: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  return new ShoalError('internal', 'an unexpected error occurred while reading the log; see the node log');
}

/** Writes every source's lines as they come, until all end or the client goes away. */
async function serveLines(ctx: ApiContext, reply: FastifyReply, format: Format, sources: Source[]): Promise<void> {
  const raw = reply.raw;
  const closeAll = (): void => {
    for (const s of sources) s.reader?.close();
  };
  reply.hijack();
  raw.writeHead(200, {
    'content-type': format === 'json' ? 'application/x-ndjson; charset=utf-8' : 'text/plain; charset=utf-8',
    'cache-control': 'no-cache', 'x-content-type-options': 'nosniff',
  });
  // The status goes out now: a follow of a quiet task must not look like a hung request.
  raw.flushHeaders();
  raw.once('close', closeAll);
  ctx.streams.add(closeAll);
  const write = writer(raw);
  try {
    for (const s of sources) if (s.failure !== null) await write(failureText(format, s.label, s.failure));
    await Promise.all(sources.map(async (s) => {
      if (s.reader === null) return;
      try {
        for await (const line of s.reader) await write(lineText(format, s.label, line));
      } catch (err) {
        // Mid-stream: the status is sent; the failure can only be told in the body.
        await write(failureText(format, s.label, asShoalError(ctx, err)));
      } finally {
        s.reader.close();
        s.release();
      }
    }));
  } finally {
    ctx.streams.delete(closeAll);
    raw.end();
  }
}

function lineText(format: Format, label: Source['label'], line: LogLine): string {
  if (format === 'json') {
    const where = label === null ? {} : { task: label.task, slot: label.slot, node: label.node };
    return `${JSON.stringify({ ...where, at: line.at, stream: line.stream, text: line.text })}\n`;
  }
  return label === null ? `${line.text}\n` : `${label.prefix} | ${line.text}\n`;
}

function failureText(format: Format, label: Source['label'], e: ShoalError): string {
  if (format === 'json') {
    const where = label === null ? {} : { task: label.task, slot: label.slot, node: label.node };
    return `${JSON.stringify({ ...where, error: { code: e.code, message: e.message } })}\n`;
  }
  // A task's own text stream has no room for shoal's words beside the container's; its
  // failures are told in NDJSON only. A service's prefixed lines do.
  return label === null ? '' : `${label.prefix} | shoal: cannot read this task's log: ${e.code}: ${e.message}\n`;
}

/** Writes with backpressure; resolves at once when the client is gone (the readers are closed then). */
function writer(raw: ServerResponse): (text: string) => Promise<void> {
  return async (text) => {
    if (text === '' || raw.destroyed || raw.writableEnded) return;
    if (raw.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        raw.off('drain', done);
        raw.off('close', done);
        resolve();
      };
      raw.once('drain', done);
      raw.once('close', done);
    });
  };
}
