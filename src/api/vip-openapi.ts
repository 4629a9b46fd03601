// The OpenAPI entry of GET /v1/vips (vip-routes.ts), generated from its zod schema; openapi.ts merges it into /docs.

import { z } from 'zod';
import { readOnlyQuery } from './control-schemas.ts';
import { vipListAnswer } from './vip-routes.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'output', unrepresentable: 'any' }) as Json;
  return rest;
}

export function vipPaths(errors: Json): Json {
  const consistency = (z.toJSONSchema(readOnlyQuery, { io: 'input' }) as { properties: Json }).properties.consistency;
  return {
    '/v1/vips': {
      get: {
        summary: 'The virtual IPs: each one\'s holder, since when, and its lease left as this node sees it (reader)', 'x-additional-query': false,
        parameters: [{ name: 'consistency', in: 'query', required: false, schema: consistency }],
        responses: { 200: { description: 'OK', content: { 'application/json': { schema: schemaOf(vipListAnswer) } } }, ...errors },
      },
    },
  };
}
