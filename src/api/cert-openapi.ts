// The OpenAPI entries of the revoked-certificate routes (cert-routes.ts), generated from the zod
// schemas they validate with; openapi.ts merges them into /docs.

import { z } from 'zod';
import { revocationSchema } from '../security/revoked-serials.ts';
import { renewNowBody, revokeBody } from './cert-routes.ts';
import { readQuery } from './request-schemas.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType, io: 'input' | 'output' = 'input'): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any' }) as Json;
  return rest;
}

export function certPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
  const entry = schemaOf(revocationSchema, 'output');
  const answer = { type: 'object', properties: { ...(entry.properties as Json), added: { type: 'boolean' }, rev: { type: 'integer' } } };
  const consistency = (schemaOf(readQuery) as { properties: Json }).properties.consistency;
  return {
    '/v1/certificates/renew': {
      post: {
        summary: "Renew this node's certificate now, with a new key (admin); with revokeOld, revoke the one it used",
        ...strict, requestBody: { required: false, content: { 'application/json': { schema: schemaOf(renewNowBody) } } },
        responses: { 200: json({ type: 'object', properties: { nodeId: { type: 'string' }, oldSerial: { type: 'string' }, newSerial: { type: 'string' }, revoked: entry } }), ...errors },
      },
    },
    '/v1/certificates/revoked': {
      post: {
        summary: 'Revoke one certificate by serial, or by its PEM (admin): every node refuses it at each handshake and closes its open connections',
        ...strict, requestBody: { required: true, content: { 'application/json': { schema: schemaOf(revokeBody) } } },
        responses: { 201: json(answer, 'Revoked'), 200: json(answer, 'Already revoked: the first entry stands'), ...errors },
      },
      get: {
        summary: 'The revoked certificates not yet expired (admin), oldest first', ...strict,
        parameters: [{ name: 'consistency', in: 'query', required: false, schema: consistency }],
        responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: entry }, rev: { type: 'integer' } } }), ...errors },
      },
    },
  };
}
