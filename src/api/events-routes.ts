// GET /v1/events: the cluster's own events (src/node/events/event-log.ts) as server-sent events, the
// retained ones first, then each new one as it is recorded. As /v1/watch, the backlog and the
// live tail are taken in one synchronous step, so no event falls between them or repeats.
//
//   ?after=CURSOR   only events after this cursor (also Last-Event-ID); default: every retained one;
//                   a cluster cursor ahead of the store is refused (400), as /v1/watch does
//   ?type=T         only these types; T matches itself and the types under it ("member" matches
//                   "member.added"); repeat it or separate with commas
//   ?local          this node's own events (its ring) instead of the cluster's (the store)
//
// Each event is `id: CURSOR`, `event: TYPE`, `data: {cursor, scope, type, subject, time, node,
// nodeName, term, details}`. After the backlog comes one `event: sync` (`data: {cursor}`): what
// follows is live (`shoal events` without --watch stops there).

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { matchesTypes, type ClusterEvent, type EventScope } from '../node/events/event-log.ts';
import type { ApiPluginOptions } from './context.ts';
import { openEventStream } from './sse-stream.ts';
import { validate } from './validate.ts';
import { refuseFutureCursor } from './watch-routes.ts';

/** Types one request may name. */
const typesMax = 16;
/** A consumer this far behind is cut off; it resumes from its last id. */
const bufferedBytesMax = 1024 * 1024;

const typeName = '[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*';
/** One ?type value: event types separated by commas ("member,leader.elected"). */
const typeList = z.string().max(1024).regex(new RegExp(`^${typeName}(,${typeName})*$`), 'a comma-separated list of event types (dotted lower-case words, e.g. member or member.added)');
export const eventsQuery = z.strictObject({
  after: z.coerce.number().int().min(0).optional(),
  type: z.union([typeList, z.array(typeList).max(typesMax)]).optional()
    .transform((t) => (t === undefined ? [] : (Array.isArray(t) ? t : [t]).flatMap((s) => s.split(','))))
    .pipe(z.array(z.string()).max(typesMax, `at most ${typesMax} types`)),
  local: z.enum(['', 'true', 'false', '1', '0']).optional().transform((v) => v !== undefined && v !== 'false' && v !== '0'),
});
export const eventsHeaders = z.looseObject({ 'last-event-id': z.coerce.number().int().min(0).optional() });

export function formatEvent(ev: ClusterEvent): string {
  return `id: ${ev.cursor}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`;
}

export const eventsRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx, bounds }) => {
  const events = ctx.events;
  if (events === undefined) return;
  app.get('/v1/events', { config: { role: 'reader' } }, async (req, reply) => {
    const v = validate({ query: [eventsQuery, req.query], headers: [eventsHeaders, req.headers] });
    const scope: EventScope = v.query.local ? 'local' : 'cluster';
    const types = v.query.type;
    const given = v.query.after ?? v.headers['last-event-id'];
    // A cluster event's cursor is the store revision that recorded it: as /v1/watch, a cursor
    // ahead of the store is refused (after catching up with the leader), not waited on silently.
    // A local cursor ahead of the ring is another process's: it reads the whole ring.
    if (given !== undefined && scope === 'cluster') {
      await refuseFutureCursor(ctx, given, v.query.after !== undefined ? 'query.after' : 'headers.last-event-id', 'resume from a cursor an event gave you');
    }
    const after = given ?? 0;
    const backlog = scope === 'local' ? events.localSince(after, types) : events.clusterSince(after, types);
    // An event stream takes a watch stream's slot (watchStreamsMax, per client too): it is one.
    // Throws overloaded (503) or too_many_requests (429); released when the stream closes.
    const release = bounds.watches.acquire(req.ip);
    const raw = reply.raw;
    let pending = '';
    let flushScheduled = false;
    const flush = (): void => {
      flushScheduled = false;
      const text = pending;
      pending = '';
      if (text === '' || raw.destroyed) return;
      raw.write(text);
      if (raw.writableLength > bufferedBytesMax) raw.destroy();
    };
    const unsubscribe = events.subscribe(scope, (ev) => {
      if (!matchesTypes(ev.type, types)) return;
      pending += formatEvent(ev);
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flush);
      }
    });
    // A snapshot install replaces the store without events: end, so the client resumes by cursor.
    const unsubscribeRestore = scope === 'cluster' ? ctx.store.subscribeRestore(() => raw.end()) : () => {};
    const last = backlog[backlog.length - 1]?.cursor ?? after;
    reply.hijack();
    openEventStream(
      ctx, raw, { 'x-shoal-events-scope': scope, 'x-shoal-events-oldest': String(events.oldest(scope)) },
      `: ${scope} events after ${after}\n\n${backlog.map(formatEvent).join('')}event: sync\ndata: ${JSON.stringify({ cursor: last })}\n\n`,
      () => {
        release();
        unsubscribe();
        unsubscribeRestore();
      },
    );
  });
};
