// The OpenAPI entries of the compose stack routes (stack-routes.ts), generated from the zod
// schemas they validate with; openapi.ts merges them into /docs.

import { z } from 'zod';
import { applyQuery, readOnlyQuery } from './control-schemas.ts';
import { noQuery } from './request-schemas.ts';
import { stackDeployBody, stackParams } from './stack-routes.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

function parametersOf(s: z.ZodObject, where: 'path' | 'query'): Json[] {
  const props = (schemaOf(s).properties ?? {}) as Record<string, Json>;
  return Object.entries(props).map(([name, schema]) => ({ name, in: where, required: where === 'path', schema }));
}

export function stackPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const name = parametersOf(stackParams, 'path');
  const obj = { type: 'object' };
  const outcomes = { type: 'array', items: obj };
  return {
    '/v1/stacks': {
      get: { summary: 'List compose stacks (what each made, tasks running of desired)', ...strict, parameters: parametersOf(readOnlyQuery, 'query'), responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: obj }, rev: { type: 'integer' } } }), ...errors } },
    },
    '/v1/stacks/{name}': {
      get: { summary: 'A compose stack: its record (services, networks, secrets it made) and task counts', ...strict, parameters: [...name, ...parametersOf(readOnlyQuery, 'query')], responses: { 200: json({ type: 'object', properties: { stack: obj, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove everything the stack made (services, jobs, networks, secrets) and nothing else', ...strict, parameters: [...name, ...parametersOf(noQuery, 'query')], responses: { 200: json({ type: 'object', properties: { name: { type: 'string' }, removed: obj, kept: outcomes, rev: { type: ['integer', 'null'] } } }), ...errors } },
    },
    '/v1/stacks/{name}/deploy': {
      post: {
        summary: 'Deploy compose files as stack NAME: strict, all or nothing (every problem with its compose path); ?dryRun=true answers the plan and writes nothing', ...strict,
        parameters: [...name, ...parametersOf(applyQuery, 'query')],
        requestBody: { required: true, content: { 'application/json': { schema: schemaOf(stackDeployBody) } } },
        responses: { 200: json({ type: 'object', properties: { stack: { type: 'string' }, dryRun: { type: 'boolean' }, rev: { type: ['integer', 'null'] }, services: outcomes, jobs: outcomes, networks: outcomes, secrets: outcomes, policies: outcomes, warnings: outcomes, skipped: { type: 'array', items: { type: 'string' } } } }), ...errors },
      },
    },
  };
}
