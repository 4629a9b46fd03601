// The labels every container shoal creates carries, the container's name, and the ContainerSpec
// an agent creates for a task. Pure: no I/O, no clock.
//
// Labels are how an agent finds its own containers on a runtime it may share with other nodes
// (three nodes on one Docker daemon in `shoal dev` and the tests) and with containers shoal has
// nothing to do with (an existing Docker setup). They are read back strictly: a container whose
// labels do not parse is never adopted; it is removed only when it carries this cluster's id
// *and* this node's id (ownerLabels), because only then is it certainly this agent's.

import { z } from 'zod';
import type { TaskRecord } from '../resources/records.ts';
import type { ServiceSpec } from '../resources/spec/service-spec.ts';
import type { ContainerSpec, Labels } from './runtime.ts';

export const labelKeys = {
  cluster: 'io.shoal.cluster',
  node: 'io.shoal.node',
  service: 'io.shoal.service',
  /** JSON: a number for a replicated service's slot (`3`), a string for a global one's (`"4f2a..."`). */
  slot: 'io.shoal.slot',
  task: 'io.shoal.task',
  specVersion: 'io.shoal.spec-version',
  /** The leader term of the loop that assigned the task. */
  term: 'io.shoal.term',
  /** The node's epoch the task was assigned in. */
  nodeEpoch: 'io.shoal.node-epoch',
  /** `true` on the containers of an exclusive service (absent otherwise): killed when the node's lease runs out, whatever the store says. */
  exclusive: 'io.shoal.exclusive',
} as const;

/** Whether a container is an exclusive service's (it runs under the node's lease). */
export function isExclusiveContainer(labels: Labels): boolean {
  return labels[labelKeys.exclusive] === 'true';
}

/** What the labels of one of shoal's containers say. */
export interface ContainerLabels {
  clusterId: string;
  nodeId: string;
  service: string;
  slot: number | string;
  taskId: string;
  specVersion: number;
  term: number;
  nodeEpoch: number;
}

/** Who owns a container: the cluster and the node whose agent manages it. */
export interface Owner {
  clusterId: string;
  nodeId: string;
}

/** The short task id in a container name: Docker's convention for short ids. */
export const shortTaskIdLength = 12;

/** The labels an agent lists and follows events by: its cluster's id and its node's id. */
export function ownerLabels(owner: Owner): Labels {
  return { [labelKeys.cluster]: owner.clusterId, [labelKeys.node]: owner.nodeId };
}

/** True when the labels carry this cluster's id and this node's id (whether or not the rest parses). */
export function carriesOwner(labels: Labels, owner: Owner): boolean {
  return labels[labelKeys.cluster] === owner.clusterId && labels[labelKeys.node] === owner.nodeId;
}

export function containerLabels(l: ContainerLabels, exclusive = false): Labels {
  return {
    ...(exclusive ? { [labelKeys.exclusive]: 'true' } : {}),
    [labelKeys.cluster]: l.clusterId,
    [labelKeys.node]: l.nodeId,
    [labelKeys.service]: l.service,
    [labelKeys.slot]: JSON.stringify(l.slot),
    [labelKeys.task]: l.taskId,
    [labelKeys.specVersion]: String(l.specVersion),
    [labelKeys.term]: String(l.term),
    [labelKeys.nodeEpoch]: String(l.nodeEpoch),
  };
}

const wholeNumber = z.string().regex(/^(0|[1-9][0-9]{0,14})$/, 'must be a whole number').transform(Number);
const nonEmpty = z.string().min(1, 'must not be empty');
const slotSchema = z.string().transform((text, ctx) => {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = undefined;
  }
  if ((typeof v === 'number' && Number.isSafeInteger(v) && v >= 1) || (typeof v === 'string' && v !== '')) return v;
  ctx.addIssue({ code: 'custom', message: 'must be a slot: a whole number of 1 or more, or a quoted string' });
  return z.NEVER;
});

const labelsSchema = z.object({
  [labelKeys.cluster]: nonEmpty,
  [labelKeys.node]: nonEmpty,
  [labelKeys.service]: nonEmpty,
  [labelKeys.slot]: slotSchema,
  [labelKeys.task]: nonEmpty,
  [labelKeys.specVersion]: wholeNumber.refine((n) => n >= 1, 'must be at least 1'),
  [labelKeys.term]: wholeNumber,
  [labelKeys.nodeEpoch]: wholeNumber,
});

export type LabelsRead = { ok: true; labels: ContainerLabels } | { ok: false; problems: string[] };

/**
 * Reads a container's labels back. Every label of labelKeys must be present and well formed;
 * labels outside `io.shoal.` are ignored (a runtime or an image may add its own).
 */
export function readLabels(labels: Labels): LabelsRead {
  const r = labelsSchema.safeParse(labels);
  if (!r.success) {
    return { ok: false, problems: r.error.issues.map((i) => `${String(i.path[0] ?? '')}: ${i.code === 'invalid_type' ? 'missing' : i.message}`) };
  }
  const d = r.data;
  return {
    ok: true,
    labels: {
      clusterId: d[labelKeys.cluster],
      nodeId: d[labelKeys.node],
      service: d[labelKeys.service],
      slot: d[labelKeys.slot],
      taskId: d[labelKeys.task],
      specVersion: d[labelKeys.specVersion],
      term: d[labelKeys.term],
      nodeEpoch: d[labelKeys.nodeEpoch],
    },
  };
}

/** Keeps what a container name may hold ([A-Za-z0-9_.-]); anything else becomes '-'. */
function nameSafe(s: string): string {
  return s.replace(/[^A-Za-z0-9_.-]/g, '-');
}

/** `shoal-<service>.<slot>.<short task id>`: unique on a runtime as long as task ids are. */
export function containerName(service: string, slot: number | string, taskId: string): string {
  return `shoal-${nameSafe(service)}.${nameSafe(String(slot))}.${nameSafe(taskId).slice(0, shortTaskIdLength)}`;
}

/**
 * The container to create for a task placed on this node. The task must be assigned to
 * `owner.nodeId`, with its term and epoch (a programmer error otherwise: only placed tasks reach
 * an agent).
 */
export function buildContainerSpec(spec: ServiceSpec, task: TaskRecord, owner: Owner): ContainerSpec {
  if (task.nodeId !== owner.nodeId || task.assignedTerm === null || task.nodeEpoch === null) {
    throw new Error(`assertion: task ${task.id} is not placed on ${owner.nodeId} (node ${String(task.nodeId)}, term ${String(task.assignedTerm)}, epoch ${String(task.nodeEpoch)})`);
  }
  return {
    name: containerName(task.service, task.slot, task.id),
    image: spec.image,
    command: spec.command === null ? null : [...spec.command],
    args: spec.args === null ? null : [...spec.args],
    env: { ...spec.env },
    user: spec.user,
    // The service's own labels first: shoal's are never overridden (the reader refuses their keys too).
    labels: {
      ...spec.labels,
      ...containerLabels({
        clusterId: owner.clusterId, nodeId: owner.nodeId, service: task.service, slot: task.slot, taskId: task.id,
        specVersion: task.specVersion, term: task.assignedTerm, nodeEpoch: task.nodeEpoch,
      }, spec.exclusive),
    },
    limits: { ...spec.resources.limits },
    ports: spec.ports.map((p) => ({ ...p })),
    mounts: spec.mounts.map((m) => ({ ...m })),
    devices: spec.devices.map((d) => ({ ...d })),
    capAdd: [...spec.capAdd],
    capDrop: [...spec.capDrop],
    privileged: spec.privileged,
    hostNetwork: spec.hostNetwork,
    // Addresses are the leader's (the network records); the agent fills them in at create time.
    networks: spec.networks.map((name) => ({ name, address: null })),
    // On networks, the agent puts the node's service resolver first (agent.ts, withNetworks).
    dns: [...spec.dns],
    healthCheck: spec.healthCheck === null ? null : { ...spec.healthCheck, command: [...spec.healthCheck.command] },
    stopSignal: spec.stopSignal,
    stopGracePeriodMs: spec.stopGracePeriodMs,
    logs: { ...spec.logs },
    settings: {
      workingDir: spec.workingDir,
      hostname: spec.hostname,
      init: spec.init,
      readOnlyRootfs: spec.readOnlyRootfs,
      shmSizeBytes: spec.shmSizeBytes,
      tmpfs: spec.tmpfs.map((t) => ({ ...t })),
      extraHosts: spec.extraHosts.map((h) => ({ ...h })),
      dnsSearch: [...spec.dnsSearch],
      dnsOptions: [...spec.dnsOptions],
      ulimits: spec.ulimits.map((u) => ({ ...u })),
      sysctls: { ...spec.sysctls },
    },
  };
}
