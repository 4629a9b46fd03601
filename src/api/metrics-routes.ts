// GET /metrics in the Prometheus text format, and the API's own metrics: every request's duration
// by route pattern, method and status. The hooks apply to every route of the API (the plugin is
// not encapsulated), and, with debug lines on, give each request's log lines its id (src/log.ts).

import type { FastifyPluginAsync } from 'fastify';
import { withRequestId } from '../log.ts';
import { latencyBuckets } from '../base/metrics.ts';
import type { ApiContext } from './context.ts';

/**
 * Routes that answer with a stream lasting as long as the client wants: their duration says
 * nothing about the server (shoal_api_watch_streams counts them instead).
 */
const streamRoutes = new Set(['/v1/watch', '/v1/events']);

const metricsRoutesPlugin: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  const requests = ctx.metrics.histogram(
    'shoal_http_request_duration_seconds', 'API requests by route pattern, method and status, and how long the answer took.',
    latencyBuckets, ['route', 'method', 'status'],
  );
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url;
    if (route !== undefined && streamRoutes.has(route)) return;
    // The pattern, never the URL: a label value per document id would grow without bound.
    requests.observe(reply.elapsedTime / 1000, { route: route ?? 'unmatched', method: req.method, status: String(reply.statusCode) });
  });
  if (ctx.node.log.isLevelEnabled?.('debug') === true) {
    app.addHook('onRequest', (req, _reply, done) => withRequestId(req.id, done));
  }
  app.get('/metrics', { config: { role: 'reader' } }, async (_req, reply) => {
    void reply.header('content-type', ctx.metrics.contentType);
    return ctx.metrics.render();
  });
};

// Not encapsulated (fastify's skip-override), so the hooks see every route of the API.
Object.defineProperty(metricsRoutesPlugin, Symbol.for('skip-override'), { value: true });

export const metricsRoutes = metricsRoutesPlugin;
