// POST /v1/txn: compare on revisions or existence, then a list of puts and deletes, all or nothing.

import type { FastifyPluginAsync } from 'fastify';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { noQuery, txnBodySchema, txnHeaders } from './request-schemas.ts';
import { redactOpResults } from './redact.ts';
import { reservedWrite } from './reserved.ts';
import { badRequest, stampedPath, validate, type CommandPathMap, type Problem } from './validate.ts';
import { propose, throwIfFailed } from './write-path.ts';

/** The txn command has the body's shape: `cmd.success.1.id` came from `body.success.1.id`. */
const txnRequestPath: CommandPathMap = (path) => stampedPath(path, (rest) => ['body', ...rest].join('.'));

export const txnRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/txn', { config: { role: 'operator' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [txnBodySchema, req.body], headers: [txnHeaders, req.headers] });
    // Writes to the control plane's collections are refused, every one at once; compares may read them.
    const reserved = (['success', 'failure'] as const).flatMap((branch) => v.body[branch].flatMap((op, i): Problem[] => {
      const p = reservedWrite(op.collection, `body.${branch}.${i}.collection`);
      return p === undefined ? [] : [p];
    }));
    if (reserved.length > 0) throw badRequest(reserved);
    const result = await propose(ctx, req, { op: 'txn', compare: v.body.compare, success: v.body.success as never, failure: v.body.failure as never }, txnRequestPath);
    throwIfFailed(result);
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    if (result.kind !== 'txn') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return { succeeded: result.succeeded, rev: result.rev, results: redactOpResults(result.results) };
  });
};
