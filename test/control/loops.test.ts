// The control plane end to end in one process: three nodes on the in-memory transport, each with
// the document store, its leader loops and its agent on an in-memory runtime.

import { afterEach, describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { CommandResult } from '../../fsm/types.ts';
import { planApply } from '../../src/control/apply.ts';
import { toTransactions } from '../../src/control/changes.ts';
import { controlFeatureLevel } from '../../src/control/collections.ts';
import { ControlPlane } from '../../src/control/control-plane.ts';
import { ControlStateReader, type ControlState } from '../../src/control/state.ts';
import { parseSpecs } from '../../src/control/spec/index.ts';
import { systemClock } from '../../src/executor/clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { MemoryCluster, type TestNode } from '../node/memory-cluster.ts';
import { waitFor } from '../transport/helpers.ts';

interface Member {
  t: TestNode;
  store: DocumentStore;
  control: ControlPlane;
  runtime: MemoryRuntime;
}

let cluster: MemoryCluster | undefined;
let members: Member[] = [];
afterEach(async () => {
  await Promise.all(members.map((m) => m.control.close()));
  await cluster?.stopAll();
  cluster = undefined;
  members = [];
});

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

function attach(t: TestNode, runtime: MemoryRuntime): Member {
  const store = t.sm as DocumentStore;
  const control = new ControlPlane({
    node: t.node, store, clusterId: 'c1', runtime, health: { suspectAfterMs: 500, downAfterMs: 3_000 }, log: quiet,
    identity: { id: t.id, name: t.id.replace('node', 'n'), apiAddress: `memory:${t.id}`, peerAddress: `memory:${t.id}`, softwareVersion: 'test', capacity: { cpuMillis: 4000, memoryBytes: 8 << 30 }, labels: {} },
  });
  control.start();
  return { t, store, control, runtime };
}

async function start(): Promise<void> {
  cluster = new MemoryCluster({ stateMachine: () => new DocumentStore() });
  await cluster.start();
  await cluster.waitForLeader();
  members = cluster.nodes.map((t) => attach(t, new MemoryRuntime({ clock: systemClock, pullAny: true, idPrefix: `${t.id}-` })));
}

async function apply(yaml: string): Promise<void> {
  const leader = await (cluster as MemoryCluster).waitForLeader();
  const m = members.find((x) => x.t === leader) ?? (members[0] as Member);
  const parsed = parseSpecs(yaml);
  const state = new ControlStateReader(m.store).read();
  const { plan } = planApply(state, parsed.services, leader.node.logTimeNow());
  for (const txn of toTransactions(plan)) {
    const { result } = await leader.node.propose(encodeCommand({ cmd: txn, ts: Date.now() }), { featureLevel: controlFeatureLevel });
    expect((result as CommandResult).ok).toBe(true);
  }
}

function stateOf(m: Member): ControlState {
  return new ControlStateReader(m.store).read();
}

function running(state: ControlState, service: string): { node: string; slot: number | string; container: string | null }[] {
  return [...state.tasks.values()].map((t) => t.value)
    .filter((t) => t.service === service && t.desired === 'running' && t.observed === 'running')
    .map((t) => ({ node: t.nodeId ?? '', slot: t.slot, container: t.containerId }));
}

const web = `apiVersion: shoal/v1
kind: Service
name: web
image: busybox:local
command: ["sleep", "3600"]
replicas: 3
`;

describe('the control plane, in process', () => {
  it('registers every node, schedules a service one task per node (spread), and runs it', async () => {
    await start();
    await waitFor('every node registered', () => members.every((m) => stateOf(m).nodes.size === 3), 10_000);
    await apply(web);
    await waitFor('three tasks running', () => running(stateOf(members[0] as Member), 'web').length === 3, 10_000);
    const r = running(stateOf(members[0] as Member), 'web');
    expect(new Set(r.map((x) => x.node)).size).toBe(3);
    expect(r.map((x) => x.slot).sort()).toEqual([1, 2, 3]);
    for (const m of members) expect((await m.runtime.list({ 'io.shoal.node': m.t.id })).filter((c) => c.state === 'running')).toHaveLength(1);
  });

  it('replaces the tasks of a node that goes silent past the down timeout, raising its epoch', async () => {
    await start();
    await apply(web);
    await waitFor('three tasks running', () => running(stateOf(members[0] as Member), 'web').length === 3, 10_000);
    const leader = await (cluster as MemoryCluster).waitForLeader();
    const victim = members.find((m) => m.t !== leader) as Member;
    await victim.control.close();
    await victim.t.node.stop();
    const watcher = members.find((m) => m.t === leader) as Member;
    await waitFor('the victim down with a raised epoch', () => {
      const n = stateOf(watcher).nodes.get(victim.t.id)?.value;
      return n?.state === 'down' && n.epoch === 1;
    }, 10_000);
    await waitFor('three tasks running on the two others', () => {
      const r = running(stateOf(watcher), 'web');
      return r.length === 3 && r.every((x) => x.node !== victim.t.id);
    }, 10_000);
  });
});
