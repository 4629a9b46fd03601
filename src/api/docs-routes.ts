// /v1/docs: documents by collection and id. Writes go through the leader (write-path.ts); reads
// are linearizable by default (ReadIndex barrier, then the local store) or local with
// ?consistency=stale.

import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { z } from 'zod';
import { collectionSchema, idSchema, type Expect } from '../../fsm/index.ts';
import type { Doc } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './app.ts';
import { validate } from './validate.ts';
import { propose, throwIfFailed } from './write-path.ts';

export const consistencySchema = z.enum(['linearizable', 'stale']).default('linearizable');
const docParams = z.object({ collection: collectionSchema, id: idSchema }).strict();
const collectionParams = z.object({ collection: collectionSchema }).strict();
const readQuery = z.object({ consistency: consistencySchema }).strict();
const noQuery = z.object({}).strict();
const listQuery = z.object({
  prefix: z.string().max(256).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  after: z.string().max(256).optional(),
  consistency: consistencySchema,
}).strict();
const docBody = z.record(z.string(), z.unknown(), { error: 'the body must be a JSON object (the document)' });
const revHeader = z.string().regex(/^(W\/)?"?\d+"?$/, 'must be a revision number, e.g. If-Match: 42').transform((s) => Number(s.replace(/\D/g, '')));
const headersSchema = z.object({
  'if-match': revHeader.optional(),
  'if-none-match': z.literal('*', { error: "only 'If-None-Match: *' (must not exist) is supported" }).optional(),
  'idempotency-key': z.string().min(1).max(256).optional(),
}).passthrough();

export function docAnswer(reply: FastifyReply, d: Doc): Doc {
  void reply.header('etag', `"${d.rev}"`);
  return { collection: d.collection, id: d.id, rev: d.rev, createRev: d.createRev, doc: d.doc };
}

function expectFrom(h: { 'if-match'?: number | undefined; 'if-none-match'?: '*' | undefined }): Expect | undefined {
  if (h['if-match'] !== undefined && h['if-none-match'] !== undefined) {
    throw new ShoalError('bad_request', 'If-Match and If-None-Match cannot be combined', { problems: [{ path: 'headers', message: 'choose one precondition' }] });
  }
  if (h['if-match'] !== undefined) return { rev: h['if-match'] };
  if (h['if-none-match'] !== undefined) return { absent: true };
  return undefined;
}

export async function readBarrier(ctx: ApiContext, consistency: 'linearizable' | 'stale'): Promise<void> {
  if (consistency === 'linearizable') await ctx.node.readBarrier();
}

export const docsRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.put('/v1/docs/:collection/:id', async (req, reply) => {
    const v = validate({ params: [docParams, req.params], query: [noQuery, req.query], body: [docBody, req.body], headers: [headersSchema, req.headers] });
    const expect = expectFrom(v.headers);
    const result = await propose(ctx, req, {
      op: 'put', collection: v.params.collection, id: v.params.id, doc: v.body as never, ...(expect ? { expect } : {}),
    });
    throwIfFailed(result);
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    if (result.kind !== 'put') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return docAnswer(reply, result.doc);
  });

  app.delete('/v1/docs/:collection/:id', async (req, reply) => {
    const v = validate({ params: [docParams, req.params], query: [noQuery, req.query], headers: [headersSchema, req.headers] });
    if (v.headers['if-none-match'] !== undefined) throw new ShoalError('bad_request', 'If-None-Match does not apply to DELETE', { problems: [{ path: 'headers.if-none-match', message: 'not allowed here' }] });
    const expect = expectFrom(v.headers);
    const result = await propose(ctx, req, { op: 'delete', collection: v.params.collection, id: v.params.id, ...(expect ? { expect } : {}) });
    throwIfFailed(result);
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    if (result.kind !== 'delete') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return { collection: result.collection, id: result.id, rev: result.rev };
  });

  app.get('/v1/docs/:collection/:id', async (req, reply) => {
    const v = validate({ params: [docParams, req.params], query: [readQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const d = ctx.store.get(v.params.collection, v.params.id);
    if (d === undefined) throw new ShoalError('not_found', `no document ${v.params.collection}/${v.params.id}`, { collection: v.params.collection, id: v.params.id });
    return docAnswer(reply, d);
  });

  app.get('/v1/docs/:collection', async (req) => {
    const v = validate({ params: [collectionParams, req.params], query: [listQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const { prefix, limit, after } = v.query;
    return ctx.store.list(v.params.collection, { limit, ...(prefix !== undefined ? { prefix } : {}), ...(after !== undefined ? { after } : {}) });
  });
};
