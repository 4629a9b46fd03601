// Pictures over time without a Prometheus server, and what an operator looks for first:
//
//   GET /v1/nodes/{ref}/series?window=SECONDS   a node's own samples (series-sampler.ts): this
//       node's from its ring; another node's proxied to it (its API address in its NodeRecord),
//       as the logs routes do, marked with the forwarded-by header so it never forwards again
//   GET /v1/services/{name}/series?window=SECONDS   a service's running tasks over time, with
//       its updates and failures, as this node sampled them from its applied store
//   GET /v1/summary   the health summary (health-summary.ts): the console's header on every view
//
// All read this node's applied state without a read barrier: they answer while the cluster has
// no leader, which is when they are wanted most. The sampler starts with the API and stops when
// it closes.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { clusterView } from './cluster-routes.ts';
import type { ApiContext } from './context.ts';
import { nodeParams, serviceParams } from './control-schemas.ts';
import { findNode, findService, readLocal, serviceStatus, type ServiceStatus } from './control-views.ts';
import { healthSummary } from './health-summary.ts';
import { noQuery } from './request-schemas.ts';
import type { SeriesWindow } from './series-ring.ts';
import { nodeSeriesNames, SeriesSampler, seriesConfigOf, type NodeSeriesName, type ServiceSeriesName } from './series-sampler.ts';
import { validate } from './validate.ts';
import { forwardedHeader } from './write-path.ts';

/** Six hours: what the ring holds at the default interval. */
export const seriesWindowMaxSeconds = 6 * 3600;
/** How long another node has to answer a proxied series request. */
export const seriesProxyTimeoutMs = 5000;
/** A node's series for 6 hours as JSON is about 300 KB; anything far larger is not an answer. */
const seriesAnswerBytesMax = 4 << 20;

export const seriesQuery = z.object({
  /** Seconds of history, counted back from now (default: 3600, at most 21600). */
  window: z.coerce.number().int().min(10).max(seriesWindowMaxSeconds).optional(),
}).strict();

export interface NodeSeriesAnswer extends SeriesWindow<NodeSeriesName> {
  node: { id: string; name: string };
  /** Milliseconds the sampler keeps (rows × interval). */
  keptMs: number;
}

export interface ServiceSeriesAnswer extends SeriesWindow<ServiceSeriesName> {
  service: string;
  /** The node that sampled it. */
  sampledBy: string;
  keptMs: number;
}

const column = z.array(z.number().nullable());
const nodeSeriesAnswerSchema = z.object({
  node: z.object({ id: z.string(), name: z.string() }),
  intervalMs: z.number(), keptMs: z.number(), times: z.array(z.number()),
  series: z.object(Object.fromEntries(nodeSeriesNames.map((n) => [n, column])) as Record<NodeSeriesName, typeof column>),
}).loose();

async function remoteSeries(ctx: ApiContext, address: string, who: string, nodeId: string, windowS: number): Promise<NodeSeriesAnswer> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), seriesProxyTimeoutMs);
  try {
    const res = await ctx.peer.fetch(address, `/v1/nodes/${encodeURIComponent(nodeId)}/series?window=${windowS}`, {
      headers: { [forwardedHeader]: ctx.node.id, accept: 'application/json' }, signal: ac.signal,
    });
    const text = await res.text();
    if (text.length > seriesAnswerBytesMax) throw new Error(`an answer of ${text.length} bytes`);
    if (!res.ok) throw new Error(`${res.status}: ${text.slice(0, 300)}`);
    const parsed = nodeSeriesAnswerSchema.safeParse(JSON.parse(text));
    if (!parsed.success) throw new Error(`an answer that is not a node's series: ${parsed.error.message.slice(0, 300)}`);
    return parsed.data as NodeSeriesAnswer;
  } catch (err) {
    const why = ac.signal.aborted ? `no answer within ${seriesProxyTimeoutMs} ms` : err instanceof Error ? err.message : String(err);
    throw new ShoalError('node_unreachable', `${who} did not give its series: ${why}; each node keeps its own, so they cannot be read while it is unreachable`, { node: nodeId, address });
  } finally {
    clearTimeout(timer);
  }
}

export const seriesRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  const sampler = new SeriesSampler({ metrics: ctx.metrics, nodeId: ctx.node.id, state: () => readLocal(ctx), now: Date.now }, seriesConfigOf());
  const keptMs = sampler.config.rows * sampler.config.intervalMs;
  sampler.start();
  app.addHook('onClose', async () => sampler.stop());
  const since = (windowS: number | undefined): number => Date.now() - (windowS ?? 3600) * 1000;

  app.get('/v1/nodes/:ref/series', { config: { role: 'reader' } }, async (req): Promise<NodeSeriesAnswer> => {
    const v = validate({ params: [nodeParams, req.params], query: [seriesQuery, req.query] });
    const state = readLocal(ctx);
    // A forwarded request is for this node, whatever its store says (it never forwards again).
    const self = req.headers[forwardedHeader] !== undefined || v.params.ref === ctx.node.id;
    const node = self ? state.nodes.get(ctx.node.id)?.value : findNode(state, v.params.ref).value;
    if (self || node?.id === ctx.node.id) {
      return { node: { id: ctx.node.id, name: node?.name ?? ctx.node.id }, keptMs, ...sampler.node.window(since(v.query.window)) };
    }
    if (node === undefined) throw new ShoalError('not_found', `no node '${v.params.ref}'`, { node: v.params.ref });
    return remoteSeries(ctx, node.addresses.api, `node ${node.name} (${node.id}) at ${node.addresses.api}`, node.id, v.query.window ?? 3600);
  });

  app.get('/v1/services/:name/series', { config: { role: 'reader' } }, async (req): Promise<ServiceSeriesAnswer> => {
    const v = validate({ params: [serviceParams, req.params], query: [seriesQuery, req.query] });
    const svc = findService(readLocal(ctx), v.params.name).value;
    const w = sampler.serviceWindow(svc.name, since(v.query.window));
    if (w === undefined) {
      // Not sampled yet (just created), or past servicesTrackedMax: an empty picture, said so.
      return { service: svc.name, sampledBy: ctx.node.id, keptMs, intervalMs: sampler.config.intervalMs, times: [], series: { running: [], desired: [], updating: [], failures: [] } };
    }
    return { service: svc.name, sampledBy: ctx.node.id, keptMs, ...w };
  });

  app.get('/v1/summary', { config: { role: 'reader' } }, async (req) => {
    validate({ query: [noQuery, req.query] });
    const state = readLocal(ctx);
    const statuses = new Map<string, ServiceStatus>([...state.services.values()].map((s) => [s.value.name, serviceStatus(state, s.value)]));
    return { ...healthSummary({ cluster: clusterView(ctx), state, statuses, series: sampler.node.window(Date.now() - 3600_000), now: ctx.node.logTimeNow() }), rev: state.revision };
  });
};
