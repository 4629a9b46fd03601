// What a request to the control plane's routes (services, nodes, tasks, apply) may hold, as zod
// schemas: the routes validate with them and the OpenAPI document (openapi.ts) is generated from
// them, as for the document routes (request-schemas.ts).

import { z } from 'zod';
import { labelsSchema } from '../resources/records.ts';
import { labelKeyPattern } from '../resources/spec/constraint.ts';
import { specLimits } from '../resources/spec/limits.ts';
import { consistencySchema, notDotSegment, notDotSegmentRule } from './request-schemas.ts';

/** A service name: a DNS label, as the spec vocabulary has it (spec/service-fields.ts). */
export const serviceNameSchema = z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a service name (a DNS label: lower-case letters, digits and -, starting with a letter)');
/**
 * A node: its id (as `shoal init` prints it) or its name (src/node/identity.ts), both of which
 * start with a letter or digit. So it is never `.` or `..`, which a URL drops as a dot segment
 * (`/v1/nodes/./drain` is `/v1/nodes/drain`): a ref the schema takes is a ref the route sees.
 */
export const nodeRefSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a node is named by its id or its name: 1 to 64 of A-Z, a-z, 0-9, ., _ and -, starting with a letter or digit');
/**
 * A task id (the orchestrator's are 12 hex digits; any id of the store is accepted) but `.` and
 * `..`, which a URL drops as a dot segment.
 */
export const taskIdSchema = z.string().min(1).max(256).regex(notDotSegment, `a task id ${notDotSegmentRule}`);

export const serviceParams = z.object({ name: serviceNameSchema }).strict();
export const nodeParams = z.object({ ref: nodeRefSchema }).strict();
export const taskParams = z.object({ id: taskIdSchema }).strict();

export const readOnlyQuery = z.object({ consistency: consistencySchema }).strict();

export const applyQuery = z.object({
  dryRun: z.enum(['true', 'false']).optional(),
  /** Digest pinning (image-resolution.ts): always, changed (the default) or never. */
  resolveImage: z.enum(['always', 'changed', 'never']).optional(),
}).strict();

export const applyBody = z.object({
  /**
   * Decoded spec documents (JSON objects with apiVersion and kind). Their number is bounded by the
   * body size and checked by the spec parser (specLimits.documentsMax), which says it at `documents`.
   */
  documents: z.array(z.record(z.string(), z.unknown(), { error: 'must be a spec document (a JSON object with apiVersion and kind)' })).optional(),
  /** Or the text of a spec file: YAML (several documents separated by ---) or JSON. */
  text: z.string().optional(),
  /** How `text` is written; YAML also reads JSON. */
  format: z.enum(['yaml', 'json']).optional(),
  /**
   * Apply only if each named service's record is at this revision (its `rev` in a listing): the
   * compare-and-set of a read-modify-apply (`shoal service update`). Refused with
   * revision_mismatch otherwise.
   */
  expectRevs: z.record(serviceNameSchema, z.number().int().min(1)).optional(),
  /** The apply's source (a file's name, 1-128 characters): services it creates record it. */
  source: z.string().min(1).max(128).regex(/^[^\p{Cc}]*$/u, 'no control characters').optional(),
  /** Remove the services created by `source` that the specs no longer name. Needs `source`. */
  prune: z.boolean().optional(),
  /** The rolling updates this apply starts may go past the services' disruption budgets (recorded on each). */
  force: z.boolean().optional(),
}).strict().superRefine((b, ctx) => {
  if (b.prune === true && b.source === undefined) {
    ctx.addIssue({ code: 'custom', path: ['prune'], message: 'needs source: only the services an apply of that source created are pruned' });
  }
  if ((b.documents === undefined) === (b.text === undefined)) {
    ctx.addIssue({ code: 'custom', path: [], message: 'give the specs either as documents (a list of objects) or as text (a YAML or JSON file), exactly one of them' });
  }
  if (b.format !== undefined && b.text === undefined) {
    ctx.addIssue({ code: 'custom', path: ['format'], message: 'only applies to text' });
  }
});

export const scaleBody = z.object({
  replicas: z.number().int().min(0).max(specLimits.replicasMax),
}).strict();

export const noBody = z.union([z.undefined(), z.object({}).strict()]);

/** A voluntary disruption's body: `force` lets it go past the service's disruption budget (recorded on the service). */
export const forceObject = z.object({ force: z.boolean().optional() }).strict();
export const forceBody = z.union([z.undefined(), forceObject]);

export const availabilityBody = z.object({
  availability: z.enum(['active', 'pause', 'drain']),
  /** With drain: its moves may go past the disruption budgets of the services they touch (recorded on each). */
  force: z.boolean().optional(),
}).strict().superRefine((b, ctx) => {
  if (b.force === true && b.availability !== 'drain') ctx.addIssue({ code: 'custom', path: ['force'], message: 'only a drain takes tasks down; pause and active never need force' });
});

/** POST /v1/nodes/{ref}/disruption: may this node be taken away (a drill) now? */
export const disruptionBody = z.object({
  cause: z.literal('drill'),
  /** Go past the budgets (recorded on each service it exceeds). */
  force: z.boolean().optional(),
}).strict();

export const labelsBody = z.object({
  /** Labels to add or change. */
  set: labelsSchema.optional(),
  /** Label keys to remove (a key that is not there is ignored). */
  remove: z.array(z.string().regex(labelKeyPattern, 'not a label key')).max(specLimits.listItemsMax).optional(),
}).strict().superRefine((b, ctx) => {
  for (const key of b.remove ?? []) {
    if (b.set !== undefined && Object.hasOwn(b.set, key)) ctx.addIssue({ code: 'custom', path: ['remove'], message: `${key} is both set and removed; choose one` });
  }
});

export const observedStates = ['pending', 'assigned', 'starting', 'running', 'failed', 'shutdown', 'orphaned'] as const;

/** Tasks in one page of GET /v1/tasks, by default and at most. */
export const tasksPageDefault = 1000;
export const tasksPageMax = 10_000;

export const tasksQuery = z.object({
  service: serviceNameSchema.optional(),
  node: nodeRefSchema.optional(),
  state: z.enum(observedStates).optional(),
  limit: z.coerce.number().int().min(1).max(tasksPageMax).default(tasksPageDefault),
  after: taskIdSchema.optional(),
  consistency: consistencySchema,
}).strict();
