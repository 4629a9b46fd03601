// Liveness and readiness. /healthz answers as long as the process serves; /readyz says whether
// this node knows a leader, and with ?sync waits until it has applied what the leader committed.

import type { FastifyPluginAsync } from 'fastify';
import { NONE } from '../raft/types.ts';
import type { ApiContext } from './app.ts';

export const healthRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/healthz', async () => {
    const st = ctx.node.status();
    return { ok: true, id: st.id, role: st.role, term: st.term, leader: st.leader || null };
  });

  app.get('/readyz', async (req, reply) => {
    const sync = Object.prototype.hasOwnProperty.call(req.query ?? {}, 'sync');
    if (ctx.node.leaderId === NONE) {
      return reply.status(503).header('retry-after', '1').send({ ready: false, reason: 'no leader' });
    }
    if (sync) await ctx.node.readBarrier();
    return { ready: true, applied: ctx.node.appliedIndex };
  });
};
