// The OpenAPI 3.1 description of the client API (served by openapi-routes.ts). The document routes' parameters,
// headers and bodies are generated from the zod schemas they validate with (request-schemas.ts);
// the cluster routes' are written out here. Every route is listed with every method it takes,
// and `x-additional-query: false` marks the operations that refuse unknown query parameters, so
// that test/api/schema-walk.test.ts can walk the whole API with requests this document says are
// wrong and check each is refused with a catalogued error.

import { z } from 'zod';
import { errorCatalog } from '../errors.ts';
import { nodeRecordSchema, serviceRecordSchema, taskRecordSchema, taskStatusSchema } from '../resources/records.ts';
import type { RouteTable } from './route-table.ts';
import { createCredentialBody, credentialParams } from './credentials-routes.ts';
import { auditQuery } from './audit-routes.ts';
import {
  applyBody, applyQuery, availabilityBody, disruptionBody, forceObject, labelsBody, nodeParams, readOnlyQuery, scaleBody, serviceParams, taskParams, tasksQuery,
} from './control-schemas.ts';
import { logsQuery } from './logs-routes.ts';
import { networkParams } from './network-routes.ts';
import {
  collectionParams, deleteHeaders, docBody, docParams, listQuery, noQuery, putHeaders, readQuery, txnBodySchema, txnHeaders, watchHeaders, watchQuery,
} from './request-schemas.ts';
import { eventsHeaders, eventsQuery } from './events-routes.ts';
import { joinPaths } from './join-openapi.ts';
import { memberBody, refParams, transferBody } from './cluster-routes.ts';
import { certPaths } from './cert-openapi.ts';
import { caPaths } from './ca-openapi.ts';
import { seriesPaths } from './series-openapi.ts';
import { jobPaths } from './job-openapi.ts';
// Registry logins (issue 40).
import { registryPaths } from './registry-openapi.ts';
import { backupPaths } from './backup-openapi.ts';
// Virtual IPs (issue 38).
import { vipPaths } from './vip-openapi.ts';
import { volumePaths } from './volume-openapi.ts';
import { secretBody, secretParams, secretViewSchema } from './secrets-routes.ts';
import { drillsListQuery } from './drill-routes.ts';
import { rotateKeyAnswer } from './mesh-routes.ts';
import { drillActionSchema } from '../node/drill/drill-actions.ts';
import { drillReportSchema } from '../node/drill/drill-report.ts';
import { activateBody, buildQuery, rollbackBody } from './upgrade-routes.ts';
import { stackPaths } from './stack-openapi.ts';

export type Json = Record<string, unknown>;
type Where = 'path' | 'query' | 'header';

/** The JSON Schema of a zod schema as a request sees it (before defaults and transforms). */
function schemaOf(s: z.ZodType): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

/** One OpenAPI parameter per property of a zod object schema. */
function parametersOf(obj: z.ZodObject, where: Where): Json[] {
  const s = schemaOf(obj) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(s.properties ?? {}).map(([name, schema]) => ({
    name, in: where, required: where === 'path' || (s.required ?? []).includes(name), schema,
  }));
}

const errorSchema = {
  type: 'object',
  required: ['code', 'message', 'requestId', 'retryable'],
  additionalProperties: false,
  properties: {
    code: { type: 'string', enum: Object.keys(errorCatalog) },
    message: { type: 'string' },
    requestId: { type: 'string' },
    retryable: { type: 'boolean' },
    details: { type: 'object' },
  },
};
const docSchema = {
  type: 'object',
  properties: { collection: { type: 'string' }, id: { type: 'string' }, rev: { type: 'integer' }, createRev: { type: 'integer' }, doc: { type: 'object' } },
};
const errors = { default: { description: 'An error from the catalog (docs/errors.md).', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } };
const json = (schema: object, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
const jsonBody = (schema: object, required = true) => ({ required, content: { 'application/json': { schema } } });
const strict = { 'x-additional-query': false };

// The cluster routes' schemas (cluster-routes.ts), generated from the zod schemas they validate with.
const memberPath = parametersOf(refParams, 'path');

function docPaths(): Json {
  return {
    '/v1/docs/{collection}/{id}': {
      put: {
        summary: 'Create or replace a document', ...strict, parameters: [...parametersOf(docParams, 'path'), ...parametersOf(putHeaders, 'header')],
        requestBody: jsonBody(schemaOf(docBody)), responses: { 200: json({ $ref: '#/components/schemas/Doc' }), ...errors },
      },
      get: { summary: 'Read a document', ...strict, parameters: [...parametersOf(docParams, 'path'), ...parametersOf(readQuery, 'query')], responses: { 200: json({ $ref: '#/components/schemas/Doc' }), ...errors } },
      delete: { summary: 'Delete a document', ...strict, parameters: [...parametersOf(docParams, 'path'), ...parametersOf(deleteHeaders, 'header').filter((p) => p.name !== 'if-none-match')], responses: { 200: json({ type: 'object' }), ...errors } },
    },
    '/v1/docs/{collection}': {
      get: {
        summary: 'List a collection', ...strict, parameters: [...parametersOf(collectionParams, 'path'), ...parametersOf(listQuery, 'query')],
        responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: { $ref: '#/components/schemas/Doc' } }, rev: { type: 'integer' }, next: { type: ['string', 'null'] } } }), ...errors },
      },
    },
    '/v1/txn': {
      post: {
        summary: 'Compare, then apply puts and deletes atomically', ...strict, parameters: parametersOf(txnHeaders, 'header'),
        requestBody: jsonBody({ $ref: '#/components/schemas/Txn' }), responses: { 200: json({ type: 'object' }), ...errors },
      },
    },
    '/v1/watch': {
      get: {
        summary: 'Server-sent events of changes after a revision', ...strict, parameters: [...parametersOf(watchQuery, 'query'), ...parametersOf(watchHeaders, 'header')],
        responses: { 200: { description: 'text/event-stream' }, ...errors },
      },
    },
    '/v1/events': {
      get: {
        summary: 'Server-sent events of the cluster\'s own events (docs/monitoring.md, "Events")', ...strict, parameters: [...parametersOf(eventsQuery, 'query'), ...parametersOf(eventsHeaders, 'header')],
        responses: { 200: { description: 'text/event-stream' }, ...errors },
      },
    },
  };
}

function clusterPaths(): Json {
  return {
    '/v1/cluster': { get: { summary: 'Cluster status with per-member lag and health', ...strict, parameters: [{ name: 'local', in: 'query', required: false, schema: { type: 'string' } }], responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/cluster/members': { post: { summary: 'Add a learner', ...strict, requestBody: jsonBody(schemaOf(memberBody)), responses: { 201: json({ type: 'object' }), ...errors } } },
    '/v1/cluster/members/{id}/promote': { post: { summary: 'Promote a learner to voter', ...strict, parameters: memberPath, responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/cluster/members/{id}': { delete: { summary: 'Remove a member', ...strict, parameters: memberPath, responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/cluster/leader': { post: { summary: 'Transfer leadership', ...strict, requestBody: jsonBody(schemaOf(transferBody), false), responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/cluster/snapshot': { get: { summary: 'Download a consistent snapshot (streamed)', ...strict, parameters: parametersOf(noQuery, 'query'), responses: { 200: { description: 'application/octet-stream' }, ...errors } } },
  };
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const serviceView = {
  type: 'object', properties: {
    name: { type: 'string' }, rev: { type: 'integer' }, record: ref('ServiceRecord'),
    stack: { type: ['string', 'null'], description: 'the stack that deployed it (record.source stack:NAME), or null' },
    status: { type: 'object', properties: { desired: { type: 'integer' }, running: { type: 'integer' }, serving: { type: 'integer' }, unreachable: { type: 'integer' }, tasks: { type: 'integer' }, pending: { type: 'integer' }, pendingReasons: { type: 'array', items: { type: 'string' } }, stopping: { type: 'integer' }, updating: { type: 'boolean' }, converged: { type: 'boolean' } } },
  },
};
const taskItem = {
  type: 'object', properties: {
    id: { type: 'string' }, rev: { type: 'integer' }, service: { type: 'string' }, slot: { type: ['integer', 'string'] }, nodeId: { type: ['string', 'null'] }, nodeName: { type: ['string', 'null'] },
    desired: { type: 'string' }, observed: { type: 'string' }, health: { type: ['string', 'null'] }, record: ref('TaskRecord'), report: { anyOf: [ref('TaskStatus'), { type: 'null' }] },
  },
};
const nodeView = {
  type: 'object', properties: {
    id: { type: 'string' }, name: { type: 'string' }, rev: { type: 'integer' }, record: ref('NodeRecord'), tasks: { type: 'integer' }, running: { type: 'integer' },
    reserved: { type: 'object', properties: { cpuMillis: { type: 'integer' }, memoryBytes: { type: 'integer' } } },
  },
};
const listOf = (item: Json): Json => ({ type: 'object', properties: { items: { type: 'array', items: item }, rev: { type: 'integer' } } });
const written = (extra: Json): Json => ({ type: 'object', properties: { rev: { type: ['integer', 'null'] }, ...extra } });

/** The control plane's routes (services, nodes, tasks, apply); parameters and bodies from control-schemas.ts. */
function controlPaths(): Json {
  const read = parametersOf(readOnlyQuery, 'query');
  const svc = parametersOf(serviceParams, 'path');
  const node = parametersOf(nodeParams, 'path');
  const noQ = parametersOf(noQuery, 'query');
  return {
    '/v1/apply': {
      post: {
        summary: 'Apply Service specs (documents, or a YAML/JSON text): strict, all or nothing; ?dryRun=true writes nothing', ...strict,
        parameters: parametersOf(applyQuery, 'query'), requestBody: jsonBody(schemaOf(applyBody)),
        responses: { 200: json({ type: 'object', properties: { dryRun: { type: 'boolean' }, rev: { type: ['integer', 'null'] }, services: { type: 'array', items: { type: 'object' } } } }), ...errors },
      },
    },
    '/v1/services': { get: { summary: 'List services with their status', ...strict, parameters: read, responses: { 200: json(listOf(serviceView)), ...errors } } },
    '/v1/services/{name}': {
      get: { summary: 'A service, its status and its tasks (merged observed state)', ...strict, parameters: [...svc, ...read], responses: { 200: json({ type: 'object', properties: { service: serviceView, tasks: { type: 'array', items: taskItem }, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove a service (its tasks are shut down)', ...strict, parameters: [...svc, ...noQ], responses: { 200: json(written({ name: { type: 'string' }, removed: { type: 'boolean' } })), ...errors } },
    },
    '/v1/services/{name}/scale': {
      post: { summary: 'Set the replica count', ...strict, parameters: [...svc, ...noQ], requestBody: jsonBody(schemaOf(scaleBody)), responses: { 200: json(written({ outcome: { type: 'string' }, service: serviceView })), ...errors } },
    },
    '/v1/services/{name}/rollback': {
      post: { summary: 'Roll back to the previous spec (a rolling update); force: it may go past the disruption budget', ...strict, parameters: [...svc, ...noQ], requestBody: jsonBody(schemaOf(forceObject), false), responses: { 200: json(written({ specVersion: { type: 'integer' }, service: serviceView })), ...errors } },
    },
    '/v1/services/{name}/rebalance': {
      post: { summary: 'One rebalance step: move at most one task off the fullest node (docs/control-plane.md); waits for the disruption budget unless force', ...strict, parameters: [...svc, ...noQ], requestBody: jsonBody(schemaOf(forceObject), false), responses: { 200: json(written({ state: { type: 'string', enum: ['moved', 'balanced', 'settling', 'waiting'] }, reason: { type: 'string' }, moved: { type: ['object', 'null'] }, counts: { type: 'array', items: { type: 'object' } }, forced: { type: 'boolean' } })), ...errors } },
    },
    '/v1/nodes': { get: { summary: 'List nodes with what runs on them', ...strict, parameters: read, responses: { 200: json(listOf(nodeView)), ...errors } } },
    '/v1/nodes/{ref}': {
      get: { summary: 'A node (by id or name) and its tasks', ...strict, parameters: [...node, ...read], responses: { 200: json({ type: 'object', properties: { node: nodeView, tasks: { type: 'array', items: taskItem }, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove the record of a node removed from the cluster (none of its tasks desired running); admin', ...strict, parameters: node, responses: { 200: json({ type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, removed: { type: 'boolean' }, rev: { type: 'integer' } } }), ...errors } },
    },
    '/v1/nodes/{ref}/availability': {
      post: { summary: 'Set availability: active, pause (no new tasks) or drain (move its tasks off as the disruption budgets allow; force: past them)', ...strict, parameters: [...node, ...noQ], requestBody: jsonBody(schemaOf(availabilityBody)), responses: { 200: json(written({ node: nodeView, budgets: { type: 'array', items: { type: 'object' } } })), ...errors } },
    },
    '/v1/nodes/{ref}/disruption': {
      post: { summary: 'May the node be taken away for a drill now? Refused (disruption_budget_exceeded) when a service\'s disruption budget does not allow it, unless force', ...strict, parameters: [...node, ...noQ], requestBody: jsonBody(schemaOf(disruptionBody)), responses: { 200: json(written({ node: { type: 'string' }, name: { type: 'string' }, allowed: { type: 'boolean' }, forced: { type: 'boolean' }, budgets: { type: 'array', items: { type: 'object' } } })), ...errors } },
    },
    '/v1/nodes/{ref}/labels': {
      post: { summary: 'Set and remove node labels', ...strict, parameters: [...node, ...noQ], requestBody: jsonBody(schemaOf(labelsBody)), responses: { 200: json(written({ node: nodeView })), ...errors } },
    },
    '/v1/tasks': { get: { summary: 'List tasks (filters: service, node, state), in pages by id', ...strict, parameters: parametersOf(tasksQuery, 'query'), responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: taskItem }, rev: { type: 'integer' }, next: { type: ['string', 'null'] } } }), ...errors } } },
    '/v1/tasks/{id}': { get: { summary: 'A task', ...strict, parameters: [...parametersOf(taskParams, 'path'), ...read], responses: { 200: json({ type: 'object', properties: { task: taskItem, rev: { type: 'integer' } } }), ...errors } } },
  };
}

/** The secrets' routes (secrets-routes.ts): a value goes in, never out. */
function secretPaths(): Json {
  const name = parametersOf(secretParams, 'path');
  const view = ref('SecretView');
  return {
    '/v1/secrets': { get: { summary: 'List secrets: metadata only (size, digest, version, the services that use each), never a value', ...strict, parameters: parametersOf(readOnlyQuery, 'query'), responses: { 200: json(listOf(view)), ...errors } } },
    '/v1/secrets/{name}': {
      put: {
        summary: 'Create a secret or replace its value (UTF-8 text as value, or bytes as valueBase64; at most 64 KiB)', ...strict, parameters: [...name, ...parametersOf(noQuery, 'query')],
        requestBody: jsonBody(schemaOf(secretBody)),
        responses: { 200: json(written({ outcome: { type: 'string', enum: ['created', 'updated', 'unchanged'] }, secret: schemaOf(secretViewSchema.omit({ rev: true, usedBy: true, usedByJobs: true })) })), ...errors },
      },
      get: { summary: 'A secret\'s metadata, never its value', ...strict, parameters: [...name, ...parametersOf(readOnlyQuery, 'query')], responses: { 200: json({ type: 'object', properties: { secret: view, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove a secret (refused with resource_in_use while a service or a job names it)', ...strict, parameters: [...name, ...parametersOf(noQuery, 'query')], responses: { 200: json(written({ name: { type: 'string' }, removed: { type: 'boolean' } })), ...errors } },
    },
  };
}

/** Networks and firewall policies (network-routes.ts, policy-routes.ts); created by POST /v1/apply. */
function networkPaths(): Json {
  const read = parametersOf(readOnlyQuery, 'query');
  const name = parametersOf(networkParams, 'path');
  const noQ = parametersOf(noQuery, 'query');
  const obj = { type: 'object' };
  const removed = json({ type: 'object', properties: { name: { type: 'string' }, removed: { type: 'boolean' }, rev: { type: ['integer', 'null'] } } });
  return {
    '/v1/networks': { get: { summary: 'List overlay networks with their allocation', ...strict, parameters: read, responses: { 200: json(listOf(obj)), ...errors } } },
    '/v1/networks/{name}': {
      get: { summary: 'A network: spec, slices per node, addresses, attached services', ...strict, parameters: [...name, ...read], responses: { 200: json({ type: 'object', properties: { network: obj, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove a network (refused while a service names it)', ...strict, parameters: [...name, ...noQ], responses: { 200: removed, ...errors } },
    },
    '/v1/firewall-policies': { get: { summary: 'List firewall policies', ...strict, parameters: read, responses: { 200: json(listOf(obj)), ...errors } } },
    '/v1/firewall-policies/{name}': {
      get: { summary: 'A firewall policy', ...strict, parameters: [...name, ...read], responses: { 200: json({ type: 'object', properties: { policy: obj, rev: { type: 'integer' } } }), ...errors } },
      delete: { summary: 'Remove a firewall policy (what it allowed closes on every node, connections included)', ...strict, parameters: [...name, ...noQ], responses: { 200: removed, ...errors } },
    },
  };
}

/** The log routes (logs-routes.ts): streamed text or NDJSON, not JSON documents. */
function logPaths(): Json {
  const lines = {
    description: 'The lines: text/plain (as the container wrote them), or with format=json application/x-ndjson, one {at, stream, text} object per line (a service\'s with task, slot and node); a failure after the first line is a last {error} object',
    content: { 'text/plain': { schema: { type: 'string' } }, 'application/x-ndjson': { schema: { type: 'string' } } },
  };
  const q = parametersOf(logsQuery, 'query');
  return {
    '/v1/tasks/{id}/logs': { get: { summary: "A task's container log, from the node that runs it (streamed; follow=true until it stops)", ...strict, parameters: [...parametersOf(taskParams, 'path'), ...q], responses: { 200: lines, ...errors } } },
    '/v1/services/{name}/logs': { get: { summary: "The logs of a service's running tasks, merged, each line prefixed by its task", ...strict, parameters: [...parametersOf(serviceParams, 'path'), ...q], responses: { 200: lines, ...errors } } },
  };
}

function browsePaths(): Json {
  const history = { type: 'object', properties: { collection: { type: 'string' }, id: { type: 'string' }, oldestRev: { type: 'integer' }, rev: { type: 'integer' }, items: { type: 'array', items: { type: 'object', properties: { rev: { type: 'integer' }, type: { enum: ['put', 'delete'] }, doc: { type: 'object' } } } } } };
  const collections = { type: 'object', properties: { items: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, documents: { type: 'integer' } } } }, rev: { type: 'integer' } } };
  const file = (type: string) => ({ 200: { description: type }, 304: { description: 'Not modified (If-None-Match)' }, ...errors });
  return {
    '/v1/collections': { get: { summary: 'The collections that hold documents, with their document counts', ...strict, parameters: parametersOf(readQuery, 'query'), responses: { 200: json(collections), ...errors } } },
    '/v1/docs/{collection}/{id}/history': {
      get: { summary: "A document's retained changes, oldest first (as far back as the event tail reaches)", ...strict, parameters: [...parametersOf(docParams, 'path'), ...parametersOf(readQuery, 'query')], responses: { 200: json(history), ...errors } },
    },
    '/ui': { get: { summary: 'The web console (redirects to /ui/)', responses: { 308: { description: 'Redirect to /ui/' } } } },
    '/ui/': { get: { summary: "The web console's page", responses: file('text/html') } },
    '/ui/app.js': { get: { summary: "The web console's script", responses: file('text/javascript') } },
    '/ui/app.css': { get: { summary: "The web console's style sheet", responses: file('text/css') } },
  };
}

/** The drills' routes (drill-routes.ts). */
function drillPaths(): Json {
  return {
    '/v1/mesh/rotate-key': { post: { summary: 'This node replaces its WireGuard key pair (the new public key committed to its record first); admin', ...strict, requestBody: jsonBody(schemaOf(z.strictObject({}))), responses: { 200: json(schemaOf(rotateKeyAnswer)), ...errors } } },
    '/v1/drill/actions': { post: { summary: 'This node carries out a drill fault on itself (kill, isolate, pause, disk-stall, reboot); admin', ...strict, requestBody: jsonBody(schemaOf(drillActionSchema)), responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/drills': {
      post: { summary: 'Keep a drill report in the store (shoal.drills)', ...strict, requestBody: jsonBody(schemaOf(drillReportSchema)), responses: { 200: json({ type: 'object' }), ...errors } },
      get: { summary: 'The drill reports kept, newest first', ...strict, parameters: parametersOf(drillsListQuery, 'query'), responses: { 200: json({ type: 'object' }), ...errors } },
    },
  };
}

/** The receiving side of a rolling upgrade (upgrade-routes.ts); node-local, never forwarded. */
function upgradePaths(): Json {
  const tarball = { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary', description: 'an npm pack tarball of shoal, at most 200 MiB' } } } };
  return {
    '/v1/upgrade': { get: { summary: "This node's releases: running, current, previous, and every release received", ...strict, responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/upgrade/build': { put: { summary: 'Receive a build (sha256 checked before unpacking), make it runnable, check it starts, keep it as a release; admin', ...strict, parameters: parametersOf(buildQuery, 'query'), requestBody: tarball, responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/upgrade/activate': { post: { summary: 'Point releases/current at a release, then stop gracefully and exit 10 so the service manager starts it; admin', ...strict, requestBody: jsonBody(schemaOf(activateBody)), responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/upgrade/rollback': { post: { summary: 'Swap releases/current and releases/previous, then restart the same way; admin', ...strict, requestBody: jsonBody(schemaOf(rollbackBody), false), responses: { 200: json({ type: 'object' }), ...errors } } },
  };
}

function nodePaths(): Json {
  const probe = json({ type: 'object', required: ['ok'], properties: { ok: { type: 'boolean' }, code: { type: 'string' }, reason: { type: 'string' }, version: { type: 'string' } } });
  return {
    '/healthz': { get: { summary: 'Liveness: 503 with {ok:false, code, reason} once the node cannot serve', responses: { 200: probe, 503: probe } } },
    '/readyz': { get: { summary: 'Readiness; ?sync waits until applied what the leader committed', parameters: [{ name: 'sync', in: 'query', required: false, schema: { type: 'string' } }], responses: { 200: probe, 503: probe } } },
    '/metrics': { get: { summary: 'Prometheus metrics', responses: { 200: { description: 'text/plain' } } } },
    '/docs': { get: { summary: 'This OpenAPI document', responses: { 200: json({ type: 'object' }) } } },
    '/docs/openapi.json': { get: { summary: 'This OpenAPI document', responses: { 200: json({ type: 'object' }) } } },
  };
}

const auditRecordSchema = {
  type: 'object',
  required: ['id', 'principal', 'op', 'resources', 'resourceCount', 'result', 'term', 'index', 'timeMs'],
  properties: {
    id: { type: 'string' }, principal: { type: 'string' }, role: { type: 'string', enum: ['admin', 'operator', 'reader'], description: 'the role the caller was authenticated with (from feature level 5)' },
    op: { type: 'string', enum: ['put', 'delete', 'txn', 'retain'] },
    resources: { type: 'array', items: { type: 'string' }, maxItems: 20 }, resourceCount: { type: 'integer' },
    result: { type: 'string', description: "'ok' or the error code the command was refused with" }, succeeded: { type: 'boolean' },
    term: { type: 'integer' }, index: { type: 'integer' }, timeMs: { type: 'integer', description: "the entry's log time" }, idempotencyKey: { type: 'string' },
  },
};
const auditPageSchema = { type: 'object', properties: { items: { type: 'array', items: auditRecordSchema }, next: { type: ['integer', 'null'] }, rev: { type: 'integer' } } };

function securityPaths(): Json {
  const credential = { type: 'object', properties: { id: { type: 'string' }, principal: { type: 'string' }, role: { type: 'string' }, createdBy: { type: 'string' }, createdAtMs: { type: 'integer' }, expiresAtMs: { type: ['integer', 'null'], description: 'when the token stops working; null: never' }, expired: { type: 'boolean' }, label: { type: ['string', 'null'] }, rev: { type: 'integer' } } };
  return {
    '/v1/credentials': {
      post: { summary: 'Create a bearer token (shown once in the answer)', ...strict, parameters: parametersOf(noQuery, 'query'), requestBody: jsonBody(schemaOf(createCredentialBody)), responses: { 201: json({ ...credential, properties: { ...credential.properties, token: { type: 'string' } } }), ...errors } },
      get: { summary: 'List bearer tokens (never their secrets)', ...strict, parameters: parametersOf(readQuery, 'query'), responses: { 200: json({ type: 'object', properties: { items: { type: 'array', items: credential }, rev: { type: 'integer' } } }), ...errors } },
    },
    '/v1/credentials/{id}': { delete: { summary: 'Revoke a bearer token', ...strict, parameters: [...parametersOf(credentialParams, 'path'), ...parametersOf(noQuery, 'query')], responses: { 200: json({ type: 'object' }), ...errors } } },
    '/v1/audit': { get: { summary: 'Audit records of client mutations, oldest first (docs/security.md, "Audit")', ...strict, parameters: parametersOf(auditQuery, 'query'), responses: { 200: json(auditPageSchema), ...errors } } },
  };
}

export function openApiDocument(version: string): Json {
  return {
    openapi: '3.1.0',
    info: { title: 'shoal client API', version, description: 'See docs/api.md for consistency, idempotency, watch semantics and bounds.' },
    components: {
      schemas: {
        Error: errorSchema, Doc: docSchema, Txn: schemaOf(txnBodySchema),
        NodeRecord: schemaOf(nodeRecordSchema), ServiceRecord: schemaOf(serviceRecordSchema), TaskRecord: schemaOf(taskRecordSchema), TaskStatus: schemaOf(taskStatusSchema),
        SecretView: schemaOf(secretViewSchema),
      },
    },
    paths: {
      ...docPaths(), ...clusterPaths(), ...controlPaths(), ...secretPaths(), ...networkPaths(), ...logPaths(), ...browsePaths(), ...nodePaths(), ...securityPaths(), ...joinPaths(errors), ...drillPaths(), ...upgradePaths(), ...certPaths(errors), ...caPaths(errors),
      ...seriesPaths(errors),
      ...stackPaths(errors),
      ...jobPaths(errors),
      ...registryPaths(errors),
      ...backupPaths(errors),
      ...vipPaths(errors),
      ...volumePaths(errors),
    },
  };
}

/**
 * Names on each operation the role its route declares (`x-shoal-role`), read from the routes as
 * registered: the document cannot claim a role the server does not enforce.
 */
export function withRoles(doc: Json, routes: RouteTable): Json {
  const paths = doc.paths as Record<string, Record<string, Json>>;
  for (const [p, ops] of Object.entries(paths)) {
    const url = p.replace(/\{([^}]+)\}/g, ':$1');
    for (const [method, op] of Object.entries(ops)) {
      const role = routes.roleOf(method, url);
      if (role !== undefined) op['x-shoal-role'] = role;
    }
  }
  return doc;
}
