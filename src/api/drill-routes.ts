// The drills' routes (docs/api.md, "Drills"; docs/operations.md, "Failover drills"):
//
//   POST /v1/drill/actions   this node carries out a fault on itself (kill, isolate, pause,
//                            disk-stall, reboot: src/node/drill/drill-actions.ts); admin only
//   POST /v1/drills          keeps a drill's report in the reserved collection shoal.drills
//   GET  /v1/drills          the kept reports, newest first
//
// The actions act on the node that takes the request, never forwarded: the drill sends each to
// its target's own API.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { CommandResult } from '../../fsm/types.ts';
import { runDrillAction, drillActionSchema } from '../node/drill/drill-actions.ts';
import { drillReportSchema, drillsCollection } from '../node/drill/drill-report.ts';
import type { ApiPluginOptions } from './context.ts';
import { readBarrier } from './docs-routes.ts';
import { noQuery, consistencySchema } from './request-schemas.ts';
import { validate } from './validate.ts';
import { propose, throwIfFailed } from './write-path.ts';
import { ShoalError } from '../errors.ts';

/** Reports one GET answers at most (newest first). */
export const drillsListMax = 1000;

export const drillsListQuery = z.strictObject({ consistency: consistencySchema, limit: z.coerce.number().int().min(1).max(drillsListMax).default(100) });

export const drillRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx }) => {
  const target = ctx.drill;
  app.post('/v1/drill/actions', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [drillActionSchema, req.body] });
    if (target === undefined) throw new ShoalError('drill_action_failed', 'this node takes no drill actions (it runs inside another process, e.g. a test)');
    const outcome = await runDrillAction(target, v.body);
    ctx.node.log.warn(`drill: ${outcome.action}: ${outcome.message}`);
    return { node: ctx.node.id, ...outcome };
  });

  app.post('/v1/drills', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [drillReportSchema, req.body] });
    const result: CommandResult = await propose(ctx, req, { op: 'put', collection: drillsCollection, id: v.body.id, doc: v.body }, (p) => p.replace(/^cmd\.doc/, 'body'));
    throwIfFailed(result);
    return { id: v.body.id, rev: result.kind === 'put' ? result.doc.rev : null };
  });

  app.get('/v1/drills', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [drillsListQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const items: unknown[] = [];
    let after: string | undefined;
    // Ids start with the drill's time, so id order is time order; the newest are the last.
    for (;;) {
      const page = ctx.store.list(drillsCollection, { limit: 1000, ...(after !== undefined ? { after } : {}) });
      for (const d of page.items) items.push(d.doc);
      if (page.next === null || items.length >= 100_000) break;
      after = page.next;
    }
    return { items: items.reverse().slice(0, v.query.limit), rev: ctx.store.revision };
  });
};
