// GET /v1/vips (docs/network.md, "Virtual IP"): each virtual IP, who holds it and since when, and
// how much of the holder's VIP lease is left as this node sees it: the lease the holder's last renewal
// claimed, less the time since this node's store applied it (an upper bound: the holder sent it
// a little earlier); null when this node has not seen a renewal of the holder's epoch since it
// started watching. Any reader.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { RenewalLog, vipLeaseRenewals } from '../control/renewal-log.ts';
import { nodesCollection } from '../resources/collections.ts';
import { allDocs } from '../resources/state.ts';
import { releases, vipRecordSchema, vipReleaseSchema, vipReleasesCollection, vipsCollection } from '../resources/vips.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { readBarrier } from './docs-routes.ts';
import { validate } from './validate.ts';

export const vipViewSchema = z.object({
  address: z.string(),
  interface: z.string().nullable(),
  subnet: z.string().nullable(),
  holder: z.object({ id: z.string(), name: z.string().nullable(), epoch: z.number().int() }).nullable(),
  /** Log time (ms) the holder was recorded. */
  since: z.number().int(),
  previous: z.string().nullable(),
  /** The holder committed that it let go (a planned stop, a drain); the leader gives it to another node. */
  released: z.boolean(),
  /** No longer in the leader's config: its holder lets go, then it is removed. */
  retired: z.boolean(),
  leaseLeftMs: z.number().int().nullable(),
  rev: z.number().int(),
});

export type VipView = z.infer<typeof vipViewSchema>;

export const vipListAnswer = z.object({ items: z.array(vipViewSchema), rev: z.number().int() });

export const vipRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  const renewals = new RenewalLog(ctx.store, () => performance.now(), vipLeaseRenewals);
  app.addHook('onClose', async () => renewals.close());

  app.get('/v1/vips', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const items: VipView[] = [];
    for (const doc of allDocs(ctx.store, vipsCollection)) {
      const r = vipRecordSchema.safeParse(doc.doc);
      if (!r.success) continue;
      const rec = r.data;
      const rel = vipReleaseSchema.safeParse(ctx.store.get(vipReleasesCollection, doc.id)?.doc);
      const h = rec.holder;
      const name = h === null ? null : (ctx.store.get(nodesCollection, h.nodeId)?.doc as { name?: unknown } | undefined)?.name;
      const seen = h === null ? undefined : renewals.last(h.nodeId, h.epoch);
      items.push({
        address: doc.id, interface: rec.spec.interface ?? null, subnet: rec.spec.subnet ?? null,
        holder: h === null ? null : { id: h.nodeId, name: typeof name === 'string' ? name : null, epoch: h.epoch },
        since: rec.since, previous: rec.previous, released: releases(rel.success ? rel.data : undefined, rec, doc.rev), retired: rec.retired,
        leaseLeftMs: seen === undefined ? null : Math.max(0, Math.round(seen.leaseMs - (performance.now() - seen.atMs))), rev: doc.rev,
      });
    }
    return { items, rev: ctx.store.revision };
  });
};
