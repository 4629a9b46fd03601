// /v1/docs: documents by collection and id. Writes go through the leader (write-path.ts); reads
// are linearizable by default (ReadIndex barrier, then the local store) or local with
// ?consistency=stale.

import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { Expect } from '../../fsm/index.ts';
import type { CommandResult, Doc } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { collectionParams, deleteHeaders, docBody, docParams, listQuery, noQuery, putHeaders, readQuery } from './request-schemas.ts';
import { badRequest, stampedPath, validate, type CommandPathMap } from './validate.ts';
import { propose, throwIfFailed } from './write-path.ts';
import { reservedWrite } from './reserved.ts';
import { redactDoc } from './redact.ts';

/** A write to a reserved collection (`shoal.*`) is refused with the typed route to use (reserved.ts). */
function refuseReserved(collection: string): void {
  const problem = reservedWrite(collection, 'params.collection');
  if (problem !== undefined) throw badRequest([problem], { reserved: collection });
}

export function docAnswer(reply: FastifyReply, d: Doc): Doc {
  void reply.header('etag', `"${d.rev}"`);
  return { collection: d.collection, id: d.id, rev: d.rev, createRev: d.createRev, doc: redactDoc(d).doc };
}

function expectFrom(h: { 'if-match'?: number | undefined; 'if-none-match'?: '*' | undefined }): Expect | undefined {
  if (h['if-match'] !== undefined && h['if-none-match'] !== undefined) {
    throw badRequest([{ path: 'headers', message: 'If-Match and If-None-Match cannot be combined; choose one precondition' }]);
  }
  if (h['if-match'] !== undefined) return { rev: h['if-match'] };
  if (h['if-none-match'] !== undefined) return { absent: true };
  return undefined;
}

/** Where each part of a put or delete command came from in the request. */
function docRequestPath(expect: Expect | undefined): CommandPathMap {
  return (path) => stampedPath(path, ([field = '', ...rest]) => {
    if (field === 'collection' || field === 'id') return `params.${field}`;
    if (field === 'doc') return ['body', ...rest].join('.');
    if (field === 'expect') return expect !== undefined && 'rev' in expect ? 'headers.if-match' : 'headers.if-none-match';
    return 'request';
  });
}

/**
 * A document's own If-Match or If-None-Match that did not hold is 412 (RFC 9110 §13.1.1); the
 * store's revision_mismatch and already_exists stay for txn ops, which are not HTTP preconditions.
 */
function throwIfPreconditionFailed(result: CommandResult, expect: Expect | undefined): void {
  if (result.ok || expect === undefined) return;
  const { code, message, details } = result.error;
  if (code !== 'revision_mismatch' && code !== 'already_exists') return;
  const precondition = 'rev' in expect ? 'If-Match' : 'If-None-Match';
  throw new ShoalError('precondition_failed', `${precondition} did not hold: ${message}`, { ...details, precondition });
}

export async function readBarrier(ctx: ApiContext, consistency: 'linearizable' | 'stale'): Promise<void> {
  if (consistency === 'linearizable') await ctx.node.readBarrier();
}

export const docsRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.put('/v1/docs/:collection/:id', { config: { role: 'operator' } }, async (req, reply) => {
    const v = validate({ params: [docParams, req.params], query: [noQuery, req.query], body: [docBody, req.body], headers: [putHeaders, req.headers] });
    const expect = expectFrom(v.headers);
    refuseReserved(v.params.collection);
    const result = await propose(ctx, req, {
      op: 'put', collection: v.params.collection, id: v.params.id, doc: v.body as never, ...(expect ? { expect } : {}),
    }, docRequestPath(expect));
    throwIfPreconditionFailed(result, expect);
    throwIfFailed(result);
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    if (result.kind !== 'put') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return docAnswer(reply, result.doc);
  });

  app.delete('/v1/docs/:collection/:id', { config: { role: 'operator' } }, async (req, reply) => {
    const v = validate({ params: [docParams, req.params], query: [noQuery, req.query], headers: [deleteHeaders, req.headers] });
    const expect = expectFrom(v.headers);
    refuseReserved(v.params.collection);
    const result = await propose(ctx, req, { op: 'delete', collection: v.params.collection, id: v.params.id, ...(expect ? { expect } : {}) }, docRequestPath(expect));
    throwIfPreconditionFailed(result, expect);
    throwIfFailed(result);
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    if (result.kind !== 'delete') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return { collection: result.collection, id: result.id, rev: result.rev };
  });

  app.get('/v1/docs/:collection/:id', { config: { role: 'reader' } }, async (req, reply) => {
    const v = validate({ params: [docParams, req.params], query: [readQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const d = ctx.store.get(v.params.collection, v.params.id);
    if (d === undefined) throw new ShoalError('not_found', `no document ${v.params.collection}/${v.params.id}`, { collection: v.params.collection, id: v.params.id });
    return docAnswer(reply, d);
  });

  app.get('/v1/docs/:collection', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [collectionParams, req.params], query: [listQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const { prefix, limit, after } = v.query;
    const page = ctx.store.list(v.params.collection, { limit, ...(prefix !== undefined ? { prefix } : {}), ...(after !== undefined ? { after } : {}) });
    return { ...page, items: page.items.map(redactDoc) };
  });
};
