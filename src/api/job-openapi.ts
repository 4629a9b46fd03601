// The OpenAPI entries of the jobs' routes (jobs-routes.ts), generated from the zod schemas they
// validate with; openapi.ts merges them into /docs.

import { z } from 'zod';
import { jobRecordSchema, jobRunRecordSchema } from '../resources/jobs.ts';
import { jobSpecSchema } from '../resources/spec/job-spec.ts';
import { jobParams } from './jobs-routes.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { noQuery } from './request-schemas.ts';

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'output', unrepresentable: 'any' }) as Json;
  return rest;
}

function params(s: z.ZodObject, where: 'path' | 'query'): Json[] {
  const shape = s.shape as Record<string, z.ZodType>;
  return Object.entries(shape).map(([name, field]) => ({ name, in: where, required: where === 'path', schema: schemaOf(field) }));
}

export function jobPaths(errors: Json): Json {
  const strict = { 'x-additional-query': false };
  const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });
  const emptyBody = { required: false, content: { 'application/json': { schema: { type: 'object', additionalProperties: false } } } };
  const run = { ...schemaOf(jobRunRecordSchema), 'x-also': 'nodeName: the node name of the last attempt' };
  const view = {
    type: 'object', properties: {
      name: { type: 'string' }, schedule: { type: ['string', 'null'] }, concurrency: { type: 'string', enum: ['forbid', 'replace', 'allow'] }, suspended: { type: 'boolean' },
      specVersion: { type: 'integer' }, nextAt: { type: ['integer', 'null'] }, lastScheduledAt: { type: ['integer', 'null'] }, active: { type: 'integer' },
      lastRun: { anyOf: [run, { type: 'null' }] }, lastFinished: { anyOf: [run, { type: 'null' }] },
    },
  };
  const clock = {
    type: 'object', description: 'What the answering node knows of the members\' clocks and the jobs\' clock rule (docs/control-plane.md, Jobs, "Clocks")', properties: {
      node: { type: 'string' }, leader: { type: 'boolean' }, synchronized: { type: ['boolean', 'null'] }, skewMaxMs: { type: 'integer' }, skewMs: { type: ['number', 'null'] },
      offsets: { type: 'array', items: { type: 'object', properties: { node: { type: 'string' }, offsetMs: { type: ['number', 'null'] } } } },
      hold: { type: ['string', 'null'] },
    },
  };
  const name = params(jobParams, 'path');
  const read = params(readOnlyQuery, 'query');
  const noQ = params(noQuery as z.ZodObject, 'query');
  const written = (extra: Json): Json => json({ type: 'object', properties: { rev: { type: ['integer', 'null'] }, ...extra } });
  return {
    '/v1/jobs': { get: { summary: 'List jobs: schedule, next time, active runs, last run; and the answering node\'s view of the clocks (the leader\'s says whether scheduled runs are held)', ...strict, parameters: read, responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: view }, rev: { type: 'integer' }, clock } }), ...errors } } },
    '/v1/jobs/{name}': {
      get: { summary: 'A job, its spec and its runs (newest first)', ...strict, parameters: [...name, ...read], responses: { 200: json({ type: 'object', properties: { job: view, spec: schemaOf(jobSpecSchema), runs: { type: 'array', items: run }, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove a job (its running attempts are stopped, its runs deleted)', ...strict, parameters: [...name, ...noQ], responses: { 200: written({ name: { type: 'string' }, removed: { type: 'boolean' } }), ...errors } },
    },
    '/v1/jobs/{name}/run': {
      post: { summary: 'Run the job now (a manual run); refused with job_run_active for a forbid job with a run going', ...strict, parameters: [...name, ...noQ], requestBody: emptyBody, responses: { 200: written({ id: { type: 'string' }, run: { anyOf: [run, { type: 'null' }] } }), ...errors } },
    },
    '/v1/jobs/{name}/suspend': {
      post: { summary: 'Suspend the schedule (running runs go on)', ...strict, parameters: [...name, ...noQ], requestBody: emptyBody, responses: { 200: written({ name: { type: 'string' }, suspended: { type: 'boolean' } }), ...errors } },
    },
    '/v1/jobs/{name}/resume': {
      post: { summary: 'Resume the schedule (times passed while suspended are skipped)', ...strict, parameters: [...name, ...noQ], requestBody: emptyBody, responses: { 200: written({ name: { type: 'string' }, suspended: { type: 'boolean' } }), ...errors } },
    },
  };
}

/** The job record's JSON schema (for components, if wanted). */
export const jobRecordJsonSchema = (): Json => schemaOf(jobRecordSchema);
