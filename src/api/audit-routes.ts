// GET /v1/audit: the audit records (fsm/audit.ts), oldest first, admin only. A record is written
// in apply for each client mutation from feature level 4; its id is the zero-padded log index,
// so `after` (a log index) pages through them in log order.
//
//   ?after=INDEX      only records of entries after this log index (default: from the oldest kept)
//   ?limit=N          at most N records (1..1000, default 100)
//   ?principal=P      only P's records
//   ?consistency=     linearizable (default) or stale, as the document reads
//
// Answer: {items: [{id, principal, op, resources, resourceCount, result, term, index, timeMs, ...}],
// next: INDEX | null, rev}; pass `next` as `after` for the following page.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { auditCollection, auditId } from '../../fsm/audit.ts';
import { listLimitDefault, listLimitMax, principalLengthMax } from '../../fsm/limits.ts';
import type { Doc, JsonObject } from '../../fsm/types.ts';
import type { ApiContext } from './context.ts';
import { readBarrier } from './docs-routes.ts';
import { consistencySchema } from './request-schemas.ts';
import { validate } from './validate.ts';

export const auditQuery = z.object({
  after: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  limit: z.coerce.number().int().min(1).max(listLimitMax).default(listLimitDefault),
  principal: z.string().min(1).max(principalLengthMax).optional(),
  consistency: consistencySchema,
}).strict();

export interface AuditPage {
  items: Array<JsonObject & { id: string }>;
  /** The log index to pass as `after` for the next page; null when this page reached the newest record. */
  next: number | null;
  rev: number;
}

/** One page of records after `after`, optionally of one principal; walks the store's pages (the collection is bounded). */
export function auditPage(store: ApiContext['store'], q: { after?: number; limit: number; principal?: string }): AuditPage {
  const items: AuditPage['items'] = [];
  let cursor: string | undefined = q.after === undefined ? undefined : auditId(q.after);
  let rev = store.revision;
  for (;;) {
    const page = store.list(auditCollection, { limit: listLimitMax, ...(cursor !== undefined ? { after: cursor } : {}) });
    rev = page.rev;
    for (const d of page.items) {
      if (q.principal !== undefined && d.doc.principal !== q.principal) continue;
      items.push(view(d));
      if (items.length === q.limit) return { items, next: d.createRev, rev };
    }
    if (page.next === null) return { items, next: null, rev };
    cursor = page.next;
  }
}

function view(d: Doc): JsonObject & { id: string } {
  return { id: d.id, ...d.doc };
}

export const auditRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/audit', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [auditQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    return auditPage(ctx.store, v.query);
  });
};
