// The composition root of the client API: one fastify instance, one plugin per resource, and the
// single error handler that turns every failure into {code, message, requestId, retryable}.

import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import type { DocumentStore } from '../../fsm/index.ts';
import { errorCatalog, isShoalError, ShoalError, type ErrorCode } from '../errors.ts';
import type { RaftNode } from '../node/raft-node.ts';
import type { Registry } from '../node/metrics.ts';
import { clusterRoutes } from './cluster-routes.ts';
import { docsRoutes } from './docs-routes.ts';
import { healthRoutes } from './health-routes.ts';
import { metricsRoutes } from './metrics-routes.ts';
import { openApiRoutes } from './openapi.ts';
import { txnRoutes } from './txn-routes.ts';
import { watchRoutes } from './watch-routes.ts';
import { eventsRoutes } from './events-routes.ts';
import type { EventLog } from '../node/event-log.ts';

export interface ApiContext {
  node: RaftNode;
  store: DocumentStore;
  clusterId: string;
  softwareVersion: string;
  bodyBytesMax: number;
  proposalTimeoutMs: number;
  metrics: Registry;
  /** Produces a consistent snapshot file of this node's applied state (GET /v1/cluster/snapshot). */
  exportSnapshot: () => Promise<Uint8Array>;
  /** Closers for long-lived responses (watch streams), run when the server closes. */
  streams: Set<() => void>;
  /** The cluster's events (GET /v1/events); absent, the route is not served. */
  events?: EventLog;
}

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  requestId: string;
  retryable: boolean;
  details?: Record<string, unknown>;
}

export function errorBody(err: ShoalError, requestId: string): ErrorBody {
  return {
    code: err.code, message: err.message, requestId, retryable: err.retryable,
    ...(err.details !== undefined ? { details: err.details } : {}),
  };
}

/** Maps anything thrown in a handler, including fastify's own parse errors, to a catalog error. */
export function toShoalError(err: FastifyError | Error): ShoalError {
  if (isShoalError(err)) return err;
  const fe = err as FastifyError;
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ShoalError('payload_too_large', `${fe.message}; the limit is set by limits.bodyBytesMax`);
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new ShoalError('unsupported_media_type', 'send the body as application/json');
  if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError) {
    return new ShoalError('bad_request', `the body is not valid JSON: ${fe.message}`, { problems: [{ path: 'body', message: fe.message }] });
  }
  if (fe.statusCode !== undefined && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ShoalError('bad_request', fe.message, { problems: [{ path: 'request', message: fe.message }] });
  }
  return new ShoalError('internal', 'an unexpected error occurred; see the node log');
}

export function buildApi(ctx: ApiContext): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: ctx.bodyBytesMax, genReqId: () => crypto.randomUUID(), forceCloseConnections: true });
  // Bodies are JSON only; anything else is refused with unsupported_media_type.
  app.removeContentTypeParser('text/plain');
  app.setErrorHandler((err: FastifyError | Error, req, reply) => {
    const e = toShoalError(err);
    if (e.code === 'internal') ctx.node.log.error(`request ${req.id} ${req.method} ${req.url}: ${err.stack ?? err.message}`);
    if (e.retryable && e.status === 503) void reply.header('retry-after', '1');
    void reply.status(errorCatalog[e.code].status).send(errorBody(e, req.id));
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send(errorBody(new ShoalError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`), req.id));
  });
  app.addHook('preClose', async () => {
    for (const close of ctx.streams) close();
  });
  for (const plugin of [healthRoutes, clusterRoutes, docsRoutes, txnRoutes, watchRoutes, eventsRoutes, metricsRoutes, openApiRoutes]) {
    void app.register(plugin, { ctx });
  }
  return app;
}
