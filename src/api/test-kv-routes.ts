// An interim key-value endpoint that drives writes through the log until the document API
// exists. PUT is forwarded through Raft to the leader and answers once applied on this node; GET
// is linearizable by default (ReadIndex), or local with ?consistency=stale.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { KvStateMachine } from '../node/kv-state-machine.ts';
import type { ApiContext } from './app.ts';

const params = z.object({ key: z.string().min(1).max(512) }).strict();
const body = z.object({ value: z.string().max(1 << 20) }).strict();
const query = z.object({ consistency: z.enum(['linearizable', 'stale']).default('linearizable') }).strict();

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    throw new ShoalError('bad_request', `invalid ${what}`, {
      problems: r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
  }
  return r.data;
}

export const testKvRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.put('/v1/test/kv/:key', async (req) => {
    const { key } = parse(params, req.params, 'path');
    const { value } = parse(body, req.body, 'body');
    const { index } = await ctx.node.propose(KvStateMachine.encode({ op: 'put', key, value }));
    return { key, rev: index };
  });

  app.get('/v1/test/kv/:key', async (req) => {
    const { key } = parse(params, req.params, 'path');
    const { consistency } = parse(query, req.query, 'query');
    if (consistency === 'linearizable') await ctx.node.readBarrier();
    const v = ctx.kv.get(key);
    if (v === undefined) throw new ShoalError('not_found', `no key ${key}`);
    return { key, value: v.value, rev: v.rev };
  });
};
