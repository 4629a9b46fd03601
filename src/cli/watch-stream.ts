// Following GET /v1/watch (read with api/sse-parser.ts): a follower that survives dropped
// connections and dead nodes. It resumes after the last complete revision it saw (the server
// sets `id:` only on the last event of a revision), skips the events of a half-seen revision it
// already delivered, and moves to another member's API when its node stops answering.

import { z } from 'zod';
import { SseParser, type SseMessage } from '../api/sse-parser.ts';
import { ApiError, apiErrorFrom, request, send, UnreachableError } from './client.ts';
import { Backoff } from '../base/backoff.ts';

const docSchema = z.object({
  collection: z.string(), id: z.string(), rev: z.number().int(), createRev: z.number().int(), doc: z.record(z.string(), z.unknown()),
}).loose();
export const watchEventSchema = z.object({
  rev: z.number().int().min(0),
  type: z.enum(['put', 'delete']),
  collection: z.string(),
  id: z.string(),
  doc: docSchema.optional(),
  prevRev: z.number().int().optional(),
}).loose();
export type WatchEventView = z.infer<typeof watchEventSchema>;

const membersSchema = z.object({ members: z.array(z.object({ apiAddress: z.string() }).loose()) }).loose();

export interface FollowOptions {
  addr: string;
  collection?: string;
  prefix?: string;
  /** Deliver changes after this revision; omitted: from the node's current revision on. */
  after?: number;
  onEvent: (ev: WatchEventView) => void;
  /** Progress for the operator (reconnects), printed on stderr. */
  onNotice: (message: string) => void;
  signal: AbortSignal;
  /** No byte (the server sends a keepalive every 15 s) for this long: the connection is dead. */
  idleMsMax?: number;
  /** Without any connection for this long, give up. */
  downMsMax?: number;
}

/** Could not reconnect in time; `after` is where to resume. */
export class WatchLostError extends Error {
  constructor(readonly after: number | undefined, readonly tried: string[], downMs: number) {
    super(`lost the watch${after !== undefined ? ` after rev ${after}` : ''}: no node answered for ${Math.round(downMs / 1000)} s (tried ${tried.join(', ')})`);
    this.name = 'WatchLostError';
  }
}

const backoffMsMin = 200;
const backoffMsMax = 5_000;

/** Streams events until `signal` aborts. Throws ApiError (e.g. cursor_expired) or WatchLostError. */
export async function followWatch(opts: FollowOptions): Promise<void> {
  const f = new Follower(opts);
  await f.run();
}

class Follower {
  private readonly addrs: string[];
  private current = 0;
  /** The last complete revision delivered: the resume point. */
  private cursor: number | undefined;
  /** A revision whose last event (the one with `id:`) has not arrived yet: events delivered of it. */
  private pending: { rev: number; delivered: number } | undefined;
  /** Events of the newest revision seen on the current connection (a replay counts them again). */
  private seen: { rev: number; count: number } | undefined;
  private downSince: number | undefined;

  constructor(private readonly opts: FollowOptions) {
    this.addrs = [opts.addr];
    this.cursor = opts.after;
  }

  async run(): Promise<void> {
    const backoff = new Backoff({ minMs: backoffMsMin, maxMs: backoffMsMax }, Math.random);
    const downMsMax = this.opts.downMsMax ?? 60_000;
    while (!this.opts.signal.aborted) {
      const addr = this.addrs[this.current] ?? this.opts.addr;
      let connected = false;
      let reason: string;
      try {
        await this.streamOnce(addr, () => {
          connected = true;
          this.downSince = undefined;
          backoff.reset();
        });
        reason = 'the node closed the stream';
      } catch (err) {
        if (this.opts.signal.aborted) return;
        if (err instanceof ApiError && err.status !== 503 && err.status !== 504) throw err;
        const expected = err instanceof ApiError || err instanceof UnreachableError || err instanceof IdleError;
        // A stream cut off after it started fails with whatever the body reader throws.
        if (!expected && !connected) throw err;
        reason = err instanceof UnreachableError ? err.reason : expected ? (err as Error).message : `the connection dropped (${(err as Error).message})`;
      }
      if (this.opts.signal.aborted) return;
      const now = Date.now();
      this.downSince ??= now;
      if (!connected) this.current = (this.current + 1) % this.addrs.length;
      if (now - this.downSince > downMsMax) throw new WatchLostError(this.cursor, this.addrs, now - this.downSince);
      const next = this.addrs[this.current] ?? this.opts.addr;
      const backoffMs = backoff.next();
      this.opts.onNotice(`${addr}: ${reason}; reconnecting to ${next}${this.cursor !== undefined ? ` after rev ${this.cursor}` : ''} in ${(backoffMs / 1000).toFixed(1)} s`);
      await abortableSleep(backoffMs * (0.5 + Math.random() / 2), this.opts.signal);
      this.seen = undefined;
    }
  }

  /** One connection. Resolves when the server ends the stream or `signal` aborts. */
  private async streamOnce(addr: string, onConnected: () => void): Promise<void> {
    const ctrl = new AbortController();
    const onAbort = (): void => ctrl.abort();
    this.opts.signal.addEventListener('abort', onAbort, { once: true });
    const idleMsMax = this.opts.idleMsMax ?? 45_000;
    let idle: NodeJS.Timeout | undefined;
    let idled = false;
    const armIdle = (): void => {
      clearTimeout(idle);
      idle = setTimeout(() => { idled = true; ctrl.abort(); }, idleMsMax);
    };
    try {
      armIdle();
      const res = await send(addr, '/v1/watch', {
        headers: { accept: 'text/event-stream' }, signal: ctrl.signal,
        query: { collection: this.opts.collection, prefix: this.opts.prefix, after: this.cursor },
      });
      if (!res.ok) throw await apiErrorFrom(res, addr);
      if (this.cursor === undefined) {
        const from = Number(res.headers.get('x-shoal-watch-from'));
        if (Number.isInteger(from)) this.cursor = from;
      }
      onConnected();
      void this.learnMembers(addr);
      const reader = res.body?.getReader();
      if (reader === undefined) return;
      const parser = new SseParser();
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        armIdle();
        for (const msg of parser.push(decoder.decode(value, { stream: true }))) this.deliver(msg, addr);
      }
    } catch (err) {
      if (idled) throw new IdleError(addr, idleMsMax);
      if (this.opts.signal.aborted) return;
      throw err;
    } finally {
      clearTimeout(idle);
      this.opts.signal.removeEventListener('abort', onAbort);
    }
  }

  private deliver(msg: SseMessage, addr: string): void {
    if (msg.event !== 'put' && msg.event !== 'delete') return;
    let raw: unknown;
    try {
      raw = JSON.parse(msg.data);
    } catch {
      raw = undefined;
    }
    const parsed = watchEventSchema.safeParse(raw);
    if (!parsed.success) {
      this.opts.onNotice(`${addr} sent an event that is not a watch event; skipped: ${msg.data.slice(0, 200)}`);
      return;
    }
    const ev = parsed.data;
    // After a reconnect the server replays a half-delivered revision from its first event.
    if (this.seen?.rev === ev.rev) this.seen.count++;
    else this.seen = { rev: ev.rev, count: 1 };
    const already = this.pending?.rev === ev.rev ? this.pending.delivered : 0;
    if (this.seen.count > already) {
      this.opts.onEvent(ev);
      this.pending = { rev: ev.rev, delivered: this.seen.count };
    }
    if (msg.id !== undefined) {
      const id = Number(msg.id);
      if (Number.isInteger(id)) this.cursor = id;
      this.pending = undefined;
      this.seen = undefined;
    }
  }

  /** Other members' APIs, to fail over to when this node dies. Best effort. */
  private async learnMembers(addr: string): Promise<void> {
    try {
      const { body } = await request(addr, 'GET', '/v1/cluster', membersSchema, { timeoutMs: 3000 });
      for (const m of body.members) if (!this.addrs.includes(m.apiAddress)) this.addrs.push(m.apiAddress);
    } catch {
      // keep the addresses already known
    }
  }
}

class IdleError extends Error {
  constructor(addr: string, ms: number) {
    super(`${addr} sent nothing for ${Math.round(ms / 1000)} s`);
    this.name = 'IdleError';
  }
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
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

/** An AbortSignal that fires on Ctrl-C or SIGTERM, for commands that run until stopped. */
export function untilInterrupted(): { signal: AbortSignal; dispose: () => void } {
  const ctrl = new AbortController();
  const stop = (): void => ctrl.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return { signal: ctrl.signal, dispose: () => { process.off('SIGINT', stop); process.off('SIGTERM', stop); } };
}
