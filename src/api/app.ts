// The composition root of the client API: one fastify instance, one plugin per resource, and the
// single error handler that turns every failure into {code, message, requestId, retryable}.

import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { errorCatalog, isShoalError, ShoalError, type ErrorCode } from '../errors.ts';
import type { RaftNode } from '../node/raft-node.ts';
import type { KvStateMachine } from '../node/kv-state-machine.ts';
import { clusterRoutes } from './cluster-routes.ts';
import { healthRoutes } from './health-routes.ts';
import { testKvRoutes } from './test-kv-routes.ts';

export interface ApiContext {
  node: RaftNode;
  kv: KvStateMachine;
  clusterId: string;
  softwareVersion: string;
  bodyBytesMax: number;
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

function toShoalError(err: FastifyError | Error): ShoalError {
  if (isShoalError(err)) return err;
  const fe = err as FastifyError;
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ShoalError('payload_too_large', fe.message);
  if (fe.statusCode !== undefined && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ShoalError('bad_request', fe.message, { fastifyCode: fe.code });
  }
  return new ShoalError('internal', 'an unexpected error occurred; see the node log');
}

export function buildApi(ctx: ApiContext): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: ctx.bodyBytesMax, genReqId: () => crypto.randomUUID() });
  app.setErrorHandler((err: FastifyError | Error, req, reply) => {
    const e = toShoalError(err);
    if (e.code === 'internal') req.log.error(err);
    if (e.code === 'no_leader' || e.code === 'stopping' || e.code === 'proposal_dropped') void reply.header('retry-after', '1');
    void reply.status(errorCatalog[e.code].status).send(errorBody(e, req.id));
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send(errorBody(new ShoalError('not_found', `no route ${req.method} ${req.url}`), req.id));
  });
  app.register(healthRoutes, { ctx });
  app.register(clusterRoutes, { ctx });
  app.register(testKvRoutes, { ctx });
  return app;
}
