// What the console's Documents view browses with: the collections that hold documents, and the
// retained changes of one document. Both read the node's store after the same barrier as the
// other reads (?consistency=stale skips it). A secret's value never leaves (redact.ts); the
// admin-only collections need admin here as everywhere (auth.ts, by the collection parameter).

import type { FastifyPluginAsync } from 'fastify';
import type { ApiContext } from './context.ts';
import { readBarrier } from './docs-routes.ts';
import { redactDoc } from './redact.ts';
import { docParams, readQuery } from './request-schemas.ts';
import { validate } from './validate.ts';

export interface CollectionsAnswer {
  items: Array<{ name: string; documents: number }>;
  rev: number;
}

export interface HistoryAnswer {
  collection: string;
  id: string;
  /** Changes older than this revision are no longer retained (the store's event tail). */
  oldestRev: number;
  rev: number;
  items: Array<{ rev: number; type: 'put' | 'delete'; doc?: unknown }>;
}

export const browseRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/collections', { config: { role: 'reader' } }, async (req): Promise<CollectionsAnswer> => {
    const v = validate({ query: [readQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    return { items: ctx.store.collections(), rev: ctx.store.revision };
  });

  app.get('/v1/docs/:collection/:id/history', { config: { role: 'reader' } }, async (req): Promise<HistoryAnswer> => {
    const v = validate({ params: [docParams, req.params], query: [readQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const { collection, id } = v.params;
    const items = ctx.store.history(collection, id).map((e) => ({ rev: e.rev, type: e.type, ...(e.doc !== undefined ? { doc: redactDoc(e.doc).doc } : {}) }));
    return { collection, id, oldestRev: ctx.store.oldestRev, rev: ctx.store.revision, items };
  });
};
