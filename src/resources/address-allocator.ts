// The allocator of overlay addresses: a pure function (no I/O, no clock) of a network, its
// current allocation, the nodes and the tasks attached to it, run by the leader.
//
// Each node gets a slice of the network's subnet (a /24 of a /16, `spec.slicePrefix`), and
// hands its tasks addresses from its own slice only: no two nodes can ever give out one
// address, even if a node acts on an allocation the leader has since changed. In each slice,
// the first address is not used (it is the subnet's own address in slice 0; every slice is kept
// alike), the second is the node's gateway (its bridge on that network), the last is not used
// (the subnet's broadcast in the last slice), and tasks get the rest, lowest free first.
//
// A task whose service fixes its address (spec/network-addresses.ts) gets exactly that address,
// whichever node it runs on (the overlay is one L2 segment over the whole subnet; the slices only
// keep the nodes' choices apart), once no other live task holds it; and the fixed addresses of
// every service on the network are reserved: never handed to another task. A task that already
// held one before it was reserved keeps it (a running container's address never changes), and
// the fixed task waits, said in tasksWithoutAddress.
//
// Stable: a node keeps its slice and a live task keeps its address for as long as they exist;
// a slice is given back only when its node has left the store and no live task holds an address
// in it. Deterministic: new nodes take slices in node-id order, new tasks addresses in task-id
// order, so every leader computes the same allocation from the same state.

import { blockSize, cidrContains, cidrOf, formatAddress, parseAddress, type Cidr } from './address-cidr.ts';
import type { NetworkSpec } from './spec/network-spec.ts';

export interface NetworkAllocation {
  /** Node id to the index of its slice (slice i starts at subnet + i * slice size). */
  slices: Record<string, number>;
  /** Task id to its address on this network. */
  addresses: Record<string, string>;
}

export interface AllocationTask {
  id: string;
  /** Its node; null while pending (no address yet). */
  nodeId: string | null;
  /** Desired running and not finished: it holds its address. A task that is not live gives it back. */
  live: boolean;
  /** The address its service fixes on this network (networkAddresses); undefined: any. */
  fixed?: string;
}

export interface AllocationResult {
  allocation: NetworkAllocation;
  /** Nodes that got no slice: every slice is taken. */
  nodesWithoutSlice: string[];
  /** Live tasks that got no address: their node has no slice, or its slice is full. */
  tasksWithoutAddress: string[];
}

/** How many slices the subnet has. */
export function sliceCount(spec: NetworkSpec): number {
  return 2 ** (spec.slicePrefix - cidrOf(spec.subnet).prefix);
}

export function sliceCidr(spec: NetworkSpec, index: number): Cidr {
  return { base: cidrOf(spec.subnet).base + index * blockSize(spec.slicePrefix), prefix: spec.slicePrefix };
}

/** The gateway of a node's slice: the address of its bridge on the network. */
export function gatewayOf(spec: NetworkSpec, index: number): string {
  return formatAddress(sliceCidr(spec, index).base + 1);
}

/** The offsets in a slice that tasks may take: after the unused first and the gateway, before the unused last. */
export function taskOffsets(spec: NetworkSpec): { first: number; last: number } {
  return { first: 2, last: blockSize(spec.slicePrefix) - 2 };
}

export function allocate(
  spec: NetworkSpec, current: NetworkAllocation, nodeIds: readonly string[], tasks: readonly AllocationTask[], reserved: readonly string[] = [],
): AllocationResult {
  const live = new Map(tasks.filter((t) => t.live && t.nodeId !== null).map((t) => [t.id, t.nodeId as string]));
  const fixedOf = new Map(tasks.filter((t) => t.fixed !== undefined).map((t) => [t.id, t.fixed as string]));
  const { slices, nodesWithoutSlice } = allocateSlices(spec, current, new Set(nodeIds), live);
  const addresses: Record<string, string> = {};
  // Taken addresses, as numbers: by kept tasks, then by fixed ones.
  const used = new Set<number>();
  const keptAt = (taskId: string, nodeId: string): number | null => {
    const index = slices[nodeId];
    const text = current.addresses[taskId];
    const address = text === undefined ? null : parseAddress(text);
    if (index === undefined || address === null) return null;
    const fixed = fixedOf.get(taskId);
    // A fixed task keeps its address only when it is the fixed one (the spec may have changed it).
    if (fixed !== undefined) return address === parseAddress(fixed) ? address : null;
    const slice = sliceCidr(spec, index);
    if (!cidrContains(slice, address)) return null;
    const offset = address - slice.base;
    const { first, last } = taskOffsets(spec);
    return offset >= first && offset <= last ? address : null;
  };
  // Kept first (a live task keeps its address), then fixed ones, then new ones, each in task-id order.
  const ids = [...live.keys()].sort();
  const fresh: string[] = [];
  for (const id of ids) {
    const address = keptAt(id, live.get(id) as string);
    if (address === null || used.has(address)) {
      fresh.push(id);
      continue;
    }
    used.add(address);
    addresses[id] = formatAddress(address);
  }
  const tasksWithoutAddress: string[] = [];
  const reservedSet = new Set([...reserved, ...fixedOf.values()].map(parseAddress).filter((a): a is number => a !== null));
  for (const id of fresh) {
    const fixed = fixedOf.get(id);
    if (fixed === undefined) continue;
    const address = parseAddress(fixed);
    // Its node hosts the network only with a slice; another live task may hold the address still.
    if (address === null || slices[live.get(id) as string] === undefined || used.has(address) || !isTaskAddress(spec, address)) tasksWithoutAddress.push(id);
    else {
      used.add(address);
      addresses[id] = fixed;
    }
  }
  for (const id of fresh) {
    if (fixedOf.has(id)) continue;
    const index = slices[live.get(id) as string];
    const offset = index === undefined ? null : lowestFree(spec, sliceCidr(spec, index).base, (a) => used.has(a) || reservedSet.has(a));
    if (index === undefined || offset === null) {
      tasksWithoutAddress.push(id);
      continue;
    }
    const address = sliceCidr(spec, index).base + offset;
    used.add(address);
    addresses[id] = formatAddress(address);
  }
  return { allocation: { slices, addresses }, nodesWithoutSlice, tasksWithoutAddress };
}

/** Whether an address of the subnet is one a task may hold: not a slice's first, gateway or last (spec/network-addresses.ts says why). */
export function isTaskAddress(spec: NetworkSpec, address: number): boolean {
  const subnet = cidrOf(spec.subnet);
  if (!cidrContains(subnet, address)) return false;
  const offset = (address - subnet.base) % blockSize(spec.slicePrefix);
  const { first, last } = taskOffsets(spec);
  return offset >= first && offset <= last;
}

function allocateSlices(spec: NetworkSpec, current: NetworkAllocation, nodes: ReadonlySet<string>, live: ReadonlyMap<string, string>): { slices: Record<string, number>; nodesWithoutSlice: string[] } {
  const holding = new Set(live.values());
  const count = sliceCount(spec);
  const slices: Record<string, number> = {};
  const taken = new Set<number>();
  for (const nodeId of Object.keys(current.slices).sort()) {
    const index = current.slices[nodeId] as number;
    // A node that left keeps its slice while a live task of it still holds an address there.
    const keep = (nodes.has(nodeId) || holding.has(nodeId)) && Number.isInteger(index) && index >= 0 && index < count && !taken.has(index);
    if (!keep) continue;
    slices[nodeId] = index;
    taken.add(index);
  }
  const nodesWithoutSlice: string[] = [];
  let next = 0;
  for (const nodeId of [...nodes].sort()) {
    if (slices[nodeId] !== undefined) continue;
    while (taken.has(next)) next++;
    if (next >= count) {
      nodesWithoutSlice.push(nodeId);
      continue;
    }
    slices[nodeId] = next;
    taken.add(next);
  }
  return { slices, nodesWithoutSlice };
}

function lowestFree(spec: NetworkSpec, base: number, taken: (address: number) => boolean): number | null {
  const { first, last } = taskOffsets(spec);
  for (let offset = first; offset <= last; offset++) if (!taken(base + offset)) return offset;
  return null;
}
