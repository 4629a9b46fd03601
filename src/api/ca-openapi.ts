// The OpenAPI entries of the CA rotation routes (ca-routes.ts), generated from the zod schemas
// they validate with; openapi.ts merges them into /docs.

import { z } from 'zod';
import { clientCertBody, nextKeyBody } from './ca-routes.ts';
import { readQuery } from './request-schemas.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

const waiting = { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, why: { type: 'string' } } };
const rotation = {
  type: ['object', 'null'],
  properties: {
    id: { type: 'string' }, phase: { type: 'string', enum: ['add', 'reissue', 'retire', 'done'] },
    oldFingerprint: { type: 'string' }, newFingerprint: { type: 'string' }, startedBy: { type: 'string' },
    startedAtMs: { type: 'integer' }, phaseAtMs: { type: 'integer' }, waiting: { type: 'array', items: waiting },
  },
};

export function caPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const body = (schema: z.ZodType, required = true) => ({ required, content: { 'application/json': { schema: schemaOf(schema) } } });
  const consistency = (schemaOf(readQuery) as { properties: Json }).properties.consistency;
  return {
    '/v1/ca/rotation': {
      get: {
        summary: 'The CA rotation: phase, the members it waits for, and the CAs this node trusts (reader)', ...strict,
        parameters: [{ name: 'consistency', in: 'query', required: false, schema: consistency }],
        responses: { 200: json({ type: 'object', properties: { rotation, trusted: { type: 'array', items: { type: 'string' } }, caPem: { type: 'string' } } }), ...errors },
      },
    },
    '/v1/ca/rotate': {
      post: {
        summary: 'Start a CA rotation, or move it one phase on once every member is ready (admin; on the leader)', ...strict,
        requestBody: { required: false, content: { 'application/json': { schema: { type: 'object', additionalProperties: false } } } },
        responses: { 200: json({ type: 'object', properties: { rotation, did: { type: 'string', enum: ['started', 'advanced', 'nothing'] } } }), ...errors },
      },
    },
    '/v1/ca/next-key': {
      post: { summary: 'The new CA key of a rotation for a voter, sealed to the key of its certificate (public: only that node can open it)', ...strict, requestBody: body(nextKeyBody), responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/ca/client-cert': {
      post: { summary: 'A new client certificate for the caller\'s own principal and role, for the key of a certificate request, from the CA that signs now (admin, with a client certificate)', ...strict, requestBody: body(clientCertBody), responses: { 200: json({ type: 'object' }), ...errors } },
    },
  };
}
