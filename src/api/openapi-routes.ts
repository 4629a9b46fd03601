// GET /docs and /docs/openapi.json: the OpenAPI description of the client API (openapi.ts).
// The document and the modules it is built from (openapi.ts and the *-openapi.ts beside it) are
// loaded at the first request, not at start: a node loads what it serves with (issue 45).

import type { FastifyPluginAsync } from 'fastify';
import type { ApiContext } from './context.ts';
import type { Json } from './openapi.ts';
import type { RouteTable } from './route-table.ts';

export const openApiRoutes: FastifyPluginAsync<{ ctx: ApiContext; routes: RouteTable }> = async (app, { ctx, routes }) => {
  // Built at the first request: by then every plugin has registered its routes.
  let doc: Json | undefined;
  const document = async (): Promise<Json> => {
    if (doc === undefined) {
      const { openApiDocument, withRoles } = await import('./openapi.ts');
      doc ??= withRoles(openApiDocument(ctx.softwareVersion), routes);
    }
    return doc;
  };
  app.get('/docs', { config: { role: 'public' } }, async () => document());
  app.get('/docs/openapi.json', { config: { role: 'public' } }, async () => document());
};
