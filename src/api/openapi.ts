// GET /docs: the OpenAPI 3.1 description of the client API, built from the same zod schemas the
// routes validate with, so the two cannot drift apart.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { errorCatalog } from '../errors.ts';
import type { ApiContext } from './app.ts';
import { txnBodySchema } from './txn-routes.ts';

const errorSchema = {
  type: 'object',
  required: ['code', 'message', 'requestId', 'retryable'],
  properties: {
    code: { type: 'string', enum: Object.keys(errorCatalog) },
    message: { type: 'string' },
    requestId: { type: 'string' },
    retryable: { type: 'boolean' },
    details: { type: 'object' },
  },
};

const docSchema = {
  type: 'object',
  properties: { collection: { type: 'string' }, id: { type: 'string' }, rev: { type: 'integer' }, createRev: { type: 'integer' }, doc: { type: 'object' } },
};

const p = (name: string, where: 'path' | 'query' | 'header', schema: object, description = '', required = where === 'path') =>
  ({ name, in: where, required, schema, description });
const consistency = p('consistency', 'query', { type: 'string', enum: ['linearizable', 'stale'], default: 'linearizable' });
const errors = { default: { description: 'An error from the catalog (docs/errors.md).', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } };
const json = (schema: object, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
const docPath = [p('collection', 'path', { type: 'string' }), p('id', 'path', { type: 'string' })];

export function openApiDocument(version: string): object {
  return {
    openapi: '3.1.0',
    info: { title: 'shoal client API', version, description: 'See docs/api.md for consistency, idempotency and watch semantics.' },
    components: { schemas: { Error: errorSchema, Doc: docSchema, Txn: z.toJSONSchema(txnBodySchema, { io: 'input' }) } },
    paths: {
      '/v1/docs/{collection}/{id}': {
        put: {
          summary: 'Create or replace a document', parameters: [...docPath, p('If-Match', 'header', { type: 'string' }, 'expected revision'),
            p('If-None-Match', 'header', { type: 'string', enum: ['*'] }, 'must not exist'), p('Idempotency-Key', 'header', { type: 'string' })],
          requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
          responses: { 200: json({ $ref: '#/components/schemas/Doc' }), ...errors },
        },
        get: { summary: 'Read a document', parameters: [...docPath, consistency], responses: { 200: json({ $ref: '#/components/schemas/Doc' }), ...errors } },
        delete: { summary: 'Delete a document', parameters: [...docPath, p('If-Match', 'header', { type: 'string' }), p('Idempotency-Key', 'header', { type: 'string' })], responses: { 200: json({ type: 'object' }), ...errors } },
      },
      '/v1/docs/{collection}': {
        get: {
          summary: 'List a collection', parameters: [p('collection', 'path', { type: 'string' }), p('prefix', 'query', { type: 'string' }),
            p('limit', 'query', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }), p('after', 'query', { type: 'string' }), consistency],
          responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: { $ref: '#/components/schemas/Doc' } }, rev: { type: 'integer' }, next: { type: ['string', 'null'] } } }), ...errors },
        },
      },
      '/v1/txn': { post: { summary: 'Compare, then apply puts and deletes atomically', requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Txn' } } } }, responses: { 200: json({ type: 'object' }), ...errors } } },
      '/v1/watch': { get: { summary: 'Server-sent events of changes after a revision', parameters: [p('collection', 'query', { type: 'string' }), p('prefix', 'query', { type: 'string' }), p('after', 'query', { type: 'integer' }), p('Last-Event-ID', 'header', { type: 'string' })], responses: { 200: { description: 'text/event-stream' }, ...errors } } },
      '/v1/events': { get: { summary: 'Server-sent events of the cluster\'s own events (docs/monitoring.md)', parameters: [p('after', 'query', { type: 'integer' }), p('type', 'query', { type: 'string' }, 'event types, comma-separated; a type matches the types under it'), p('local', 'query', { type: 'string' }, 'this node\'s own events'), p('Last-Event-ID', 'header', { type: 'string' })], responses: { 200: { description: 'text/event-stream' }, ...errors } } },
      '/v1/cluster': { get: { summary: 'Cluster status with per-member lag and health', responses: { 200: json({ type: 'object' }), ...errors } } },
      '/v1/cluster/members': { post: { summary: 'Add a learner', requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['id', 'name', 'peerAddress', 'apiAddress'] } } } }, responses: { 201: json({ type: 'object' }), ...errors } } },
      '/v1/cluster/members/{id}/promote': { post: { summary: 'Promote a learner to voter', parameters: [p('id', 'path', { type: 'string' })], responses: { 200: json({ type: 'object' }), ...errors } } },
      '/v1/cluster/members/{id}': { delete: { summary: 'Remove a member', parameters: [p('id', 'path', { type: 'string' })], responses: { 200: json({ type: 'object' }), ...errors } } },
      '/v1/cluster/leader': { post: { summary: 'Transfer leadership', requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { to: { type: 'string' } } } } } }, responses: { 200: json({ type: 'object' }), ...errors } } },
      '/v1/cluster/snapshot': { get: { summary: 'Download a consistent snapshot', responses: { 200: { description: 'application/octet-stream' }, ...errors } } },
      '/healthz': { get: { summary: 'Liveness', responses: { 200: json({ type: 'object' }) } } },
      '/readyz': { get: { summary: 'Readiness; ?sync waits until applied what the leader committed', parameters: [p('sync', 'query', { type: 'string' })], responses: { 200: json({ type: 'object' }), 503: json({ type: 'object' }) } } },
      '/metrics': { get: { summary: 'Prometheus metrics', responses: { 200: { description: 'text/plain' } } } },
    },
  };
}

export const openApiRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  const doc = openApiDocument(ctx.softwareVersion);
  app.get('/docs', async () => doc);
  app.get('/docs/openapi.json', async () => doc);
};
