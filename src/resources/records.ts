// The control plane's stored resources: nodes, services and tasks, as documents of the
// replicated store.
//
// Every field is always present; "none" is null, never an absent key, because the store holds
// JSON (where `undefined` does not exist) and because code reading a record should never have
// to ask whether a field was written. Times are *log time* in milliseconds: the leader's stamp
// on the entry that wrote them (fsm/store.ts), so they never go back across a change of leader
// and every node stores the same value.
//
// The zod schemas validate records where bytes come in (the API, reading the store back); a
// compile-time check keeps each schema identical to its interface.

import { z } from 'zod';
import { hostPortSchema } from '../base/host-port.ts';
import { labelKeyPattern, labelValuePattern } from './spec/constraint.ts';
import { serviceSpecSchema, type Assert, type Same, type ServiceSpec } from './spec/service-spec.ts';

export type Availability = 'active' | 'pause' | 'drain';
export type NodeState = 'ready' | 'suspect' | 'down';
export type RuntimeStatus = 'up' | 'unavailable' | 'unknown';

export interface NodeRecord {
  /** The node's stable id: its Raft member id. The scheduler breaks ties by it. */
  id: string;
  /** The name people use (`n2`, `pi-kitchen`); unique in the cluster; constraints can name it. */
  name: string;
  addresses: {
    /** The client API, host:port. */
    api: string;
    /** The peer (Raft) transport, host:port. */
    peer: string;
  };
  /** What the scheduler may hand out on this node: read from the machine at start, overridable in its config. */
  capacity: {
    /** Millicores (1000 = one core). */
    cpuMillis: number;
    memoryBytes: number;
  };
  /** Operator-set labels, matched by constraints and `placement.spreadOver`. */
  labels: Record<string, string>;
  /**
   * Set by the operator. active: takes new tasks; pause: keeps its tasks, takes no new ones;
   * drain: its tasks are moved off, and it takes no new ones.
   */
  availability: Availability;
  /**
   * Set by the leader's node-health loop from last contact. ready: in contact; suspect: silent
   * for a while, takes no new tasks, keeps its own; down: declared lost, its tasks replaced.
   */
  state: NodeState;
  /**
   * Raised by one each time the leader declares the node down. Tasks and containers carry the
   * epoch they were placed in; reports from an older epoch are ignored, and a node that comes
   * back removes its containers of older epochs before starting anything (design.md, Fencing).
   */
  epoch: number;
  /** The node's container runtime, as its agent reports it. */
  runtime: {
    /** up: usable; unavailable: the agent cannot reach it; unknown: no report yet. */
    status: RuntimeStatus;
    /** Why it is unavailable, as the agent saw it; null when up or unknown. */
    error: string | null;
  };
  /** The shoal release the node runs (`0.1.0`), for upgrades and feature levels. */
  softwareVersion: string;
  /** The node's part in the WireGuard mesh (docs/network.md); null when it takes none (no `mesh` in its config). */
  mesh: NodeMesh | null;
  /** The machine's platform (issue 40), written by the node from feature level 6; absent before (placement then does not check it). */
  platform?: Platform;
  /**
   * Whether the node runs the routing mesh (config ingress.enabled with the docker runtime;
   * docs/network.md "Ingress"), written by the node from feature level 6; absent: not said (a
   * record of an older release). Apply warns when no node runs it.
   */
  ingress?: boolean;
}

/** An OS and CPU architecture, as Docker and image indexes name them (`linux`, `amd64` / `arm64` + `v8` / `arm` + `v7`). */
export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

/** The platforms the image of one spec offers, as its registry's index said when apply pinned it. */
export interface ImagePlatforms {
  /** The pinned image (`name:tag@sha256:...`), as the spec names it. */
  image: string;
  platforms: Platform[];
}

/**
 * A node's WireGuard identity and what it sees of its peers. The node writes everything but
 * `address`, which only the leader writes (allocated from the mesh range, never changed after).
 */
export interface NodeMesh {
  /** The node's WireGuard public key (base64). The private key never leaves the node. */
  publicKey: string;
  /** Where peers send to: host:port, UDP. */
  endpoint: string;
  /** The node's mesh address (`10.212.0.3`), from the leader; null until allocated. */
  address: string | null;
  /** The node's WireGuard peers as it last read them (`wg show dump`), by peer node id. */
  peers: MeshPeerStatus[];
  /** The node's wall-clock ms when it read them (display only); null before the first report. */
  reportedAt: number | null;
}

export interface MeshPeerStatus {
  nodeId: string;
  /** Wall-clock ms (the reporting node's clock) of the latest handshake; null if none yet. */
  latestHandshakeAt: number | null;
  rxBytes: number;
  txBytes: number;
}

export type UpdateState = 'none' | 'updating' | 'paused' | 'completed' | 'rolling-back' | 'rollback-paused' | 'rolled-back';

export interface ServiceUpdateStatus {
  /**
   * none: never updated; updating: replacing tasks batch by batch; paused: stopped after a
   * failed batch (failureAction pause) or by hand; completed: every task runs the spec;
   * rolling-back / rollback-paused / rolled-back: the same, going back to previousSpec.
   */
  state: UpdateState;
  /** Log time the current (or last) update began; null if none. */
  startedAt: number | null;
  /** Log time it completed, paused for good or rolled back; null while running or if none. */
  completedAt: number | null;
  /** Why it paused or rolled back (`task web.2 exited 1 within monitor`); null otherwise. */
  message: string | null;
}

/**
 * A voluntary disruption someone let go past the service's disruption budget (`--force`,
 * `force: true`): kept on the record while the forced work goes on, so the leader lets it through
 * and `service inspect` shows it (src/control/disruption-budget.ts).
 */
export interface ForcedDisruption {
  /** update: a rolling update or rollback to `specVersion`; drain: the moves off `nodeId`; rebalance, drill: one action on `nodeId`. */
  cause: 'update' | 'drain' | 'rebalance' | 'drill';
  /** The node drained, moved off or drilled; null for an update. */
  nodeId: string | null;
  /** The spec version the forced update goes to; null for the other causes. */
  specVersion: number | null;
  /** Log time it was forced. */
  at: number;
  /** Who forced it (the principal), or null when unknown. */
  by: string | null;
  /** What went past the budget, for people: the budget and what was unavailable then. */
  message: string;
}

export interface ServiceRecord {
  /** The service's name (spec.name), also its document id. */
  name: string;
  /** The current spec, normalized: every default filled in (spec/service-spec.ts). */
  spec: ServiceSpec;
  /** 1 at creation, raised by one on every change of spec (including a rollback). Tasks record the version they run. */
  specVersion: number;
  /** The spec before the last change, kept for rollback; null until the first change. */
  previousSpec: ServiceSpec | null;
  /** The version previousSpec had; null when previousSpec is null. */
  previousSpecVersion: number | null;
  /** The rolling update of this service (spec.update is its policy). */
  updateStatus: ServiceUpdateStatus;
  /**
   * The apply source that created it (`shoal apply --prune` names one; by default the spec file's
   * name), or null. A pruning apply of that source removes the services of it that it no longer
   * names, and only those.
   */
  source: string | null;
  /** Voluntary disruptions forced past the budget and not over yet (oldest first; at most forcedDisruptionsMax). */
  forcedDisruptions: ForcedDisruption[];
  /** What the images of spec and previousSpec offer (issue 40: placement checks the node's platform); absent when apply pinned none. */
  imagePlatforms?: ImagePlatforms[];
  /** Log time of creation, and of the last change to this record. */
  createdAt: number;
  updatedAt: number;
}

export type DesiredTaskState = 'running' | 'shutdown';
export type ObservedTaskState = 'pending' | 'assigned' | 'starting' | 'running' | 'failed' | 'shutdown' | 'orphaned';

export interface TaskRecord {
  /** Unique, never reused (a replacement is a new task in the same slot). */
  id: string;
  /** The service's name. */
  service: string;
  /**
   * Which of the service's tasks this is: 1..replicas for a replicated service; the node id
   * for a global one (one slot per node). A replacement takes the slot of the task it replaces.
   */
  slot: number | string;
  /** The service's specVersion this task runs. */
  specVersion: number;
  /** The node it is assigned to; null while pending. */
  nodeId: string | null;
  /** What the leader wants: running, or shutdown (stop it; the task is finished). */
  desired: DesiredTaskState;
  /**
   * What is known. pending: not placed (see pendingReason); assigned: placed, the agent has
   * not started it; starting; running; failed: exited or could not start (exitCode, message);
   * shutdown: stopped on purpose; orphaned: its node went down and its fate is unknown.
   */
  observed: ObservedTaskState;
  /** The leader term of the loop that assigned it; null while pending. */
  assignedTerm: number | null;
  /** The node's epoch when it was assigned; null while pending. Reports of older epochs are ignored. */
  nodeEpoch: number | null;
  /** The runtime's container id, once created; null before. */
  containerId: string | null;
  /** The container's exit code once it exited; null otherwise. */
  exitCode: number | null;
  /** The last thing worth telling a person (a start error, an exit, a health failure); null if none. */
  message: string | null;
  /** Why the scheduler could not place it (`3 nodes without 2 GiB memory free; ...`); null once placed. */
  pendingReason: string | null;
  /** 0 for a slot's first task, and one more for each replacement after a failure (restart backoff counts it). */
  attempt: number;
  /** Log times: created, assigned to a node, seen running, finished (failed or shut down), last changed. */
  createdAt: number;
  assignedAt: number | null;
  startedAt: number | null;
  finishedAt: number | null;
  updatedAt: number;
}

export type ReportedTaskState = 'starting' | 'running' | 'failed' | 'shutdown';

/**
 * What a node's agent reports of one task: its own document (`shoal.task-status/<taskId>`), so the
 * agent is its only writer and its reports never conflict with the leader's writes to the task.
 * A report is applied only while `nodeEpoch` is the node's current epoch (a compare on the node
 * record in the same transaction), so a node declared down cannot overwrite what the leader
 * decided meanwhile. The task's observed state is this state when a report exists, otherwise the
 * leader's (pending, assigned, orphaned).
 */
export interface TaskStatus {
  taskId: string;
  nodeId: string;
  /** The node's epoch the agent ran the task under. */
  nodeEpoch: number;
  state: ReportedTaskState;
  containerId: string | null;
  exitCode: number | null;
  /** The health check's verdict; null when the service has none. A task with a health check counts as running only when healthy. */
  health: 'starting' | 'healthy' | 'unhealthy' | null;
  /** A start error, an exit, a health failure, `image_pull_failed: ...`; null if none. */
  message: string | null;
  /** Wall-clock ms from the runtime (display only; loops never compare them across nodes). */
  startedAt: number | null;
  finishedAt: number | null;
}



/** The spec a task runs: the service's current one, or the previous one during an update; null if neither. */
export function specForTask(service: ServiceRecord, task: TaskRecord): ServiceSpec | null {
  if (task.specVersion === service.specVersion) return service.spec;
  if (task.specVersion === service.previousSpecVersion) return service.previousSpec;
  return null;
}

const nat = z.number().int().min(0);
const logTime = nat;
const nonEmpty = z.string().min(1);

export const labelsSchema = z.record(
  z.string().regex(labelKeyPattern, 'not a label key (letters, digits, and . _ - / inside)'),
  z.string().regex(labelValuePattern, 'not a label value (no spaces, commas, quotes or parentheses)'),
);

function nodeMeshSchema() {
  return z.object({
    publicKey: z.string().regex(/^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/, 'a WireGuard key (32 bytes in base64)'),
    endpoint: hostPortSchema,
    address: z.string().regex(/^\d{1,3}(\.\d{1,3}){3}$/, 'an IPv4 address').nullable(),
    peers: z.array(z.object({ nodeId: nonEmpty, latestHandshakeAt: nat.nullable(), rxBytes: nat, txBytes: nat }).strict()).max(1000),
    reportedAt: nat.nullable(),
  }).strict();
}

export const platformSchema = z.object({
  os: z.string().min(1).max(32), architecture: z.string().min(1).max(32), variant: z.string().min(1).max(32).optional(),
}).strict();

/** What a service's (or a job's, jobs.ts) pinned images offer: at most the spec's and the previous spec's. */
export const imagePlatformsSchema = z.array(z.object({ image: nonEmpty, platforms: z.array(platformSchema).max(64) }).strict()).max(2);

export const nodeRecordSchema = z.object({
  id: nonEmpty,
  name: nonEmpty,
  addresses: z.object({ api: nonEmpty, peer: nonEmpty }).strict(),
  capacity: z.object({ cpuMillis: nat, memoryBytes: nat }).strict(),
  labels: labelsSchema,
  availability: z.enum(['active', 'pause', 'drain']),
  state: z.enum(['ready', 'suspect', 'down']),
  epoch: nat,
  runtime: z.object({ status: z.enum(['up', 'unavailable', 'unknown']), error: z.string().nullable() }).strict(),
  softwareVersion: nonEmpty,
  // Absent in records written before the mesh existed: read as null.
  mesh: nodeMeshSchema().nullable().default(null),
  platform: platformSchema.optional(),
  ingress: z.boolean().optional(),
}).strict();

export const serviceUpdateStatusSchema = z.object({
  state: z.enum(['none', 'updating', 'paused', 'completed', 'rolling-back', 'rollback-paused', 'rolled-back']),
  startedAt: logTime.nullable(),
  completedAt: logTime.nullable(),
  message: z.string().nullable(),
}).strict();

/** Forced disruptions a service record keeps at most (the oldest go first). */
export const forcedDisruptionsMax = 16;

export const forcedDisruptionSchema = z.object({
  cause: z.enum(['update', 'drain', 'rebalance', 'drill']),
  nodeId: nonEmpty.nullable(),
  specVersion: z.number().int().min(1).nullable(),
  at: logTime,
  by: z.string().max(256).nullable(),
  message: z.string().max(1024),
}).strict();

export const serviceRecordSchema = z.object({
  name: nonEmpty,
  spec: serviceSpecSchema,
  specVersion: z.number().int().min(1),
  previousSpec: serviceSpecSchema.nullable(),
  previousSpecVersion: z.number().int().min(1).nullable(),
  updateStatus: serviceUpdateStatusSchema,
  source: z.string().min(1).max(128).nullable(),
  // Records written before disruption budgets existed have none.
  forcedDisruptions: z.array(forcedDisruptionSchema).max(forcedDisruptionsMax).default([]),
  imagePlatforms: imagePlatformsSchema.optional(),
  createdAt: logTime,
  updatedAt: logTime,
}).strict().refine((r) => r.name === r.spec.name, { path: ['name'], message: 'must equal spec.name' })
  .refine((r) => (r.previousSpec === null) === (r.previousSpecVersion === null), { path: ['previousSpecVersion'], message: 'is null exactly when previousSpec is' });

export const taskRecordSchema = z.object({
  id: nonEmpty,
  service: nonEmpty,
  slot: z.union([z.number().int().min(1), nonEmpty]),
  specVersion: z.number().int().min(1),
  nodeId: nonEmpty.nullable(),
  desired: z.enum(['running', 'shutdown']),
  observed: z.enum(['pending', 'assigned', 'starting', 'running', 'failed', 'shutdown', 'orphaned']),
  assignedTerm: nat.nullable(),
  nodeEpoch: nat.nullable(),
  containerId: nonEmpty.nullable(),
  exitCode: z.number().int().nullable(),
  message: z.string().nullable(),
  pendingReason: z.string().nullable(),
  attempt: nat,
  createdAt: logTime,
  assignedAt: logTime.nullable(),
  startedAt: logTime.nullable(),
  finishedAt: logTime.nullable(),
  updatedAt: logTime,
}).strict();

export type _NodeRecordMatchesSchema = Assert<Same<z.infer<typeof nodeRecordSchema>, NodeRecord>>;
export type _ForcedDisruptionMatchesSchema = Assert<Same<z.infer<typeof forcedDisruptionSchema>, ForcedDisruption>>;
export type _ServiceRecordMatchesSchema = Assert<Same<z.infer<typeof serviceRecordSchema>, ServiceRecord>>;
export type _TaskRecordMatchesSchema = Assert<Same<z.infer<typeof taskRecordSchema>, TaskRecord>>;

export const taskStatusSchema = z.object({
  taskId: nonEmpty,
  nodeId: nonEmpty,
  nodeEpoch: nat,
  state: z.enum(['starting', 'running', 'failed', 'shutdown']),
  containerId: nonEmpty.nullable(),
  exitCode: z.number().int().nullable(),
  health: z.enum(['starting', 'healthy', 'unhealthy']).nullable(),
  message: z.string().nullable(),
  startedAt: nat.nullable(),
  finishedAt: nat.nullable(),
}).strict();

export type _TaskStatusMatchesSchema = Assert<Same<z.infer<typeof taskStatusSchema>, TaskStatus>>;
