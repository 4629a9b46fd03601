// The leader's allocator pass for one network (key `net:<name>` of the leader's work queue,
// leader-run.ts): the allocator (address-allocator.ts, pure) over the store's nodes and the
// tasks attached to the network, written back as one compare-and-set on the network record,
// fenced by the run's term like every loop write.
//
// A task is attached when the spec it runs (specForTask) names the network. It holds its address
// until it is finished (failed, shut down) or orphaned, not merely told to stop: a container
// still stopping keeps its address, so it is never handed to a new task while in use.

import { allocate, type AllocationTask } from '../resources/address-allocator.ts';
import { putChange } from '../resources/changes.ts';
import { networksCollection, type NetworkRecord } from '../resources/network-resources.ts';
import type { Decision } from './orchestrator.ts';
import { specForTask, type ObservedTaskState } from '../resources/records.ts';
import { ownerOf } from '../resources/task-owner.ts';
import { jsonEqual } from '../resources/spec/index.ts';
import type { ControlState, Versioned } from '../resources/state.ts';

const finished: ReadonlySet<ObservedTaskState> = new Set(['failed', 'shutdown', 'orphaned']);

/** The tasks attached to a network, as the allocator sees them. */
export function attachedTasks(state: ControlState, network: string): AllocationTask[] {
  const out: AllocationTask[] = [];
  for (const t of state.tasks.values()) {
    const service = ownerOf(state, t.value);
    const spec = service === undefined ? null : specForTask(service, t.value);
    if (spec === null || !spec.networks.includes(network)) continue;
    const fixed = spec.networkAddresses[network];
    out.push({ id: t.value.id, nodeId: t.value.nodeId, live: !finished.has(t.value.observed), ...(fixed === undefined ? {} : { fixed }) });
  }
  return out;
}

/** The addresses the services on a network fix there (their current specs): no other task is handed one. */
export function reservedAddresses(state: ControlState, network: string): string[] {
  return [...state.services.values()].flatMap((s) => {
    const fixed = s.value.spec.networks.includes(network) ? s.value.spec.networkAddresses[network] : undefined;
    return fixed === undefined ? [] : [fixed];
  }).sort();
}

export function decideNetworkAllocation(state: ControlState, network: Versioned<NetworkRecord> | undefined, now: number): Decision & { problems: string[] } {
  const none = { plan: { changes: [], compares: [] }, wakeInMs: null, problems: [] };
  if (network === undefined) return none;
  const n = network.value;
  const tasks = attachedTasks(state, n.name);
  const r = allocate(n.spec, { slices: n.slices, addresses: n.addresses }, [...state.nodes.keys()], tasks, reservedAddresses(state, n.name));
  const fixedOf = new Map(tasks.map((t) => [t.id, t.fixed]));
  const problems = [
    ...r.nodesWithoutSlice.map((id) => `network ${n.name}: node ${id} has no slice of ${n.spec.subnet}: every /${n.spec.slicePrefix} is taken`),
    ...r.tasksWithoutAddress.map((id) => {
      const fixed = fixedOf.get(id);
      return fixed === undefined ? `network ${n.name}: task ${id} has no address: its node's slice is full or it has none`
        : `network ${n.name}: task ${id} waits for its fixed address ${fixed}: another task holds it still, or its node has no slice`;
    }),
  ];
  if (jsonEqual(r.allocation, { slices: n.slices, addresses: n.addresses })) return { ...none, problems };
  const record: NetworkRecord = { ...n, slices: r.allocation.slices, addresses: r.allocation.addresses, updatedAt: now };
  return { plan: { changes: [putChange(networksCollection, n.name, record, network.rev)], compares: [] }, wakeInMs: null, problems };
}
