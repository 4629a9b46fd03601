// The OpenAPI entries of the registry login routes (registries-routes.ts), generated from the zod
// schemas they validate with; openapi.ts merges them into /docs. A password goes in, never out.

import { z } from 'zod';
import { readOnlyQuery } from './control-schemas.ts';
import { registryLoginBody, registryLoginViewSchema, registryParams } from './registries-routes.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

export function registryPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const host = [{ name: 'host', in: 'path', required: true, schema: (schemaOf(registryParams) as { properties: Json }).properties.host }];
  const consistency = (schemaOf(readOnlyQuery) as { properties: Json }).properties.consistency;
  const view = schemaOf(registryLoginViewSchema);
  const login = schemaOf(registryLoginViewSchema.omit({ rev: true }));
  return {
    '/v1/registries': {
      get: {
        summary: 'List registry logins: host, user, times; never a password (reader)', ...strict,
        parameters: [{ name: 'consistency', in: 'query', required: false, schema: consistency }],
        responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: view }, rev: { type: 'integer' } } }), ...errors },
      },
    },
    '/v1/registries/{host}': {
      put: {
        summary: 'Log in to a registry: the password kept as a sealed secret, sent only to the node that pulls for a task on that registry (operator)', ...strict,
        parameters: host, requestBody: { required: true, content: { 'application/json': { schema: schemaOf(registryLoginBody) } } },
        responses: { 200: json({ type: 'object', properties: { outcome: { type: 'string', enum: ['created', 'updated', 'unchanged'] }, login, rev: { type: ['integer', 'null'] } } }), ...errors },
      },
      delete: {
        summary: 'Log out of a registry: the login and its password removed (operator)', ...strict, parameters: host,
        responses: { 200: json({ type: 'object', properties: { host: { type: 'string' }, removed: { type: 'boolean' }, rev: { type: ['integer', 'null'] } } }), ...errors },
      },
    },
  };
}
