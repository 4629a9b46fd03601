// The control plane end to end in one process: three nodes on the in-memory transport, each with
// the document store, its leader loops and its agent on an in-memory runtime.

import { afterEach, describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { CommandResult } from '../../fsm/types.ts';
import { planApply } from '../../src/control/apply.ts';
import { toTransactions } from '../../src/resources/changes.ts';
import { controlFeatureLevel } from '../../src/resources/collections.ts';
import { ControlPlane } from '../../src/server/control-plane.ts';
import type { PassReport } from '../../src/control/leader-run.ts';
import { ControlStateReader, type ControlState } from '../../src/resources/state.ts';
import { parseSpecs } from '../../src/resources/spec/index.ts';
import { systemClock } from '../../src/executor/clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { MemoryCluster, type TestNode } from '../node/memory-cluster.ts';
import { waitFor } from '../transport/helpers.ts';

interface Member {
  t: TestNode;
  store: DocumentStore;
  control: ControlPlane;
  runtime: MemoryRuntime;
  /** The passes of its leader loops, as its metrics see them. */
  passes: PassReport[];
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
  const passes: PassReport[] = [];
  const control = new ControlPlane({
    node: t.node, store, clusterId: 'c1', runtime, health: { suspectAfterMs: 500, downAfterMs: 3_000, restartGraceMs: 3_000 }, log: quiet, observeLoops: (p) => passes.push(p),
    identity: { id: t.id, name: t.id.replace('node', 'n'), apiAddress: `memory:${t.id}`, peerAddress: `memory:${t.id}`, softwareVersion: 'test', capacity: { cpuMillis: 4000, memoryBytes: 8 * 2 ** 30 }, labels: {} },
  });
  control.start();
  return { t, store, control, runtime, passes };
}

async function start(runtime: { pullDelayMs?: number } = {}): Promise<void> {
  cluster = new MemoryCluster({ stateMachine: () => new DocumentStore() });
  await cluster.start();
  await cluster.waitForLeader();
  members = cluster.nodes.map((t) => attach(t, new MemoryRuntime({ clock: systemClock, pullAny: true, idPrefix: `${t.id}-`, ...runtime })));
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
    // The loops' passes, reported to the metrics by the node that ran them (the leader).
    const passes = members.flatMap((m) => m.passes);
    expect(new Set(passes.map((p) => p.loop))).toEqual(new Set(['service', 'placement', 'nodes', 'vips']));
    expect(passes.filter((p) => p.loop === 'placement' && p.outcome === 'done').reduce((n, p) => n + p.placements, 0)).toBe(3);
    expect(passes.every((p) => p.seconds >= 0 && (p.outcome === 'error') === (p.code !== undefined))).toBe(true);
  });

  it('registers once and starts the agent once when the feature level rises while it registers (an upgrade to a release that raises it)', async () => {
    cluster = new MemoryCluster({ stateMachine: () => new DocumentStore() });
    await cluster.start();
    const t = await cluster.waitForLeader();
    const runtime = new MemoryRuntime({ clock: systemClock, pullAny: true });
    const m = attach(t, runtime);
    members = [m];
    // The level changing while the registration is in flight: it used to register again and start the agent twice (a crash).
    t.node.emit('featureLevel', t.node.featureLevel);
    t.node.emit('featureLevel', t.node.featureLevel);
    await waitFor('the node registered', () => stateOf(m).nodes.size === 1, 10_000);
    await apply(web.replace('replicas: 3', 'replicas: 1'));
    await waitFor('its task running', () => running(stateOf(m), 'web').length === 1, 10_000);
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

  it('moves the loops to the new leader when the leader stops; the services keep running, nothing duplicated', async () => {
    await start();
    await apply(web);
    await waitFor('three tasks running', () => running(stateOf(members[0] as Member), 'web').length === 3, 10_000);
    const leader = await (cluster as MemoryCluster).waitForLeader();
    const old = members.find((m) => m.t === leader) as Member;
    const oldTerm = old.control.supervisor.runningTerm;
    expect(oldTerm).toBe(leader.node.currentTerm);
    const containersBefore = await Promise.all(members.filter((m) => m !== old).map((m) => m.runtime.list({ 'io.shoal.node': m.t.id })));
    await old.control.close();
    await old.t.node.stop();
    const rest = members.filter((m) => m !== old);
    const next = await (cluster as MemoryCluster).waitForLeader(5000, rest.map((m) => m.t));
    const successor = rest.find((m) => m.t === next) as Member;
    await waitFor('loops on the new leader', () => successor.control.supervisor.runningTerm === next.node.currentTerm, 5_000);
    expect(next.node.currentTerm).toBeGreaterThan(oldTerm ?? 0);
    // The two remaining nodes' containers are the same ones (not restarted), one running each.
    const after = await Promise.all(rest.map((m) => m.runtime.list({ 'io.shoal.node': m.t.id })));
    expect(after.map((cs) => cs.map((c) => [c.id, c.state]))).toEqual(containersBefore.map((cs) => cs.map((c) => [c.id, c.state])));
  });

  it('rolls an update back by itself when the new image exits at once, ending on the old spec', async () => {
    await start();
    await apply(web.replace('replicas: 3', 'replicas: 3\nupdate: {monitor: 1s, failureAction: rollback}\nrestart: {delay: 100ms}'));
    await waitFor('three tasks running', () => running(stateOf(members[0] as Member), 'web').length === 3, 10_000);
    // The new image's command exits at once with 1 (as a bad release would).
    for (const m of members) m.runtime.program((spec) => spec.image === 'busybox:broken', { exitAfterMs: 50, exitCode: 1 });
    await apply(web.replace('busybox:local', 'busybox:broken').replace('replicas: 3', 'replicas: 3\nupdate: {monitor: 1s, failureAction: rollback}\nrestart: {delay: 100ms}'));
    const m0 = members[0] as Member;
    await waitFor('the update rolled back', () => stateOf(m0).services.get('web')?.value.updateStatus.state === 'rolled-back', 20_000);
    const svc = stateOf(m0).services.get('web')?.value;
    expect(svc?.spec.image).toBe('busybox:local');
    expect(svc?.updateStatus.message).toMatch(/rolled back: task .* failed within the update's monitor/);
    await waitFor('three tasks of the old spec running', () => {
      const st = stateOf(m0);
      const r = [...st.tasks.values()].map((t) => t.value).filter((t) => t.desired === 'running' && t.observed === 'running');
      return r.length === 3 && r.every((t) => t.specVersion === svc?.specVersion);
    }, 20_000);
  });

  it('drains a node: its tasks move to the others and it gets none', async () => {
    await start();
    await apply(web);
    await waitFor('three tasks running', () => running(stateOf(members[0] as Member), 'web').length === 3, 10_000);
    const leader = await (cluster as MemoryCluster).waitForLeader();
    const lm = members.find((m) => m.t === leader) as Member;
    const target = members.find((m) => m !== lm) as Member;
    const rec = stateOf(lm).nodes.get(target.t.id);
    if (rec === undefined) throw new Error('no node record');
    const { result } = await leader.node.propose(encodeCommand({ cmd: { op: 'put', collection: 'shoal.nodes', id: target.t.id, doc: { ...rec.value, availability: 'drain' } as never, expect: { rev: rec.rev } }, ts: Date.now() }), { featureLevel: controlFeatureLevel });
    expect((result as CommandResult).ok).toBe(true);
    await waitFor('three tasks running, none on the drained node', () => {
      const r = running(stateOf(lm), 'web');
      return r.length === 3 && r.every((x) => x.node !== target.t.id);
    }, 20_000);
    expect((await target.runtime.list({ 'io.shoal.node': target.t.id })).filter((c) => c.state === 'running')).toEqual([]);
  });

  // Issue 40: each node has its own image store here, so a move pulls on the node it goes to.
  it('a drain\'s stop-first move pulls the image on the node it goes to before the old task stops, through the store', async () => {
    await start({ pullDelayMs: 1_500 });
    const leader = await (cluster as MemoryCluster).waitForLeader();
    await waitFor('feature level 6 (the pull requests)', () => leader.node.featureLevel >= 6, 10_000);
    await apply(web.replace('replicas: 3', 'replicas: 1').replace('busybox:local', 'reg.lan/app:1'));
    const lm = members.find((m) => m.t === leader) as Member;
    await waitFor('one task running', () => running(stateOf(lm), 'web').length === 1, 10_000);
    const from = members.find((m) => m.t.id === running(stateOf(lm), 'web')[0]?.node) as Member;
    const old = [...stateOf(lm).tasks.values()].find((t) => t.value.desired === 'running')?.value;
    const rec = stateOf(lm).nodes.get(from.t.id);
    if (rec === undefined || old === undefined) throw new Error('no node record or task');
    const { result } = await leader.node.propose(encodeCommand({ cmd: { op: 'put', collection: 'shoal.nodes', id: from.t.id, doc: { ...rec.value, availability: 'drain' } as never, expect: { rev: rec.rev } }, ts: Date.now() }), { featureLevel: controlFeatureLevel });
    expect((result as CommandResult).ok).toBe(true);
    // The request names another node, which pulls while the old task runs on.
    await waitFor('the other node pulling', () => stateOf(lm).imagePulls?.get(old.id)?.value.state === 'pulling', 10_000);
    const request = stateOf(lm).imagePulls?.get(old.id)?.value;
    expect(request).toMatchObject({ service: 'web', image: 'reg.lan/app:1', message: expect.stringMatching(/^pulling reg\.lan\/app:1/) });
    expect(request?.nodeId).not.toBe(from.t.id);
    expect((await from.runtime.list({ 'io.shoal.node': from.t.id })).filter((c) => c.state === 'running')).toHaveLength(1);
    const to = members.find((m) => m.t.id === request?.nodeId) as Member;
    await waitFor('the task moved where the image was pulled, and the request gone', () => {
      const r = running(stateOf(lm), 'web');
      return r.length === 1 && r[0]?.node === to.t.id && stateOf(lm).imagePulls?.has(old.id) === false;
    }, 20_000);
    // The node it went to pulled once, before the stop; the old node only for its own first start.
    expect(to.runtime.pullAuths.map((p) => p.image)).toEqual(['reg.lan/app:1']);
    expect(from.runtime.pullAuths.map((p) => p.image)).toEqual(['reg.lan/app:1']);
  });
});
