// Liveness and readiness. /healthz answers 200 while the node serves and 503 once it cannot (a
// fatal error, removed, upgrade required: ctx.node.failure), with the catalogued code and why;
// /readyz also says whether this node knows a leader, and with ?sync waits until it has applied
// what the leader committed. Both name the software version, for rolling upgrades.

import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { NONE } from '../raft/types.ts';
import type { ShoalError } from '../errors.ts';
import type { ApiPluginOptions } from './context.ts';

function notServing(reply: FastifyReply, why: ShoalError, extra: Record<string, unknown>): FastifyReply {
  return reply.status(503).header('retry-after', '1').send({ ok: false, ...extra, code: why.code, reason: why.message });
}

export const healthRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx }) => {
  app.get('/healthz', { config: { role: 'public' } }, async (_req, reply) => {
    const st = ctx.node.status();
    const base = { id: st.id, version: ctx.softwareVersion, role: st.role, term: st.term, leader: st.leader || null };
    const failure = ctx.node.failure;
    if (failure !== undefined) return notServing(reply, failure, base);
    return { ok: true, ...base };
  });

  app.get('/readyz', { config: { role: 'public' } }, async (req, reply) => {
    const sync = Object.prototype.hasOwnProperty.call(req.query ?? {}, 'sync');
    const failure = ctx.node.failure;
    if (failure !== undefined) return notServing(reply, failure, { ready: false, version: ctx.softwareVersion });
    if (ctx.node.leaderId === NONE) {
      return reply.status(503).header('retry-after', '1').send({ ok: false, ready: false, code: 'no_leader', reason: 'no leader', version: ctx.softwareVersion });
    }
    if (sync) await ctx.node.readBarrier();
    return { ok: true, ready: true, applied: ctx.node.appliedIndex, version: ctx.softwareVersion };
  });
};
