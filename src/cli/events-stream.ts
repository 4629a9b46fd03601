// Reading GET /v1/events: the retained events, then (following) each new one. A follower
// survives dropped connections and dead nodes: it resumes after the last cursor it delivered and,
// for the cluster's events, moves to another member's API when its node stops answering (a
// node's own events live only on it, so those are asked of the same node again).

import { z } from 'zod';
import { ApiError, apiErrorFrom, CliFailure, request, send, UnreachableError } from './client.ts';
import { SseParser } from '../api/sse-parser.ts';
import { Backoff } from '../base/backoff.ts';

export const eventSchema = z.looseObject({
  cursor: z.number().int().min(0),
  scope: z.enum(['cluster', 'local']),
  type: z.string(),
  subject: z.string(),
  time: z.string(),
  node: z.string(),
  nodeName: z.string(),
  term: z.number().int(),
  details: z.record(z.string(), z.unknown()),
});
export type EventView = z.infer<typeof eventSchema>;

const membersSchema = z.looseObject({ members: z.array(z.looseObject({ apiAddress: z.string() })) });

export interface EventStreamOptions {
  addr: string;
  types: string[];
  local: boolean;
  after?: number;
  /** Keep following after the retained events; otherwise stop at the server's sync marker. */
  follow: boolean;
  onEvent: (ev: EventView) => void;
  onNotice: (message: string) => void;
  signal: AbortSignal;
  /** No byte (the server sends a keepalive every 15 s) for this long: the connection is dead. */
  idleMsMax?: number;
  /** Without any connection for this long, give up. */
  downMsMax?: number;
}

/** Could not reconnect in time; `after` is where to resume. */
export class EventsLostError extends Error {
  constructor(readonly after: number | undefined, readonly tried: string[], downMs: number) {
    super(`lost the event stream${after !== undefined ? ` after cursor ${after}` : ''}: no node answered for ${Math.round(downMs / 1000)} s (tried ${tried.join(', ')})`);
    this.name = 'EventsLostError';
  }
}

const backoffMsMin = 200;
const backoffMsMax = 5_000;

/** Delivers events until the retained ones are done (not following) or `signal` aborts. */
export async function readEvents(opts: EventStreamOptions): Promise<void> {
  const addrs = [opts.addr];
  let current = 0;
  let cursor = opts.after;
  let downSince: number | undefined;
  const backoff = new Backoff({ minMs: backoffMsMin, maxMs: backoffMsMax }, Math.random);
  while (!opts.signal.aborted) {
    const addr = addrs[current] ?? opts.addr;
    let connected = false;
    let reason = 'the node closed the stream';
    try {
      const synced = await streamOnce(opts, addr, cursor, {
        connected: () => { connected = true; downSince = undefined; backoff.reset(); if (!opts.local) void learnMembers(addr, addrs); },
        delivered: (c) => { cursor = c; },
      });
      if (synced && !opts.follow) return;
    } catch (err) {
      if (opts.signal.aborted) return;
      // Refused (a bad filter, overloaded...), a failure no retry cures (another CA, no credential), or not following: the caller reports it.
      if (!opts.follow || err instanceof CliFailure || (err instanceof ApiError && err.status !== 503 && err.status !== 504)) throw err;
      reason = err instanceof UnreachableError ? err.reason : (err as Error).message;
    }
    if (opts.signal.aborted) return;
    const now = Date.now();
    downSince ??= now;
    if (!connected && !opts.local) current = (current + 1) % addrs.length;
    if (now - downSince > (opts.downMsMax ?? 60_000)) throw new EventsLostError(cursor, addrs, now - downSince);
    const backoffMs = backoff.next();
    opts.onNotice(`${addr}: ${reason}; reconnecting to ${addrs[current] ?? opts.addr}${cursor !== undefined ? ` after cursor ${cursor}` : ''} in ${(backoffMs / 1000).toFixed(1)} s`);
    await sleep(backoffMs * (0.5 + Math.random() / 2), opts.signal);
  }
}

/** One connection. Resolves true once past the sync marker when not following, false when the server ended the stream. */
async function streamOnce(opts: EventStreamOptions, addr: string, after: number | undefined, on: { connected: () => void; delivered: (cursor: number) => void }): Promise<boolean> {
  const ctrl = new AbortController();
  const onAbort = (): void => ctrl.abort();
  opts.signal.addEventListener('abort', onAbort, { once: true });
  let idle: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => ctrl.abort(new Error(`${addr} sent nothing for ${Math.round((opts.idleMsMax ?? 45_000) / 1000)} s`)), opts.idleMsMax ?? 45_000);
  };
  try {
    armIdle();
    const res = await send(addr, '/v1/events', {
      headers: { accept: 'text/event-stream' }, signal: ctrl.signal,
      query: { after, type: opts.types.length > 0 ? opts.types.join(',') : undefined, local: opts.local ? 'true' : undefined },
    });
    if (!res.ok) throw await apiErrorFrom(res, addr);
    on.connected();
    const reader = res.body?.getReader();
    if (reader === undefined) return false;
    const parser = new SseParser();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return false;
      armIdle();
      for (const msg of parser.push(decoder.decode(value, { stream: true }))) {
        if (msg.event === 'sync') {
          if (!opts.follow) return true;
          continue;
        }
        const parsed = eventSchema.safeParse(safeJson(msg.data));
        if (!parsed.success) {
          opts.onNotice(`${addr} sent something that is not an event; skipped: ${msg.data.slice(0, 200)}`);
          continue;
        }
        opts.onEvent(parsed.data);
        on.delivered(parsed.data.cursor);
      }
    }
  } catch (err) {
    if (opts.signal.aborted) return false;
    throw ctrl.signal.aborted && ctrl.signal.reason instanceof Error ? ctrl.signal.reason : err;
  } finally {
    clearTimeout(idle);
    ctrl.abort();
    opts.signal.removeEventListener('abort', onAbort);
  }
}

/** Other members' APIs, to fail over to. Best effort. */
async function learnMembers(addr: string, addrs: string[]): Promise<void> {
  try {
    const { body } = await request(addr, 'GET', '/v1/cluster', membersSchema, { timeoutMs: 3000 });
    for (const m of body.members) if (!addrs.includes(m.apiAddress)) addrs.push(m.apiAddress);
  } catch {
    // keep the addresses already known
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
