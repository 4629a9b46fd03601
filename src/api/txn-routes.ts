// POST /v1/txn: compare on revisions or existence, then a list of puts and deletes, all or nothing.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { collectionSchema, idSchema } from '../../fsm/index.ts';
import { txnComparesMax, txnOpsMax } from '../../fsm/limits.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './app.ts';
import { stampedPath, validate, type CommandPathMap } from './validate.ts';
import { propose, throwIfFailed } from './write-path.ts';

// The same bounds as the store's (fsm/command.ts), so that a bad value is refused here with its path.
const revSchema = z.number().int().min(1);
const expectSchema = z.union([z.object({ rev: revSchema }).strict(), z.object({ absent: z.literal(true) }).strict()]);
const opSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('put'), collection: collectionSchema, id: idSchema, doc: z.record(z.string(), z.unknown()), expect: expectSchema.optional() }).strict(),
  z.object({ op: z.literal('delete'), collection: collectionSchema, id: idSchema, expect: expectSchema.optional() }).strict(),
]);
const compareSchema = z.object({
  collection: collectionSchema, id: idSchema, target: z.enum(['rev', 'createRev', 'exists']),
  cmp: z.enum(['=', '!=', '<', '>', '<=', '>=']), value: z.union([z.number().int().min(0), z.boolean()]),
}).strict();
export const txnBodySchema = z.object({
  compare: z.array(compareSchema).max(txnComparesMax).default([]),
  success: z.array(opSchema).max(txnOpsMax).default([]),
  failure: z.array(opSchema).max(txnOpsMax).default([]),
}).strict();
const noQuery = z.object({}).strict();
/** The txn command has the body's shape: `cmd.success.1.id` came from `body.success.1.id`. */
const txnRequestPath: CommandPathMap = (path) => stampedPath(path, (rest) => ['body', ...rest].join('.'));

export const txnRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/txn', async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [txnBodySchema, req.body] });
    const result = await propose(ctx, req, { op: 'txn', compare: v.body.compare, success: v.body.success as never, failure: v.body.failure as never }, txnRequestPath);
    throwIfFailed(result);
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    if (result.kind !== 'txn') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return { succeeded: result.succeeded, rev: result.rev, results: result.results };
  });
};
