// The OpenAPI entries of the backup routes (backup-routes.ts), generated from the zod schemas they
// validate with; openapi.ts merges them into /docs. An SFTP credential goes in, never out.

import { z } from 'zod';
import { backupIdParams, backupListQuery, backupRunBody, backupTargetBody, backupTargetParams, backupTargetViewSchema } from './backup-routes.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

export function backupPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const body = (s: z.ZodType, required: boolean) => ({ required, content: { 'application/json': { schema: schemaOf(s) } } });
  const name = [{ name: 'name', in: 'path', required: true, schema: (schemaOf(backupTargetParams) as { properties: Json }).properties.name }];
  const id = [{ name: 'id', in: 'path', required: true, schema: (schemaOf(backupIdParams) as { properties: Json }).properties.id }];
  const target = (schemaOf(backupListQuery) as { properties: Json }).properties.target;
  const view = schemaOf(backupTargetViewSchema);
  const nullable = (type: string) => ({ type: [type, 'null'] });
  return {
    '/v1/backup-targets': {
      get: {
        summary: 'List backup targets, each with the outcome of its last backup; never a credential (reader)', ...strict,
        responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: view } } }), ...errors },
      },
    },
    '/v1/backup-targets/{name}': {
      put: {
        summary: 'Add or replace a backup target: a directory on the node, or an SFTP server (its password or key kept as a sealed secret) (admin)', ...strict,
        parameters: name, requestBody: body(backupTargetBody, true),
        responses: { 200: json({ type: 'object', properties: { outcome: { type: 'string', enum: ['created', 'updated'] }, target: view, rev: nullable('integer') } }), ...errors },
      },
      delete: {
        summary: 'Remove a backup target and its credential; its backups stay on it (admin)', ...strict, parameters: name,
        responses: { 200: json({ type: 'object', properties: { name: { type: 'string' }, removed: { type: 'boolean' }, rev: nullable('integer') } }), ...errors },
      },
    },
    '/v1/backups': {
      post: {
        summary: 'Take a backup now on this node, to the target named (or the only one), then apply its retention (admin)', ...strict,
        requestBody: body(backupRunBody, false),
        responses: {
          200: json({ type: 'object', properties: { target: { type: 'string' }, id: { type: 'string' }, index: { type: 'integer' }, bytes: { type: 'integer' }, encrypted: { type: 'boolean' }, pruned: { type: 'array', items: { type: 'string' } }, volumes: { type: 'array', description: 'each replicated volume: the version its stream holds (null: no complete copy, restored empty) and the stream\'s bytes', items: { type: 'object', properties: { name: { type: 'string' }, version: nullable('string'), bytes: { type: 'integer' } } } } } }),
          ...errors,
        },
      },
      get: {
        summary: 'List the backups on a target, from their manifests; a damaged one is listed with ok false (reader)', ...strict,
        parameters: [{ name: 'target', in: 'query', required: false, schema: target }],
        responses: {
          200: json({
            type: 'object',
            properties: {
              target: { type: 'string' }, where: { type: 'string' },
              items: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' }, ok: { type: 'boolean' }, problem: nullable('string'), clusterId: nullable('string'), createdAt: nullable('integer'), index: nullable('integer'), bytes: nullable('integer'), encrypted: nullable('boolean') } } },
            },
          }),
          ...errors,
        },
      },
    },
    '/v1/backups/{id}/verify': {
      post: {
        summary: 'Read a backup back whole and check every file\'s size and SHA-256 against its manifest; backup_damaged names each bad file (operator: it reads the whole backup)', ...strict,
        parameters: id, requestBody: body(backupRunBody, false),
        responses: { 200: json({ type: 'object', properties: { target: { type: 'string' }, id: { type: 'string' }, ok: { type: 'boolean' }, bytes: { type: 'integer' }, files: { type: 'integer' }, volumes: { type: 'integer', description: 'the volume streams among the files' }, clusterId: nullable('string'), index: nullable('integer') } }), ...errors },
      },
    },
  };
}
