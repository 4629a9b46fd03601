// POST /v1/mesh/rotate-key (docs/network.md, "Rotating a node's key"): this node replaces its
// WireGuard key pair. Node-local, as a drill action is: the private key lives on this node only,
// so `shoal node rotate-key NODE` sends the request to that node's own API. Admin only.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import type { ApiPluginOptions } from './context.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';

/** What the route acts on: this node's mesh agent (net/mesh-agent.ts). */
export const rotateKeyBody = z.strictObject({}).optional();

export const rotateKeyAnswer = z.object({ node: z.string(), publicKey: z.string() });

export const meshRoutes: FastifyPluginAsync<ApiPluginOptions> = async (app, { ctx }) => {
  app.post('/v1/mesh/rotate-key', { config: { role: 'admin' } }, async (req) => {
    validate({ query: [noQuery, req.query], body: [rotateKeyBody, req.body] });
    if (ctx.mesh === undefined) {
      throw new ShoalError('not_found', `node ${ctx.node.id} takes no part in the WireGuard mesh (no mesh section in its config), so it has no key to rotate`, { node: ctx.node.id });
    }
    const publicKey = await ctx.mesh.rotateKey();
    return { node: ctx.node.id, publicKey };
  });
};
