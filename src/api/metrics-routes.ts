// GET /metrics in the Prometheus text format.

import type { FastifyPluginAsync } from 'fastify';
import type { ApiContext } from './app.ts';

export const metricsRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/metrics', async (_req, reply) => {
    void reply.header('content-type', 'text/plain; version=0.0.4');
    return ctx.metrics.render();
  });
};
