// The OpenAPI entries of the join and token routes (join-routes.ts, token-routes.ts), generated
// from the zod schemas they validate with; openapi.ts merges them into /docs.

import { z } from 'zod';
import { joinBody } from './join-routes.ts';
import { createTokenBody, tokenIdParams } from './token-routes.ts';
import { caKeyBody, renewBody } from './node-cert-routes.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

export function joinPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const body = (schema: z.ZodType) => ({ required: true, content: { 'application/json': { schema: schemaOf(schema) } } });
  const idParam = { name: 'id', in: 'path', required: true, schema: (schemaOf(tokenIdParams) as { properties: Json }).properties.id };
  return {
    '/v1/tokens': {
      post: { summary: 'Make a join token (admin); the answer is the only time its secret is shown', ...strict, requestBody: body(createTokenBody), responses: { 201: json({ type: 'object' }), ...errors } },
      get: { summary: 'List join tokens, without their hashes (admin)', ...strict, responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/tokens/{id}': {
      delete: { summary: 'Revoke a join token (admin)', ...strict, parameters: [idParam], responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/join/ca': {
      get: { summary: 'The cluster CA certificate, to check against a join token\'s fingerprint (public)', ...strict, responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/join/ca-key': {
      post: { summary: 'The CA key for a voter, sealed to the key of its certificate (public: only that node can open it)', ...strict, requestBody: body(caKeyBody), responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/join/renew': {
      post: { summary: 'A new certificate for a member that signs the request with its current key, expired or not (public)', ...strict, requestBody: body(renewBody), responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/join': {
      post: { summary: 'Redeem a join token: sign a node\'s or a client\'s certificate request; a node joins as a learner (public: the token is the credential)', ...strict, requestBody: body(joinBody), responses: { 201: json({ type: 'object' }), ...errors } },
    },
  };
}
