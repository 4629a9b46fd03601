// The scheduler's input and output. It reads records and returns decisions; it writes nothing.

import type { NodeRecord, Platform, TaskRecord } from '../../resources/records.ts';
import type { ServiceSpec } from '../../resources/spec/service-spec.ts';
import type { NodeRole } from '../../resources/spec/constraint.ts';

/** A node record with its role when the caller knows the voters (roles.ts); what the filters see. */
export type RoledNode = NodeRecord & { role?: NodeRole };

/**
 * A task with the spec it runs (or would run): the spec of the task's specVersion, which during
 * an update may be the service's previous one (resources.ts, specForTask). The scheduler reads
 * the task's id, service, slot, node and desired state, and the spec's resources, ports,
 * constraints, placement, maxPerNode and mode.
 */
export interface TaskWithSpec {
  task: TaskRecord;
  spec: ServiceSpec;
  /** The platforms the spec's image offers (issue 40; ServiceRecord.imagePlatforms); absent or empty: any node's. */
  platforms?: readonly Platform[];
  /** Its replicated volume's holders (issue 41, resources/volumes.ts volumePlacement); absent: any node. */
  volume?: VolumeNodes;
}

/** The only nodes a task with a replicated volume may start on, and why (for the pending reason). */
export interface VolumeNodes {
  /** The volume's name. */
  name: string;
  /** The nodes that hold its newest complete copy, or its live volume. */
  nodes: readonly string[];
  /** The version they hold, as versionName writes it; null: the writer's live volume only (no copy yet). */
  version: string | null;
}

export interface ScheduleInput {
  /** Every node of the cluster, in any order. */
  nodes: readonly NodeRecord[];
  /**
   * The tasks already known, in any order. Those desired running and assigned to a node use
   * that node's capacity, ports and per-service counts. Tasks also listed in `pending` are
   * ignored here.
   */
  tasks: readonly TaskWithSpec[];
  /** The tasks to place, in any order (their current nodeId, if any, is ignored). */
  pending: readonly TaskWithSpec[];
  /** The raft voters, for `node.role` constraints (ControlState.voters); absent: roles not known. */
  voters?: ReadonlySet<string>;
}

export interface Placement {
  taskId: string;
  nodeId: string;
}

export interface Unplaced {
  taskId: string;
  /** For people, and TaskRecord.pendingReason: `3 nodes without 2 GiB memory free; 2 nodes excluded by constraint ...`. */
  reason: string;
}

export interface ScheduleResult {
  /** In the order they were made (largest reservations first, then by service, slot and id). */
  placements: Placement[];
  /** Sorted by task id. */
  unplaced: Unplaced[];
}

/**
 * What a task asks of a node, read once from its spec. The rejections a filter can return are
 * made here too, once per spec, so that checking a node never formats a message.
 */
export interface TaskDemand {
  service: string;
  cpuMillis: number;
  memoryBytes: number;
  /** Host ports it binds, as `80/tcp`. */
  ports: readonly string[];
  constraints: ServiceSpec['constraints'];
  maxPerNode: number | null;
  strategy: ServiceSpec['placement']['strategy'];
  spreadOver: string | null;
  /** The platforms the image offers; empty: not known, any node's. */
  platforms: readonly Platform[];
  /** Its replicated volume's holders and the rejection of any other node; absent: any node. */
  volume?: { nodes: ReadonlySet<string>; rejection: Rejection };
  rejections: {
    /** One per constraint, in order. */
    constraints: readonly Rejection[];
    /** One per constraint, in order: for a node whose platform or role is not known. */
    constraintsUnknown: readonly Rejection[];
    /** One per port, in order. */
    ports: readonly Rejection[];
    cpu: Rejection;
    memory: Rejection;
    cpuAndMemory: Rejection;
  };
}

/** Why one node cannot take one task: `key` groups equal reasons across nodes, `phrase` says it. */
export interface Rejection {
  key: string;
  phrase: string;
}

/** A node with what it carries (its usage grows as the call places tasks on it). */
export interface NodeSlot {
  node: RoledNode;
  usage: NodeUsage;
}

/** What a node already carries: resources, tasks, host ports (usage.ts keeps it up to date). */
export interface NodeUsage {
  cpuMillis: number;
  memoryBytes: number;
  /** Tasks of every service. */
  tasks: number;
  /** Host ports bound, as `80/tcp`. */
  ports: Set<string>;
  /** Tasks per service name. */
  perService: Map<string, number>;
}
