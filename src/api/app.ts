// The composition root of the client API: one fastify instance, one plugin per resource, the
// bounds (limits.ts) and the one error path that turns every failure, fastify's and Node's own
// included, into {code, message, requestId, retryable, details?} with a catalogued code.

import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import { ShoalError } from '../errors.ts';
import { registerApiMetrics, type ApiBounds } from './api-metrics.ts';
import { applyRoutes } from './apply-routes.ts';
import { stackRoutes } from './stack-routes.ts';
import { Refusals, Slots } from './bounds.ts';
import { browseRoutes } from './browse-routes.ts';
import { clusterRoutes } from './cluster-routes.ts';
import { consoleRoutes } from './console-routes.ts';
import { ConnectionLimit } from './connection-limit.ts';
import { docsRoutes } from './docs-routes.ts';
import { clientErrorHandler, sendError, toShoalError } from './error-reply.ts';
import { healthRoutes } from './health-routes.ts';
import { logsRoutes } from './logs-routes.ts';
import { useJsonBodyParser } from './json-body.ts';
import { apiLimitsDefault, headerBytesMax, paramLengthMax, type ApiLimits } from './limits.ts';
import { metricsRoutes } from './metrics-routes.ts';
import { nodesRoutes } from './nodes-routes.ts';
import { openApiRoutes } from './openapi-routes.ts';
import { RouteTable } from './route-table.ts';
import { secretsRoutes } from './secrets-routes.ts';
import { secretKeyRoutes } from './secret-key-routes.ts';
import { keyringRoutes } from './keyring-routes.ts';
import { servicesRoutes } from './services-routes.ts';
import { networkRoutes } from './network-routes.ts';
import { policyRoutes } from './policy-routes.ts';
import { snapshotRoutes } from './snapshot-routes.ts';
import { tasksRoutes } from './tasks-routes.ts';
import { txnRoutes } from './txn-routes.ts';
import { badRequest } from './validate.ts';
import { watchRoutes } from './watch-routes.ts';
import { eventsRoutes } from './events-routes.ts';
import { joinRoutes } from './join-routes.ts';
import { tokenRoutes } from './token-routes.ts';
import { nodeCertRoutes } from './node-cert-routes.ts';
import { AuthFailureLimiter } from './auth-rate-limit.ts';
// No Ajv or fast-json-stringify at start (issue 45).
import { noJsonSchemaCompilers } from './no-json-schema.ts';
import { useAuth } from './auth.ts';
// Registry logins (issue 40).
import { registriesRoutes } from './registries-routes.ts';
import { backupRoutes } from './backup-routes.ts';
import { credentialsRoutes } from './credentials-routes.ts';
import { auditRoutes } from './audit-routes.ts';
import { drillRoutes } from './drill-routes.ts';
import { meshRoutes } from './mesh-routes.ts';
import { volumeRoutes } from './volume-routes.ts';
import { vipRoutes } from './vip-routes.ts';
import { certRoutes } from './cert-routes.ts';
import { upgradeRoutes } from './upgrade-routes.ts';
import { caRoutes } from './ca-routes.ts';
import { jobsRoutes } from './jobs-routes.ts';
import type { ApiContext } from './context.ts';
import { seriesRoutes } from './series-routes.ts';

export type { ApiContext, ApiPluginOptions, CaRotationPort, MeshKeys } from './context.ts';

export { errorBody, toShoalError, type ErrorBody } from './error-reply.ts';
export { apiLimitsDefault, type ApiLimits } from './limits.ts';

/** Routes a node that cannot serve still answers: the probes say why, and metrics keep flowing. */
const servedWhenFailed = new Set(['/healthz', '/readyz', '/metrics']);

function makeBounds(limits: ApiLimits): ApiBounds {
  const refusals = new Refusals();
  return {
    refusals,
    connections: new ConnectionLimit(limits.connectionsMax, refusals),
    watches: new Slots('watch streams', { name: 'watchStreamsMax', max: limits.watchStreamsMax, perClient: { name: 'watchStreamsPerClientMax', max: limits.watchStreamsPerClientMax } }, refusals),
    snapshots: new Slots('snapshot downloads', { name: 'snapshotDownloadsMax', max: limits.snapshotDownloadsMax }, refusals),
    logs: new Slots('log streams', { name: 'logStreamsMax', max: limits.logStreamsMax }, refusals),
  };
}

function queryWellEncoded(url: string): boolean {
  const q = url.indexOf('?');
  if (q === -1 || !url.includes('%', q)) return true;
  try {
    decodeURIComponent(url.slice(q + 1));
    return true;
  } catch {
    return false;
  }
}

/** Checks every request before its route runs: URL length, the connection bound, the node's health. */
function admit(ctx: ApiContext, limits: ApiLimits, bounds: ApiBounds, req: FastifyRequest): ShoalError | undefined {
  const url = req.raw.url ?? '';
  if (url.length > limits.urlBytesMax) {
    return new ShoalError('uri_too_long', `the URL is ${url.length} bytes; the limit is ${limits.urlBytesMax} (urlBytesMax)`, { limit: 'urlBytesMax', max: limits.urlBytesMax });
  }
  if (!queryWellEncoded(url)) {
    // The query parser would keep such a value as literal text; refuse it as the router does a bad path.
    return badRequest([{ path: 'query', message: 'the query string is not valid percent-encoded UTF-8 (a stray %, or an encoded lone surrogate)' }]);
  }
  if (bounds.connections.isExcess(req.raw.socket)) {
    return new ShoalError('overloaded', `this node has more than ${limits.connectionsMax} open connections (connectionsMax); retry later or use another node`, { limit: 'connectionsMax', max: limits.connectionsMax });
  }
  const failure = ctx.node.failure;
  if (failure !== undefined && !servedWhenFailed.has(req.routeOptions.url ?? '')) return failure;
  return undefined;
}

export function buildApi(ctx: ApiContext): FastifyInstance {
  const limits: ApiLimits = { ...apiLimitsDefault, ...ctx.limits };
  const bounds = makeBounds(limits);
  const routes = new RouteTable();
  const https = ctx.auth.mode === 'tls'
    ? {
      https: {
        key: ctx.auth.tls.keyPem, cert: ctx.auth.tls.certPem, ca: [ctx.auth.tls.caPem], minVersion: 'TLSv1.3' as const,
        // A certificate is asked for but not required (bearer tokens need none); the auth hook
        // reads whether it verified against the cluster CA.
        requestCert: true, rejectUnauthorized: false,
      },
    }
    : {};
  const app = Fastify({
    ...https,
    // On close, idle connections are cut and the requests in flight are answered (closeApiGracefully);
    // a request that still arrives on an open connection is served, not refused with a bare 503.
    logger: false, bodyLimit: ctx.bodyBytesMax, genReqId: () => crypto.randomUUID(), forceCloseConnections: 'idle', return503OnClosing: false,
    http: { maxHeaderSize: headerBytesMax }, routerOptions: { maxParamLength: paramLengthMax },
    clientErrorHandler,
    // Bad percent-encoding and over-long path segments, found by the router before any route.
    frameworkErrors: (err, req, reply) => sendError(reply, req, toShoalError(err)),
    // Routes validate with zod: fastify's JSON-schema compilers are never built (issue 45).
    schemaController: noJsonSchemaCompilers,
  }) as unknown as FastifyInstance;
  useJsonBodyParser(app);
  bounds.connections.attach(app.server, ctx.auth.mode === 'tls' ? 'secureConnection' : 'connection');
  registerApiMetrics(ctx.metrics, bounds);
  app.setErrorHandler((err: FastifyError | Error, req, reply) => {
    const e = toShoalError(err, ctx.bodyBytesMax);
    if (e.code === 'internal') ctx.node.log.error(`request ${req.id} ${req.method} ${req.url}: ${err.stack ?? err.message}`);
    if (e.code === 'overloaded' && e.details?.limit === 'connectionsMax') void reply.header('connection', 'close');
    return sendError(reply, req, e, limits.retryAfterSeconds);
  });
  app.setNotFoundHandler((req, reply) => {
    const path = (req.raw.url ?? '/').split('?')[0] ?? '/';
    const allowed = routes.allowed(path);
    if (allowed.length === 0) return sendError(reply, req, new ShoalError('not_found', `no route ${req.method} ${path}`));
    void reply.header('allow', allowed.join(', '));
    return sendError(reply, req, new ShoalError('method_not_allowed', `${path} does not take ${req.method}; it takes ${allowed.join(', ')}`, { allow: allowed }));
  });
  app.addHook('onRoute', (route) => routes.add(route.method, route.url, route.config?.role));
  app.addHook('onRequest', async (req) => {
    const refused = admit(ctx, limits, bounds, req);
    if (refused !== undefined) throw refused;
  });
  useAuth(app, ctx.auth, ctx, new AuthFailureLimiter());
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const close of ctx.streams) close();
  });
  // While closing, every answer ends its connection: the client's next request opens a new one,
  // which a node that no longer listens refuses, so the client moves to another node.
  app.addHook('onSend', async (_req, reply) => {
    if (closing) void reply.header('connection', 'close');
  });
  for (const plugin of [
    healthRoutes, clusterRoutes, docsRoutes, txnRoutes, watchRoutes, eventsRoutes, snapshotRoutes, metricsRoutes, openApiRoutes,
    applyRoutes, servicesRoutes, nodesRoutes, tasksRoutes, logsRoutes, credentialsRoutes, auditRoutes, browseRoutes, tokenRoutes, joinRoutes, nodeCertRoutes,
    secretsRoutes, secretKeyRoutes, keyringRoutes, networkRoutes, policyRoutes, drillRoutes, meshRoutes, certRoutes, upgradeRoutes, caRoutes,
    jobsRoutes,
  ]) {
    void app.register(plugin, { ctx, limits, bounds, routes });
  }
  void app.register(seriesRoutes, { ctx });
  void app.register(stackRoutes, { ctx });
  // Registry logins (issue 40).
  void app.register(registriesRoutes, { ctx });
  // Backups (issue 43).
  void app.register(backupRoutes, { ctx });
  // Virtual IPs (issue 38).
  void app.register(vipRoutes, { ctx });
  // Replicated volumes (issue 41).
  void app.register(volumeRoutes, { ctx });
  void app.register(consoleRoutes, {});
  return app;
}

/**
 * Closes the API the graceful way: it stops listening (new connections are refused), cuts idle
 * connections, and answers the requests it holds; those still open after `drainMs` are cut.
 */
export async function closeApiGracefully(app: FastifyInstance, drainMs: number): Promise<void> {
  const closed = app.close();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => { timer = setTimeout(() => resolve('late'), drainMs); });
  const how = await Promise.race([closed.then(() => 'closed' as const), late]);
  clearTimeout(timer);
  if (how === 'late') app.server.closeAllConnections();
  await closed;
}
