// The control plane's answers as the CLI reads them (services, nodes, tasks, apply), validated
// loosely: the fields the commands print are checked, the rest is passed through (`--json` prints
// the answer as the node sent it), so a newer node that adds fields still reads.

import { z } from 'zod';
import { request, retryNotice, type RequestOptions } from './client.ts';

const serviceRecordSchema = z.object({
  name: z.string(),
  spec: z.object({
    name: z.string(), image: z.string(), mode: z.enum(['replicated', 'global']), replicas: z.number().nullable(),
  }).loose(),
  specVersion: z.number(),
  previousSpecVersion: z.number().nullable(),
  updateStatus: z.object({ state: z.string(), message: z.string().nullable() }).loose(),
}).loose();

export const serviceStatusSchema = z.object({
  desired: z.number(), running: z.number(), tasks: z.number(), pending: z.number(), pendingReasons: z.array(z.string()),
  stopping: z.number(), updating: z.boolean(), converged: z.boolean(),
  // Absent from nodes older than these counts.
  serving: z.number().optional(), unreachable: z.number().optional(),
  // Absent from nodes older than disruption budgets.
  disruption: z.object({
    limit: z.string(), maxUnavailable: z.number(), allowed: z.number(), waiting: z.string().nullable(),
    unavailable: z.array(z.object({ slot: z.string(), why: z.string() }).loose()),
    forced: z.array(z.object({ cause: z.string(), nodeId: z.string().nullable(), specVersion: z.number().nullable(), at: z.number(), by: z.string().nullable(), message: z.string() }).loose()),
  }).loose().optional(),
}).loose();

export const serviceViewSchema = z.object({ name: z.string(), rev: z.number(), record: serviceRecordSchema, status: serviceStatusSchema }).loose();
export type ServiceView = z.infer<typeof serviceViewSchema>;

export const taskItemSchema = z.object({
  id: z.string(), rev: z.number(), service: z.string(), slot: z.union([z.number(), z.string()]), nodeId: z.string().nullable(), nodeName: z.string().nullable(),
  desired: z.string(), observed: z.string(), health: z.string().nullable(),
  record: z.object({ specVersion: z.number(), message: z.string().nullable(), pendingReason: z.string().nullable(), createdAt: z.number(), exitCode: z.number().nullable() }).loose(),
  /** The agent's latest report (its message may be newer than the record's). */
  report: z.object({ message: z.string().nullable() }).loose().nullable().optional(),
}).loose();
export type TaskItem = z.infer<typeof taskItemSchema>;

export const nodeViewSchema = z.object({
  id: z.string(), name: z.string(), rev: z.number(), tasks: z.number(), running: z.number(),
  reserved: z.object({ cpuMillis: z.number(), memoryBytes: z.number() }).loose(),
  record: z.object({
    availability: z.string(), state: z.string(), epoch: z.number(), labels: z.record(z.string(), z.string()),
    capacity: z.object({ cpuMillis: z.number(), memoryBytes: z.number() }).loose(),
    runtime: z.object({ status: z.string(), error: z.string().nullable() }).loose(),
    softwareVersion: z.string(), addresses: z.object({ api: z.string() }).loose(),
  }).loose(),
}).loose();
export type NodeView = z.infer<typeof nodeViewSchema>;

export const serviceListSchema = z.object({ items: z.array(serviceViewSchema), rev: z.number() }).loose();
export const serviceDetailSchema = z.object({ service: serviceViewSchema, tasks: z.array(taskItemSchema), rev: z.number() }).loose();
export const nodeListSchema = z.object({ items: z.array(nodeViewSchema), rev: z.number() }).loose();
export const nodeDetailSchema = z.object({ node: nodeViewSchema, tasks: z.array(taskItemSchema), rev: z.number() }).loose();
export const taskPageSchema = z.object({ items: z.array(taskItemSchema), rev: z.number(), next: z.string().nullable() }).loose();
export const taskDetailSchema = z.object({ task: taskItemSchema, rev: z.number() }).loose();

export const applyOutcomeSchema = z.object({
  name: z.string(), outcome: z.enum(['created', 'updated', 'unchanged', 'removed']), change: z.enum(['scale', 'replace']).optional(),
  replaces: z.array(z.string()).optional(), fields: z.array(z.string()).optional(), specVersion: z.number(), forced: z.boolean().optional(),
}).loose();
export type ApplyOutcome = z.infer<typeof applyOutcomeSchema>;
const resourceOutcomeSchema = z.object({ name: z.string(), outcome: z.string() }).loose();
/** What digest pinning did with one image (src/api/image-resolution.ts): a service's or a job's. */
export const imageResolutionSchema = z.object({
  service: z.string().optional(), job: z.string().optional(), requested: z.string(), image: z.string(), outcome: z.string(), digest: z.string().nullable(),
}).loose();

/** The line `shoal apply`, `service update` and `stack deploy` print for an image pinned now; null for the others. */
export function pinnedLine(i: z.infer<typeof imageResolutionSchema>): string | null {
  return i.outcome === 'resolved' ? `${i.service ?? `job ${i.job ?? ''}`}: image ${i.requested} pinned to ${i.digest ?? ''}` : null;
}

export const applyAnswerSchema = z.object({
  dryRun: z.boolean(), rev: z.number().nullable(), services: z.array(applyOutcomeSchema),
  networks: z.array(resourceOutcomeSchema).optional(), firewallPolicies: z.array(resourceOutcomeSchema).optional(),
  jobs: z.array(resourceOutcomeSchema).optional(),
  images: z.array(imageResolutionSchema).optional(),
  warnings: z.array(z.string()).optional(),
}).loose();
export type ApplyAnswer = z.infer<typeof applyAnswerSchema>;

export const writtenServiceSchema = z.object({ rev: z.number().nullable(), service: serviceViewSchema.nullable() }).loose();
/** Per service a drain touches (POST /v1/nodes/NODE/availability, POST /v1/nodes/NODE/disruption). */
export const drainBudgetSchema = z.object({
  service: z.string(), limit: z.string(), maxUnavailable: z.number(), unavailable: z.number(), allowed: z.number(), moves: z.number(),
  forced: z.boolean(), waiting: z.string().nullable(),
}).loose();
export type DrainBudget = z.infer<typeof drainBudgetSchema>;
export const writtenNodeSchema = z.object({ rev: z.number().nullable(), node: nodeViewSchema.nullable(), budgets: z.array(drainBudgetSchema).optional() }).loose();
export const rebalanceSchema = z.object({
  state: z.enum(['moved', 'balanced', 'settling', 'waiting']), reason: z.string(), rev: z.number().nullable(), forced: z.boolean().optional(),
  moved: z.object({ task: z.string(), slot: z.union([z.number(), z.string()]), from: z.object({ name: z.string() }).loose(), to: z.object({ name: z.string() }).loose() }).loose().nullable(),
  counts: z.array(z.object({ nodeName: z.string(), tasks: z.number() }).loose()),
}).loose();

const enc = encodeURIComponent;

/** A read, retried while the cluster cannot serve; `stale` reads the node's local copy. */
export function read<T>(addr: string, path: string, schema: z.ZodType<T>, command: string, stale = false, query: RequestOptions['query'] = {}): Promise<T> {
  return request(addr, 'GET', path, schema, { query: { ...query, consistency: stale ? 'stale' : undefined }, retry: 'safe', onRetry: retryNotice(command) }).then((a) => a.body);
}

export const paths = {
  services: '/v1/services',
  service: (name: string): string => `/v1/services/${enc(name)}`,
  nodes: '/v1/nodes',
  node: (ref: string): string => `/v1/nodes/${enc(ref)}`,
  tasks: '/v1/tasks',
  task: (id: string): string => `/v1/tasks/${enc(id)}`,
};
