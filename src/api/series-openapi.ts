// The OpenAPI entries of the series and summary routes (series-routes.ts); openapi.ts merges them
// into /docs.

import { z } from 'zod';
import { nodeParams, serviceParams } from './control-schemas.ts';
import { seriesQuery } from './series-routes.ts';
import { nodeSeriesNames, serviceSeriesNames } from './series-sampler.ts';

type Json = Record<string, unknown>;

function parameters(s: z.ZodObject, where: 'path' | 'query'): Json[] {
  const { properties = {}, required = [] } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as { properties?: Json; required?: string[] };
  return Object.entries(properties).map(([name, schema]) => ({ name, in: where, required: required.includes(name), schema }));
}

export function seriesPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const column = { type: 'array', items: { type: ['number', 'null'] } };
  const columns = (names: readonly string[]): Json => ({ type: 'object', properties: Object.fromEntries(names.map((n) => [n, column])) });
  const common = { intervalMs: { type: 'integer' }, keptMs: { type: 'integer' }, times: { type: 'array', items: { type: 'number' } } };
  const named = { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' } } };
  const list = (props: Json): Json => ({ type: 'array', items: { type: 'object', properties: props } });
  const str = { type: 'string' };
  const int = { type: 'integer' };
  return {
    '/v1/nodes/{ref}/series': {
      get: {
        summary: "A node's own key series over time (one sample per 10 s, 6 h kept): write and read rate and latency, commit lag, leader changes, CPU, memory, disk, tasks running; another node's is proxied to it",
        ...strict, parameters: [...parameters(nodeParams, 'path'), ...parameters(seriesQuery, 'query')],
        responses: { 200: json({ type: 'object', properties: { node: named, ...common, series: columns(nodeSeriesNames) } }), ...errors },
      },
    },
    '/v1/services/{name}/series': {
      get: {
        summary: "A service's running and desired tasks over time, with its updates and new failures, as this node sampled them",
        ...strict, parameters: [...parameters(serviceParams, 'path'), ...parameters(seriesQuery, 'query')],
        responses: { 200: json({ type: 'object', properties: { service: str, sampledBy: str, ...common, series: columns(serviceSeriesNames) } }), ...errors },
      },
    },
    '/v1/summary': {
      get: {
        summary: 'What to look at first: leader and quorum, failure tolerance, nodes not ready, members unreachable, services not converged, failing tasks, alerts whose condition holds',
        ...strict,
        responses: {
          200: json({
            type: 'object', properties: {
              node: str, view: { type: 'string', enum: ['leader', 'local'] }, leader: { anyOf: [named, { type: 'null' }] }, term: int,
              quorum: { type: 'object', properties: { voters: int, reachable: int, needed: int, tolerance: int, hasQuorum: { type: 'boolean' } } },
              nodesNotReady: list({ id: str, name: str, state: str, availability: str }),
              membersUnreachable: list({ id: str, name: str }),
              servicesNotConverged: list({ name: str, running: int, desired: int, pending: int, updating: { type: 'boolean' } }),
              failingTasks: list({ id: str, service: str, slot: { type: ['integer', 'string'] }, node: { type: ['string', 'null'] }, observed: str, message: { type: ['string', 'null'] } }),
              failingTasksTotal: int,
              alerts: list({ alert: str, severity: { type: 'string', enum: ['critical', 'warning'] }, summary: str, subject: { type: 'object', properties: { kind: { type: 'string', enum: ['cluster', 'node', 'service'] }, name: { type: ['string', 'null'] } } } }),
              rev: int,
            },
          }),
          ...errors,
        },
      },
    },
  };
}
