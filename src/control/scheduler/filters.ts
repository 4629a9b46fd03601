// Feasibility: the filter stages, in order. Each takes one node (its record and what it
// already carries) and one task's demand, and returns null when the node can take the task or
// a Rejection saying why not. Stages are independent and pure; the order matters only for the
// reason a node is counted under (the first stage that rejects it) and for speed (cheap checks
// first).

import { constraintUnknown, matchesConstraint, type Constraint } from '../../resources/spec/constraint.ts';
import type { Platform } from '../../resources/records.ts';
import type { NodeUsage } from './usage.ts';
import type { Rejection, RoledNode, TaskDemand } from './types.ts';

export type Filter = (node: RoledNode, usage: NodeUsage, demand: TaskDemand) => Rejection | null;

const suspect: Rejection = { key: 'state:suspect', phrase: 'suspect (not heard from lately)' };
const down: Rejection = { key: 'state:down', phrase: 'down' };

/** Only ready nodes take tasks: a suspect node may be gone, and a down one is. */
export const nodeReady: Filter = (node) => (node.state === 'ready' ? null : node.state === 'down' ? down : suspect);

const paused: Rejection = { key: 'availability:pause', phrase: 'paused' };
const draining: Rejection = { key: 'availability:drain', phrase: 'draining' };

/** Paused and draining nodes take no new tasks. */
export const nodeActive: Filter = (node) => (node.availability === 'active' ? null : node.availability === 'pause' ? paused : draining);

const runtimeUnavailable: Rejection = { key: 'runtime:unavailable', phrase: 'with its container runtime unavailable' };
const runtimeUnknown: Rejection = { key: 'runtime:unknown', phrase: 'with no report from its container runtime yet' };

/** A node whose agent cannot reach its runtime could not start the task. */
export const runtimeUp: Filter = (node) => (node.runtime.status === 'up' ? null : node.runtime.status === 'unavailable' ? runtimeUnavailable : runtimeUnknown);

export function platformText(p: Platform): string {
  return `${p.os}/${p.architecture}${p.variant !== undefined ? `/${p.variant}` : ''}`;
}

/** Whether an index entry serves the node: same OS and architecture, and the same variant when both name one. */
export function platformServes(offered: Platform, node: Platform): boolean {
  return offered.os === node.os && offered.architecture === node.architecture
    && (offered.variant === undefined || node.variant === undefined || offered.variant === node.variant);
}

/**
 * The image offers the node's platform (issue 40). A node that has not said its platform (an
 * older release), or an image whose platforms are not known (not pinned), passes: Docker's pull
 * is then what finds out.
 */
export const platformOffered: Filter = (node, _usage, demand) => {
  const mine = node.platform;
  if (demand.platforms.length === 0 || mine === undefined || demand.platforms.some((p) => platformServes(p, mine))) return null;
  const offered = [...new Set(demand.platforms.map(platformText))].sort().join(', ');
  return { key: `platform:${platformText(mine)}`, phrase: `${platformText(mine)} (the image offers ${offered} only)` };
};

/** Every constraint must hold; the first that does not is the reason (one on what the node has not said, said so). */
export const constraintsHold: Filter = (node, _usage, demand) => {
  const { constraints } = demand;
  for (let i = 0; i < constraints.length; i++) {
    const c = constraints[i] as Constraint;
    if (matchesConstraint(c, node)) continue;
    return (constraintUnknown(c, node) ? demand.rejections.constraintsUnknown[i] : demand.rejections.constraints[i]) as Rejection;
  }
  return null;
};

/**
 * A task with a replicated volume starts only where its data is (issue 41): on a node holding
 * the newest complete copy, or on the writer's own node; never from an older copy or empty.
 */
export const volumeHeld: Filter = (node, _usage, demand) => {
  if (demand.volume === undefined || demand.volume.nodes.has(node.id)) return null;
  return demand.volume.rejection;
};

/** The node's capacity minus the reservations it carries must cover the task's reservations. */
export const resourcesFree: Filter = (node, usage, demand) => {
  const cpuShort = demand.cpuMillis > 0 && usage.cpuMillis + demand.cpuMillis > node.capacity.cpuMillis;
  const memoryShort = demand.memoryBytes > 0 && usage.memoryBytes + demand.memoryBytes > node.capacity.memoryBytes;
  if (!cpuShort && !memoryShort) return null;
  if (cpuShort && memoryShort) return demand.rejections.cpuAndMemory;
  return cpuShort ? demand.rejections.cpu : demand.rejections.memory;
};

/** A host port can be bound once per node. */
export const hostPortsFree: Filter = (_node, usage, demand) => {
  const { ports } = demand;
  for (let i = 0; i < ports.length; i++) {
    if (usage.ports.has(ports[i] as string)) return demand.rejections.ports[i] as Rejection;
  }
  return null;
};

/** At most maxPerNode tasks of the service on one node. */
export const maxPerNodeRoom: Filter = (_node, usage, demand) => {
  if (demand.maxPerNode === null) return null;
  const here = usage.perService.get(demand.service) ?? 0;
  if (here < demand.maxPerNode) return null;
  return { key: 'maxPerNode', phrase: `already running ${here} ${here === 1 ? 'task' : 'tasks'} of ${demand.service} (maxPerNode ${demand.maxPerNode})` };
};

/** The stack, in order. */
export const filters: readonly Filter[] = [nodeReady, nodeActive, runtimeUp, platformOffered, constraintsHold, volumeHeld, resourcesFree, hostPortsFree, maxPerNodeRoom];

/** The first stage that rejects the node, with its index; null if every stage passes. */
export function firstRejection(node: RoledNode, usage: NodeUsage, demand: TaskDemand): { stage: number; rejection: Rejection } | null {
  for (let stage = 0; stage < filters.length; stage++) {
    const r = (filters[stage] as Filter)(node, usage, demand);
    if (r !== null) return { stage, rejection: r };
  }
  return null;
}

/** Whether the node passes every stage (the hot path: no rejection is kept). */
export function feasible(node: RoledNode, usage: NodeUsage, demand: TaskDemand): boolean {
  for (const f of filters) if (f(node, usage, demand) !== null) return false;
  return true;
}
