// The OpenAPI entries of the replicated volumes' routes (volume-routes.ts, issue 41), generated
// from their zod schemas; openapi.ts merges them into /docs.

import { z } from 'zod';
import { readOnlyQuery } from './control-schemas.ts';
import { incrementHeader, removeCopyAnswer, removeCopyBody, restoreAnswer, restoreBody, streamHeader, volumeListAnswer, volumeNameParams, volumeViewSchema } from './volume-routes.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType, io: 'input' | 'output' = 'output'): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any' }) as Json;
  return rest;
}

export function volumePaths(errors: Json): Json {
  const consistency = (z.toJSONSchema(readOnlyQuery, { io: 'input' }) as { properties: Json }).properties.consistency;
  const name = { name: 'name', in: 'path', required: true, schema: schemaOf(volumeNameParams.shape.name, 'input'), description: 'the volume\'s name (the mount\'s source)' };
  const ok = (s: z.ZodType): Json => ({ 200: { description: 'OK', content: { 'application/json': { schema: schemaOf(s) } } }, ...errors });
  return {
    '/v1/volumes': {
      get: {
        summary: 'The replicated volumes: writer, newest complete copy, where, its age, the last error (reader)', 'x-additional-query': false,
        parameters: [{ name: 'consistency', in: 'query', required: false, schema: consistency }],
        responses: ok(volumeListAnswer),
      },
    },
    '/v1/volumes/{name}': {
      get: {
        summary: 'One replicated volume, with every copy held, complete or diverged (reader)', 'x-additional-query': false,
        parameters: [name, { name: 'consistency', in: 'query', required: false, schema: consistency }],
        responses: ok(volumeViewSchema),
      },
    },
    '/v1/volumes/{name}/restore': {
      post: {
        summary: 'The next start of the volume\'s task restores a version, or starts empty; refused while a task runs (operator)', 'x-additional-query': false,
        parameters: [name],
        requestBody: { required: true, content: { 'application/json': { schema: schemaOf(restoreBody, 'input') } } },
        responses: ok(restoreAnswer),
      },
    },
    '/v1/volumes/{name}/remove-copy': {
      post: {
        summary: 'Removes a node\'s copy of the volume: a diverged one, or with force one of the line, never the last complete copy; the node deletes its files (operator)', 'x-additional-query': false,
        parameters: [name],
        requestBody: { required: true, content: { 'application/json': { schema: schemaOf(removeCopyBody, 'input') } } },
        responses: ok(removeCopyAnswer),
      },
    },
    '/v1/volumes/{name}/increments': {
      put: {
        summary: 'A writer\'s node sends a holder an increment of the volume (nodes only; refused from a sender that is not the volume\'s writer)', 'x-additional-query': false,
        parameters: [name, { name: incrementHeader, in: 'header', required: true, schema: { type: 'string' }, description: 'the offer, base64url JSON: volume, version, parent, sender, bytes, sha256' }],
        requestBody: { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary', description: 'the btrfs send stream' } } } },
        responses: { 204: { description: 'received, checked, and made a version' }, ...errors },
      },
    },
    '/v1/volumes/{name}/versions/{version}/stream': {
      get: {
        summary: 'A whole btrfs send stream of a version this node holds, for a backup (nodes only)', 'x-additional-query': false,
        parameters: [name, { name: 'version', in: 'path', required: true, schema: { type: 'string', pattern: '^s\\d+-e\\d+-[A-Za-z0-9_.-]+$', maxLength: 200 }, description: 'the version, s<seq>-e<epoch>-<node>' }],
        responses: {
          200: {
            description: `the stream; its length and sha256 in the ${streamHeader} header (base64url JSON: bytes, sha256)`,
            content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
          },
          ...errors,
        },
      },
    },
  };
}
