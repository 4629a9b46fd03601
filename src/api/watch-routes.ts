// GET /v1/watch: server-sent events of changes after a revision. The backlog comes from the
// store's retained events and the live tail from a subscription taken in the same synchronous
// step, so no event can fall between them (nothing applies in between) and none repeats.
//
// Each event is an SSE message `event: put|delete`, `data: <WatchEvent JSON>`. The `id:` field
// (the revision) is set on the last event of each revision, so a client resuming with
// Last-Event-ID (or ?after=) never loses the rest of a multi-document change.

import type { FastifyPluginAsync } from 'fastify';
import type { WatchEvent, WatchFilter } from '../../fsm/types.ts';
import type { ApiContext, ApiPluginOptions } from './context.ts';
import { redactEvent } from './redact.ts';
import { openEventStream } from './sse-stream.ts';
import { watchHeaders, watchQuery } from './request-schemas.ts';
import { badRequest, validate } from './validate.ts';
import { isAdminCollection } from './auth.ts';

/** A consumer this far behind is cut off; it resumes from its last id. */
const bufferedBytesMax = 8 * 1024 * 1024;

export function matches(ev: WatchEvent, f: WatchFilter): boolean {
  if (f.collection !== undefined && ev.collection !== f.collection) return false;
  return f.prefix === undefined || ev.id.startsWith(f.prefix);
}

export function formatEvents(events: readonly WatchEvent[]): string {
  let out = '';
  for (const [i, ev] of events.entries()) {
    const next = events[i + 1];
    const lastOfRev = next === undefined || next.rev !== ev.rev;
    out += `${lastOfRev ? `id: ${ev.rev}\n` : ''}event: ${ev.type}\ndata: ${JSON.stringify(redactEvent(ev))}\n\n`;
  }
  return out;
}

/**
 * A cursor past this node's revision is refused rather than waited on (it would wait silently
 * for a revision that may never come). A follower may trail what a client saw on the leader, so
 * the node first catches up with the leader's commit index (a read barrier), and refuses only a
 * cursor that is still ahead.
 */
export async function refuseFutureCursor(ctx: ApiContext, after: number, where: string, hint = 'watch from a revision a list or an event gave you'): Promise<void> {
  if (after <= ctx.store.revision) return;
  await ctx.node.readBarrier();
  const currentRev = ctx.store.revision;
  if (after <= currentRev) return;
  throw badRequest([{ path: where, message: `revision ${after} is ahead of the store (at ${currentRev}); ${hint}` }], { currentRev });
}

export const watchRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx, bounds }) => {
  app.get('/v1/watch', { config: { role: 'reader' } }, async (req, reply) => {
    const v = validate({ query: [watchQuery, req.query], headers: [watchHeaders, req.headers] });
    const filter: WatchFilter = {
      ...(v.query.collection !== undefined ? { collection: v.query.collection } : {}),
      ...(v.query.prefix !== undefined ? { prefix: v.query.prefix } : {}),
    };
    const given = v.query.after ?? v.headers['last-event-id'];
    if (given !== undefined) await refuseFutureCursor(ctx, given, v.query.after !== undefined ? 'query.after' : 'headers.last-event-id');
    const after = given ?? ctx.store.revision;
    // Throws cursor_expired (410) before any byte of the stream is written.
    // A watch of every collection by a non-admin leaves out the admin-only collections (auth.ts).
    const shown = req.caller.role === 'admin' ? () => true : (ev: WatchEvent) => !isAdminCollection(ev.collection);
    const backlog = ctx.store.eventsSince(after, filter).filter(shown);
    // Throws overloaded (503) or too_many_requests (429); released when the stream closes.
    const release = bounds.watches.acquire(req.ip);
    let pending: WatchEvent[] = [];
    let flushScheduled = false;
    const raw = reply.raw;
    const flush = (): void => {
      flushScheduled = false;
      const batch = pending;
      pending = [];
      if (batch.length === 0 || raw.destroyed) return;
      raw.write(formatEvents(batch));
      if (raw.writableLength > bufferedBytesMax) raw.destroy();
    };
    // A snapshot install replaces the state without events: end the stream so the client
    // resumes from its last id and learns whether the gap is still covered.
    const unsubscribeRestore = ctx.store.subscribeRestore(() => raw.end());
    const unsubscribe = ctx.store.subscribe((ev) => {
      if (!matches(ev, filter) || !shown(ev)) return;
      pending.push(ev);
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flush);
      }
    });
    reply.hijack();
    openEventStream(ctx, raw, { 'x-shoal-watch-from': String(after) }, `: watching after rev ${after}\n\n${formatEvents(backlog)}`, () => {
      release();
      unsubscribe();
      unsubscribeRestore();
    });
  });
};
