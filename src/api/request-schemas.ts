// What a request to the document routes may hold, as zod schemas: the routes validate with
// them and the OpenAPI document (openapi.ts) is generated from them, so that the two cannot
// drift apart and a test can walk every route with requests the document says are wrong.

import { z } from 'zod';
import { collectionSchema, idPrefixSchema, idSchema } from '../../fsm/index.ts';
import { idempotencyKeyLengthMax, listLimitDefault, listLimitMax, principalLengthMax, txnComparesMax, txnOpsMax } from '../../fsm/limits.ts';

export const noQuery = z.object({}).strict();
export const consistencySchema = z.enum(['linearizable', 'stale']).default('linearizable');

/**
 * Not `.` or `..`: a URL drops such a path segment (`/v1/docs/c/.` is `/v1/docs/c/`), so a name
 * that may be one could be written but never read, and a route would see another path. Every
 * name a URL carries takes it (the empty name is left to each schema's length rule); the store's own id rule (fsm/command.ts) is left as it is, so that
 * entries an earlier release wrote still apply.
 */
export const notDotSegment = /^(?:(?:[^.]|\.[^.]|\.\.[\s\S])[\s\S]*)?$/;
export const notDotSegmentRule = "may not be '.' or '..' (a URL drops such a segment)";
/** A document id as the API takes it: the store's rule and not a dot segment. */
export const docIdSchema = idSchema.regex(notDotSegment, `ids ${notDotSegmentRule}`);

export const docParams = z.object({ collection: collectionSchema, id: docIdSchema }).strict();
export const collectionParams = z.object({ collection: collectionSchema }).strict();
export const readQuery = z.object({ consistency: consistencySchema }).strict();
export const listQuery = z.object({
  prefix: idPrefixSchema.optional(),
  limit: z.coerce.number().int().min(1).max(listLimitMax).default(listLimitDefault),
  after: idPrefixSchema.optional(),
  consistency: consistencySchema,
}).strict();
export const docBody = z.record(z.string(), z.unknown(), { error: 'the body must be a JSON object (the document)' });

/** A document revision in If-Match: 1 or more (revisions are log indexes) and exactly representable. */
export const revHeader = z.string()
  .regex(/^(W\/)?"?\d{1,16}"?$/, 'must be a revision number, e.g. If-Match: 42')
  .transform((s) => Number(s.replace(/\D/g, '')))
  .refine((n) => Number.isSafeInteger(n) && n >= 1, `must be a revision from 1 to ${Number.MAX_SAFE_INTEGER}`);
const writeHeaders = {
  'idempotency-key': z.string().min(1).max(idempotencyKeyLengthMax).optional(),
  // Only a node forwarding a request may name the original caller (auth.ts); anyone else is refused.
  'x-shoal-principal': z.string().max(principalLengthMax).optional(),
};
export const putHeaders = z.object({
  'if-match': revHeader.optional(),
  'if-none-match': z.literal('*', { error: "only 'If-None-Match: *' (must not exist) is supported" }).optional(),
  ...writeHeaders,
}).passthrough();
export const deleteHeaders = z.object({
  'if-match': revHeader.optional(),
  'if-none-match': z.never({ error: 'If-None-Match does not apply to DELETE' }).optional(),
  ...writeHeaders,
}).passthrough();
export const txnHeaders = z.object(writeHeaders).passthrough();

// The same bounds as the store's (fsm/command.ts), so that a bad value is refused here with its path.
const revSchema = z.number().int().min(1);
const expectSchema = z.union([z.object({ rev: revSchema }).strict(), z.object({ absent: z.literal(true) }).strict()]);
const opSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('put'), collection: collectionSchema, id: docIdSchema, doc: z.record(z.string(), z.unknown()), expect: expectSchema.optional() }).strict(),
  z.object({ op: z.literal('delete'), collection: collectionSchema, id: docIdSchema, expect: expectSchema.optional() }).strict(),
]);
const compareSchema = z.object({
  collection: collectionSchema, id: idSchema, target: z.enum(['rev', 'createRev', 'exists']),
  cmp: z.enum(['=', '!=', '<', '>', '<=', '>=']), value: z.union([z.number().int().min(0), z.boolean()]),
}).strict();
export const txnBodySchema = z.object({
  compare: z.array(compareSchema).max(txnComparesMax).default([]),
  success: z.array(opSchema).max(txnOpsMax).default([]),
  failure: z.array(opSchema).max(txnOpsMax).default([]),
}).strict();

export const watchQuery = z.object({
  collection: collectionSchema.optional(),
  prefix: idPrefixSchema.optional(),
  after: z.coerce.number().int().min(0).optional(),
}).strict();
export const watchHeaders = z.object({ 'last-event-id': z.coerce.number().int().min(0).optional() }).passthrough();
